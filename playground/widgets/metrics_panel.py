"""The metrics panel: a lesson's typed metrics, measured beside predicted with the error.

A `playground/` widget of docs/design.md. It renders the list of Metric a lesson
returns through the one generic path (playground.formatting.metric_table):
per series (a schedule, a ZeRO stage) a heading, then the predicted metrics
as "measured | predicted | error" (per-rank lists side by side, with the
worst rank's error), then the facts; after a run, last, the lesson's headline
times: the prediction before the run (from the calibration, an interval) and the one
after it (refit on the run), labelled, against the prediction error budget. It knows
units, never a lesson.

Imports: textual and the pure metric types; never torch.
"""

from __future__ import annotations

import re

from textual.content import Content
from textual.widgets import Static

from playground.formatting import metric_table, plain, text_list
from playground.i18n import t
from playground.prediction_error import budget_lines, budget_rows, budget_words
from scenarios.metrics import Metric


def break_name(name: str, width: int) -> list[str]:
    """`name` in lines of at most `width`, broken after a `.` or `_` (never mid-word:
    `collectives_per_layer.` / `backward.all_reduce`); a word longer than a line is cut."""
    if len(name) <= width:
        return [name]
    parts = re.findall(r"[^._ ]+[._ ]?|[._ ]", name)
    lines = [""]
    for part in parts:
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        while len(lines[-1]) + len(part) > width:  # a word wider than the panel: cut
            room = width - len(lines[-1])
            lines[-1] += part[:room]
            part = part[room:]
            lines.append("")
        lines[-1] += part
    return [line for line in lines if line]


def name_lines(label: tuple[str, str], indent: str, width: int) -> list[Content]:
    """A row's (text, style) label alone, on as many lines as it needs (break_name)."""
    return [
        Content.styled(indent + part, label[1])
        for part in break_name(label[0].strip(), width - len(indent))
    ]


def metrics_content(
    metrics: list[Metric],
    language: str,
    width: int = 80,
    headline: tuple[str, ...] = (),
    note: str | None = None,
) -> Content:
    """Per series, the predicted rows as `name  measured │ predicted  error` (per-rank
    lists side by side), then the facts; a row too wide for `width` puts its values on
    the next line, indented; after a run, last, the `headline` times' predictions before
    the run (with their interval) and after it, against their budgets
    (playground.prediction_error); and `note` (a stale calibration, and why), if any."""
    if not metrics:
        return Content(t("app.no_metrics", language))
    lines: list[Content] = []
    for section in metric_table(metrics, language):
        indent = ""
        if section.series is not None:
            lines.append(Content.styled(section.series, "bold"))
            indent = "  "
        label_width = min(max(len(row.label) for row in section.rows), max(8, width // 2))
        if any(row.paired for row in section.rows):
            header = (
                f"{t('app.measured', language)} │ {t('app.predicted', language)}"
                f"  ({t('app.error', language)})"
            )
            lines.append(Content.styled(f"{indent}{header}", "$foreground-muted"))
        for row in section.rows:
            label = (
                f"{indent}{row.label:<{label_width}}  ",
                "bold" if row.paired else "$foreground-muted",
            )
            if text_list(row.metric) and not row.paired:  # a list: one item per line
                lines += name_lines(label, indent, width)
                lines += [Content(f"{indent}  · {plain(v)}") for v in row.metric.value]
                continue
            if row.paired:
                values = Content.assemble(
                    f"{row.value} │ {row.predicted}  ", (row.error, "$text-warning")
                )
            else:
                values = Content(row.value)
            if len(label[0]) + len(values.plain) <= width:
                lines.append(Content.assemble(label, values))
            else:
                lines += name_lines(label, indent, width)
                lines.append(Content.assemble(f"{indent}    ", values))
    # Last, as the text report prints it: the metrics stay where a narrow panel shows them.
    # Before and after the run side by side where the panel is wide enough.
    budget = budget_lines(budget_rows(metrics, headline), budget_words(language), width)
    if budget:
        lines += [Content(""), Content.styled(budget[0], "bold")]
        lines += [
            Content.styled(line, "$text-warning" if "✗" in line else "") for line in budget[1:]
        ]
    if note:  # under the before-run prediction it explains
        lines += [Content(""), Content.styled(note, "$text-warning")]
    return Content("\n").join(lines)


class MetricsPanel(Static):
    """Shows a lesson's metrics in the learner's language, fitted to its width."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[list[Metric], str, tuple[str, ...], str | None] = ([], "en", (), None)

    def show(
        self,
        metrics: list[Metric],
        language: str,
        headline: tuple[str, ...] = (),
        note: str | None = None,
    ) -> None:
        self._shown = (metrics, language, headline, note)
        width = max(20, (self.size.width or 80) - 1)
        self.update(metrics_content(metrics, language, width, headline, note))

    def on_resize(self) -> None:
        self.show(*self._shown)
