"""The prediction error budget: how far a run's headline time was predicted, before and after.

Part of playground/ in docs/design.md, beside playground.session. Before a run a
lesson's prediction comes from the calibrated profile alone (what `predict`
says); after it, from the same Program with what the ranks measured
(runtime.fit.refine). Each paired metric of a run carries both (Metric.before,
Metric.predicted). The budget holds the lesson's headline time (Hooks.headline:
its makespan or step time, one per series) to BEFORE_RUN_BUDGET before the run
and AFTER_RUN_BUDGET after it. `--json` writes every paired metric's errors as
`prediction_error`, the headline ones with their verdicts; the text report, the
app's metrics panel and the HTML export print the headline rows.

Imports: the pure metric types and the i18n catalogs (the app's panel uses it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from scenarios.metrics import Metric, finite

BEFORE_RUN_BUDGET = 0.25
AFTER_RUN_BUDGET = 0.10


@dataclass(frozen=True)
class BudgetRow:
    """One paired metric of one series: measured, and predicted before and after the run;
    a headline one is held to the budgets."""

    metric: Metric
    headline: bool = True

    @property
    def before_within(self) -> bool | None:
        return _within(self.metric.before_error, BEFORE_RUN_BUDGET if self.headline else None)

    @property
    def after_within(self) -> bool | None:
        return _within(self.metric.error, AFTER_RUN_BUDGET if self.headline else None)

    def to_dict(self) -> dict[str, Any]:
        m = self.metric
        return {
            "name": m.name,
            "series": m.series,
            "category": m.category,  # a part of a memory bar, or None
            "headline": self.headline,
            "measured": m.value,
            "before_run": {
                "predicted": m.before,
                "error": finite(m.before_error),
                "budget": BEFORE_RUN_BUDGET if self.headline else None,
                "within": self.before_within,
            },
            "after_run": {
                "predicted": m.predicted,
                "error": finite(m.error),
                "budget": AFTER_RUN_BUDGET if self.headline else None,
                "within": self.after_within,
            },
        }


def _within(error: float | None, budget: float | None) -> bool | None:
    if budget is None or error is None or not math.isfinite(error):
        return None
    return error <= budget


def with_before(metrics: list[Metric], before: list[Metric]) -> list[Metric]:
    """A run's metrics, each predicted one with what `before` (the same lesson's metrics
    predicted from the calibrated profile, before the run) said of it."""
    said = {_key(m): m.predicted for m in before if m.predicted is not None}
    return [
        replace(m, before=said[_key(m)]) if m.predicted is not None and _key(m) in said else m
        for m in metrics
    ]


def _key(metric: Metric) -> tuple[str, str | None, str | None]:
    # A memory bar's parts share name and series (zero's peak_bytes per category).
    return metric.name, metric.series, metric.category


def budget_rows(metrics: list[Metric], headline: tuple[str, ...]) -> list[BudgetRow]:
    """The headline metrics a run measured and predicted as single numbers, per series
    (one measured as 0 too, whose error `error_rows` has none to give)."""
    return [BudgetRow(m) for m in metrics if _headline(m, headline)]


def error_rows(metrics: list[Metric], headline: tuple[str, ...]) -> list[BudgetRow]:
    """Every metric a run measured and predicted (a list's error is its worst rank's),
    the headline ones held to the budgets: `--json`'s `prediction_error`."""
    return [
        BudgetRow(m, _headline(m, headline))
        for m in metrics
        if m.value is not None and m.error is not None
    ]


def _headline(metric: Metric, headline: tuple[str, ...]) -> bool:
    """A headline time measured and predicted as single numbers (not a per-rank list)."""
    return metric.name in headline and _number(metric.value) and _number(metric.predicted)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def budget_doc(rows: list[BudgetRow]) -> dict[str, Any]:
    """`prediction_error` of a run's `--json`."""
    return {
        "budget": {"before_run": BEFORE_RUN_BUDGET, "after_run": AFTER_RUN_BUDGET},
        "metrics": [row.to_dict() for row in rows],
    }


def budget_words(language: str) -> dict[str, str]:
    """The words of `budget_lines` in the learner's language."""
    from playground.i18n import t

    words = ("heading", "headline", "before", "after", "stale", "noisy")
    return {w: t(f"app.budget_{w}", language) for w in words}


def budget_lines(rows: list[BudgetRow], words: dict[str, str]) -> list[str]:
    """The rows as text: a heading with the budgets, then per row `label  before │ after`,
    each error marked within (✓) or over (✗) its budget. A row's label is its series
    when the rows share one metric (named in the heading), else series and metric.
    Over budget before the run, a line says to calibrate again; over after it, a line
    says the budget holds the median of runs. `words`: the heading, "the headline
    times", "before", "after" and those lines in the learner's language."""
    if not rows:
        return []
    names = {row.metric.name for row in rows}
    one = len(names) == 1
    head = words["heading"].format(
        what=next(iter(names)) if one else words["headline"],
        before=f"{BEFORE_RUN_BUDGET:.0%}",
        after=f"{AFTER_RUN_BUDGET:.0%}",
    )
    labels = [
        (row.metric.series or row.metric.name)
        if one
        else " ".join(filter(None, (row.metric.series, row.metric.name)))
        for row in rows
    ]
    width = max(map(len, labels))
    lines = [head, f"  {'':<{width}} {words['before']:>8} │ {words['after']}"]
    for label, row in zip(labels, rows, strict=True):
        before = mark(row.metric.before_error, row.before_within)
        after = mark(row.metric.error, row.after_within)
        lines.append(f"  {label:<{width}} {before:>8} │ {after}")
    if any(row.before_within is False for row in rows):
        lines.append(words["stale"])  # most often the machine moved since it was calibrated
    if any(row.after_within is False for row in rows):
        lines.append(words["noisy"])  # the budget is the median's: one run may stray
    return lines


def mark(error: float | None, within: bool | None) -> str:
    """An error and its verdict, as a row prints it: `4.2% ✓`, `31.0% ✗`, or `—`."""
    if within is None or error is None:
        return "—"
    return f"{error:.1%} {'✓' if within else '✗'}"
