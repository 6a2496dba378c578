"""The narrative panel: the lesson step the time cursor is in, with its formula and number.

A `playground/` widget of docs/design.md. Before any cursor it shows the lesson's
summary and the list of its steps; then the step whose phases include the
phase of the Action under the cursor (title, body, formula), and the value of
the Metric the step quotes, for the series under the cursor (the schedule or
ZeRO stage the Action belongs to, read from its `series` field).

Imports: textual and the lesson contract's pure types; never torch.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from playground.formatting import format_value, localized
from scenarios.base import Lesson, NarrativeStep
from scenarios.metrics import Metric, find


def metric_line(
    step: NarrativeStep, metrics: list[Metric], series: str | None, language: str = "en"
) -> str:
    """`name = value` of the metric the step quotes (measured, else predicted), its value
    in `language` (a text's Spanish twin, a flag's sí/no)."""
    if not step.metric:
        return ""
    metric = find(metrics, step.metric, series)
    if metric is None:
        return ""
    metric = localized(metric, language)
    value = metric.value if metric.value is not None else metric.predicted
    return f"{metric.name} = {format_value(metric.unit, value, language)}"


def narrative_content(
    lesson: Lesson, language: str, step_index: int | None, metric: str
) -> Content:
    """The current step (title, body, formula, measured number) or, before any
    cursor, the lesson's summary and the list of its steps."""
    if step_index is None:
        lines: list[Content | str] = [Content.styled(lesson.summary[language], "italic")]
        for n, step in enumerate(lesson.narrative, 1):
            lines.append(Content.styled(f"{n}. {step.title[language]}", "bold"))
        return Content("\n").join(lines)
    step = lesson.narrative[step_index]
    parts: list[str | tuple[str, str]] = [
        (f"{step_index + 1}/{len(lesson.narrative)} · {step.title[language]}", "bold"),
        "\n",
        step.body[language],
    ]
    if step.formula:
        parts += ["\n\n", (step.formula, "bold $text-accent")]
    if metric:
        parts += ["\n", (metric, "$text-success")]
    return Content.assemble(*parts)


class NarrativePanel(Static):
    """Remembers the last step, so the text stays put while the cursor is between spans."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.step_index: int | None = None

    def show(
        self,
        lesson: Lesson,
        language: str,
        step_index: int | None,
        metric: str,
    ) -> None:
        self.step_index = step_index
        self.update(narrative_content(lesson, language, step_index, metric))
