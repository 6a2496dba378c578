"""Typed metrics for people: one way to print a value, a pair and a table of them.

The one rendering path of docs/design.md's lesson contract: the CLI's text, the
app's metrics panel and the HTML export all go through `metric_table`, which
knows units (scenarios.metrics.Unit), never a lesson or a metric's name.
Metrics are grouped by series (a schedule, a ZeRO stage), the ones without a
series first; within a group the predicted ones (measured | predicted | error)
come before the facts.

Everything is shown in the learner's language (`language`; None: playground.i18n
.default_language()): a flag's yes/no from the catalogs, a text value as its
Spanish twin when it has one (Metric.es). Rows carry the metric so localised
(`Row.metric.value` is what the learner reads), so a caller that prints a text
list item by item reads it in that language too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from playground.i18n import default_language, t
from runtime.sim.units import format_bytes, format_seconds
from scenarios.metrics import Metric, Value

EMPTY = "—"


def format_value(unit: str, value: Value, language: str | None = None) -> str:
    """`value` in its unit: 1.2 ms, 4 MiB, 3.1 GB/s, 12.5%, 1.08×; lists element-wise; a
    flag as yes/no in `language` (None: the learner's)."""
    if value is None:
        return EMPTY
    if isinstance(value, list):
        return "[" + ", ".join(format_value(unit, v, language) for v in value) + "]"
    if isinstance(value, bool):
        return t("metrics.yes" if value else "metrics.no", language or default_language())
    if not isinstance(value, int | float):
        return str(value)
    if unit == "s":
        return format_seconds(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "GB/s":
        return f"{value:.3g} GB/s"
    if unit == "fraction":
        return f"{value:.1%}"
    if unit == "ratio":
        return f"{value:.2f}×"
    if unit == "diff":
        return f"{value:.2g}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.4g}"
    return f"{value:,.0f}" if unit == "count" else f"{value:g}"


def format_error(metric: Metric) -> str:
    error = metric.error
    return "" if error is None else f"{error:.1%}"


def localized(metric: Metric, language: str | None = None) -> Metric:
    """The metric as the learner reads it in `language` (None: the learner's): its value
    replaced by its Spanish twin under Spanish, when it has one."""
    shown = metric.text(language or default_language())
    return metric if shown is metric.value else replace(metric, value=shown)


def label(metric: Metric) -> str:
    """The metric's name, with the memory category it is part of."""
    return f"{metric.name} ({metric.category})" if metric.category else metric.name


@dataclass(frozen=True)
class Row:
    """One line of a metrics table, formatted."""

    label: str
    value: str
    predicted: str  # "" for a fact (nothing predicted)
    error: str
    metric: Metric

    @property
    def paired(self) -> bool:
        return self.metric.is_predicted


@dataclass(frozen=True)
class Section:
    series: str | None
    rows: list[Row]


def metric_table(metrics: list[Metric], language: str | None = None) -> list[Section]:
    """Sections by series (none first), predicted rows before facts in each, in
    `language` (None: the learner's)."""
    language = language or default_language()
    order: dict[str | None, list[Metric]] = {None: []}
    for metric in metrics:
        order.setdefault(metric.series, []).append(localized(metric, language))
    sections = []
    for series, group in order.items():
        ranked = sorted(group, key=lambda m: not m.is_predicted)  # stable: lesson's order kept
        rows = [
            Row(
                label(m),
                format_value(m.unit, m.value, language),
                format_value(m.unit, m.predicted, language) if m.is_predicted else "",
                format_error(m),
                m,
            )
            for m in ranked
        ]
        if rows:
            sections.append(Section(series, rows))
    return sections


def metric_lines(
    metrics: list[Metric], words: dict[str, str], indent: str = "  ", language: str | None = None
) -> list[str]:
    """Aligned text lines: a header over the predicted pairs, then `name  value` facts;
    each series as a heading with its lines indented. `words`: measured, predicted,
    error; values in `language` (None: the learner's)."""
    lines: list[str] = []
    for section in metric_table(metrics, language):
        pad = indent
        if section.series is not None:
            lines.append(f"{indent}{section.series}:")
            pad = indent * 2
        width = max(len(row.label) for row in section.rows)
        if any(r.paired for r in section.rows):
            lines.append(
                f"{pad}{'':<{width}}  {words['measured']:>12}  {words['predicted']:>12}  "
                f"{words['error']:>6}"
            )
        for row in section.rows:
            # Asked of the row itself: `row in scalar` compared it with every other row
            # (and their metrics, field by field), so 100k metrics took minutes.
            if row.paired and not isinstance(row.metric.value, list):
                line = f"{pad}{row.label:<{width}}  {row.value:>12}  {row.predicted:>12}  {row.error:>6}"
                lines.append(line.rstrip())
            elif row.paired:
                lines.append(
                    f"{pad}{row.label:<{width}}  {row.value} | {row.predicted}  {row.error}".rstrip()
                )
            elif text_list(row.metric):
                lines.append(f"{pad}{row.label}:")  # a list: one item per line
                lines += [f"{pad}  · {plain(v)}" for v in row.metric.value]
            else:
                lines.append(f"{pad}{row.label:<{width}}  {row.value}")
    return lines


def text_list(metric: Metric) -> bool:
    """A list of text (the config search's best configurations): read one per line."""
    return metric.unit == "text" and isinstance(metric.value, list) and bool(metric.value)


def plain(value: Any) -> str:
    """A parameter or other free text as it should be printed (no control characters)."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(value))
