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

The before-run prediction is an interval (Metric.before_low, before_high): the same
Program simulated at the fast and the slow end of the spread the calibration
measured (runtime.fit.conditions.ends); its verdict is "measured within the
predicted interval" (✓/✗) beside the relative error. A calibration without a
recorded spread (an older cache, a named profile) leaves the interval unknown, and
says so. `staleness_line` says when the calibration no longer describes the machine
(runtime.fit.conditions.staleness), with the command that calibrates it again.

Imports: the pure metric types, runtime.fit.conditions' verdicts and the i18n
catalogs (the app's panel uses it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from runtime.fit.conditions import LOAD_ABS, LOAD_REL, Conditions, Staleness
from scenarios.metrics import Metric, Value, finite

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

    @property
    def within_interval(self) -> bool | None:
        """Whether the measurement lies within the before-run interval (every rank's, for
        a list); None where the interval is unknown."""
        return in_interval(self.metric.value, self.metric.before_low, self.metric.before_high)

    def to_dict(self) -> dict[str, Any]:
        m = self.metric
        return {
            "name": m.name,
            "series": m.series,
            "category": m.category,  # a part of a memory bar, or None
            "headline": self.headline,
            "measured": m.value,
            # From the calibration: an interval, from the spread it measured.
            "before_run": {
                "predicted": m.before,
                "low": m.before_low,
                "high": m.before_high,
                "within_interval": self.within_interval,
                "error": finite(m.before_error),
                "budget": BEFORE_RUN_BUDGET if self.headline else None,
                "within": self.before_within,
            },
            # Refit on this run's own measurements: no calibration spread, no interval.
            "after_run": {
                "predicted": m.predicted,
                "low": None,
                "high": None,
                "error": finite(m.error),
                "budget": AFTER_RUN_BUDGET if self.headline else None,
                "within": self.after_within,
            },
        }


def _within(error: float | None, budget: float | None) -> bool | None:
    if budget is None or error is None or not math.isfinite(error):
        return None
    return error <= budget


def in_interval(value: Value, low: Value, high: Value) -> bool | None:
    """low ≤ value ≤ high (element-wise for lists, every element); None where any side
    is unknown or not a number."""
    if isinstance(value, list):
        if not (isinstance(low, list) and isinstance(high, list)) or not (
            len(value) == len(low) == len(high)
        ):
            return None
        each = [in_interval(v, lo, hi) for v, lo, hi in zip(value, low, high, strict=True)]
        return None if None in each else all(each)
    if not (_number(value) and _number(low) and _number(high)):
        return None
    return float(low) <= float(value) <= float(high)  # type: ignore[arg-type]


def with_before(
    metrics: list[Metric],
    before: list[Metric],
    ends: tuple[list[Metric], list[Metric]] | None = None,
) -> list[Metric]:
    """A run's metrics, each predicted one with what `before` (the same lesson's metrics
    predicted from the calibrated profile, before the run) said of it, and with `ends`
    (the same, predicted at the fast and the slow end of the calibration's spread) the
    interval: the lowest and highest of the three (a rate is highest at the fast end)."""
    said = {_key(m): m.predicted for m in before if m.predicted is not None}
    sides = [{_key(m): m.predicted for m in end if m.predicted is not None} for end in ends or ()]
    out = []
    for m in metrics:
        key = _key(m)
        if m.predicted is None or key not in said:
            out.append(m)
            continue
        values = [said[key], *(side[key] for side in sides if key in side)]
        low, high = _extremes(values) if len(values) == 3 else (None, None)
        out.append(replace(m, before=said[key], before_low=low, before_high=high))
    return out


def _extremes(values: list[Value]) -> tuple[Value, Value]:
    """The lowest and highest of predictions of one metric (element-wise for lists of one
    length); (None, None) where they are not numbers alike."""
    if all(_number(v) for v in values):
        return min(values), max(values)  # type: ignore[type-var]
    if all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1:  # type: ignore[arg-type]
        pairs = [_extremes(list(column)) for column in zip(*values, strict=True)]  # type: ignore[misc]
        if all(lo is not None for lo, _ in pairs):
            return [lo for lo, _ in pairs], [hi for _, hi in pairs]
    return None, None


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


def budget_doc(
    rows: list[BudgetRow], calibration: Staleness | None = None, conditions: Any = None
) -> dict[str, Any]:
    """`prediction_error` of a run's `--json`: the budgets, each paired metric's rows,
    and the calibration the before-run prediction came from: whether its interval was
    measured (a spread recorded) or is unknown, its conditions as recorded
    (runtime.fit.conditions.Conditions.to_dict, or None) and whether it was stale
    when the run started (`calibration`; None for a named profile)."""
    recorded = Conditions.from_dict(conditions)  # a malformed record: unknown
    spread = recorded is not None and recorded.spread is not None
    return {
        "budget": {
            "before_run": BEFORE_RUN_BUDGET,
            "after_run": AFTER_RUN_BUDGET,
            "before_run_verdict": "measured within the predicted interval",
        },
        "calibration": {
            "interval": "measured" if spread else "unknown",
            "conditions": recorded.to_dict() if recorded is not None else None,
            "staleness": calibration.to_dict() if calibration is not None else None,
        },
        "metrics": [row.to_dict() for row in rows],
    }


def budget_words(language: str) -> dict[str, str]:
    """The words of `budget_lines` in the learner's language."""
    from playground.i18n import t

    words = (
        "headline",
        "before",
        "after",
        "stale",
        "noisy",
        "measured",
        "before_run",
        "after_run",
        "inside",
        "outside",
        "no_interval",
    )
    return {
        "language": language,
        # The heading states the before-run budget as the interval's verdict too.
        "heading": t("app.budget_interval_heading", language),
        **{w: t(f"app.budget_{w}", language) for w in words},
    }


def budget_lines(
    rows: list[BudgetRow], words: dict[str, str], width: int | None = None
) -> list[str]:
    """The rows as text: a heading with the budgets, then per row its label and the
    measurement, the prediction before the run (from the calibration: the value, its
    interval `[low–high]`, whether the measurement lies within it ✓/✗, and the error
    against its budget) and the one after it (refit on this run: the value and its
    error), side by side where `width` holds both (None: always), else one under the
    other. A row's label is its series when the rows share one metric (named in the
    heading), else series and metric. Outside the interval before the run (over budget,
    where no interval is known), a line says to calibrate again; over after it, a line says the budget holds
    the median of runs. `words`: budget_words, in the learner's language."""
    if not rows:
        return []
    from playground.formatting import format_value

    language = words.get("language", "en")
    names = {row.metric.name for row in rows}
    one = len(names) == 1
    head = words["heading"].format(
        what=next(iter(names)) if one else words["headline"],
        before=f"{BEFORE_RUN_BUDGET:.0%}",
        after=f"{AFTER_RUN_BUDGET:.0%}",
    )
    lines = [head]
    for row in rows:
        m = row.metric
        label = (m.series or m.name) if one else " ".join(filter(None, (m.series, m.name)))

        def value(v: Value, unit: str = m.unit) -> str:
            return format_value(unit, v, language)

        if m.before_low is None or m.before_high is None:
            interval = f"[{words['no_interval']}]"
        else:
            verdict = {True: words["inside"], False: words["outside"], None: ""}
            interval = f"[{value(m.before_low)}–{value(m.before_high)}]"
            interval += f" {verdict[row.within_interval]}".rstrip()
        before = (
            f"{words['before_run']}: {value(m.before)} {interval} · "
            f"{mark(m.before_error, row.before_within)}"
        )
        after = f"{words['after_run']}: {value(m.predicted)} · {mark(m.error, row.after_within)}"
        lines.append(f"  {label}: {words['measured']} {value(m.value)}")
        if width is None or len(before) + len(after) + 7 <= width:
            lines.append(f"    {before} │ {after}")
        else:
            lines += [f"    {before}", f"    {after}"]
    # Before the run the verdict is the interval's; the budget's where none is known.
    if any(
        row.within_interval is False or (row.within_interval is None and row.before_within is False)
        for row in rows
    ):
        lines.append(words["stale"])  # most often the machine moved since it was calibrated
    if any(row.after_within is False for row in rows):
        lines.append(words["noisy"])  # the budget is the median's: one run may stray
    return lines


def staleness_line(
    staleness: Staleness | None, world_size: int, language: str, *, short: bool = False
) -> str | None:
    """What the text report and the app's metrics panel say of a stale calibration (or
    one that recorded no conditions): why, and the command that calibrates again; with
    `short`, the command alone (the app's status line, under its title). None while it
    is fresh, or for a named profile."""
    from playground.i18n import t

    if staleness is None or staleness.verdict == "fresh":
        return None
    return t(
        "app.calibration_short" if short else f"app.calibration_{staleness.verdict}",
        language,
        ranks=world_size,
        then=_load(staleness.load_then),
        now=_load(staleness.load_now),
        limit=f"{LOAD_ABS:g}",
        share=f"{LOAD_REL:.0%}",
    )


def _load(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def mark(error: float | None, within: bool | None) -> str:
    """An error and its verdict, as a row prints it: `4.2% ✓`, `31.0% ✗`, or `—`."""
    if within is None or error is None:
        return "—"
    return f"{error:.1%} {'✓' if within else '✗'}"
