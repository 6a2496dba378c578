"""The metrics panel: a lesson's typed metrics, measured beside predicted with the error.

A `playground/` widget of DESIGN.md. It renders the list of Metric a lesson
returns through the one generic path (playground.formatting.metric_table):
per series (a schedule, a ZeRO stage) a heading, then the predicted metrics
as "measured | predicted | error" (per-rank lists side by side, with the
worst rank's error), then the facts. It knows units, never a lesson.

Imports: textual and the pure metric types; never torch.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from playground.formatting import metric_table
from playground.i18n import t
from scenarios.metrics import Metric


def metrics_content(metrics: list[Metric], language: str) -> Content:
    if not metrics:
        return Content(t("app.no_metrics", language))
    lines: list[Content] = []
    for section in metric_table(metrics):
        indent = ""
        if section.series is not None:
            lines.append(Content.styled(section.series, "bold"))
            indent = "  "
        width = max(len(row.label) for row in section.rows)
        if any(row.paired for row in section.rows):
            header = (
                f"{indent}{'':<{width}}  {t('app.measured', language):>10}  "
                f"{t('app.predicted', language):>10}  {t('app.error', language):>6}"
            )
            lines.append(Content.styled(header, "$foreground-muted"))
        for row in section.rows:
            if not row.paired:
                lines.append(
                    Content.assemble(
                        (f"{indent}{row.label:<{width}}  ", "$foreground-muted"), row.value
                    )
                )
                continue
            if isinstance(row.metric.value, list) or isinstance(row.metric.predicted, list):
                values = f"{row.value} / {row.predicted}  "  # per rank: both lists, worst error
            else:
                values = f"{row.value:>10}  {row.predicted:>10}  "
            lines.append(
                Content.assemble(
                    (f"{indent}{row.label:<{width}}  ", "bold"),
                    values,
                    (f"{row.error:>6}", "$text-warning"),
                )
            )
    return Content("\n").join(lines)


class MetricsPanel(Static):
    """Shows a lesson's metrics in the learner's language."""

    def show(self, metrics: list[Metric], language: str) -> None:
        self.update(metrics_content(metrics, language))
