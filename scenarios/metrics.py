"""Typed metrics: what a lesson reports, measured beside predicted, in one shape.

Part of docs/design.md's lesson contract. A lesson's `metrics` returns a list of
Metric; the app's metrics panel, the CLI's text, `--json` and the HTML export
all render that list by one generic path and none of them knows a lesson.

A Metric has a name, a unit (which decides how it is printed), a `value` (the
measurement, or the only value of a fact such as a formula or a count) and,
where the lesson predicts it, its `predicted` twin: a predicted metric is one
with `predicted` set, shown as "measured | predicted | error" even before the
run has measured it. After a run `predicted` is made with what the ranks
measured, and `before` keeps what the calibrated profile alone predicted before
the run (playground.prediction_error holds both to their budgets). A value is a
scalar or a list (per rank, per step). The
`series` says which schedule, ZeRO stage or config it belongs to (the same
field the Program's Actions carry), and `category` marks a byte count as one
part of a memory bar (params, grads, master, optimizer, activations, buffers).

Imports: stdlib only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# How a value is printed (playground.formatting): seconds, bytes, GB/s, a share of a
# whole, a ratio (×), a count, a plain number, yes/no, text, a numerical difference.
Unit = Literal["s", "bytes", "GB/s", "fraction", "ratio", "count", "number", "flag", "text", "diff"]
UNITS: tuple[str, ...] = Unit.__args__  # type: ignore[attr-defined]
Scalar = float | int | bool | str | None
Value = Scalar | list[Scalar]
CATEGORIES = ("params", "grads", "optimizer", "activations", "buffers")
# Every category a memory bar may show: those, and the fp32 master copy of the weights
# that mixed precision keeps beside the fp16/bf16 ones.
ALL_CATEGORIES = ("params", "grads", "master", "optimizer", "activations", "buffers")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: Unit
    value: Value = None
    predicted: Value = None
    series: str | None = None
    category: str | None = None
    per: Literal["rank", "step"] | None = None  # what a list value is indexed by
    # A run's metric: the prediction before the run, from the calibrated profile alone.
    before: Value = None
    # Its interval: predicted at the fast and the slow end of the spread the calibration
    # measured (runtime.fit.conditions); None where the calibration recorded none.
    before_low: Value = None
    before_high: Value = None
    # A text value's Spanish twin (a string, or a list of strings like `value`).
    es: Value = None

    def text(self, language: str) -> Value:
        """The value as the learner reads it in `language` (the Spanish twin if any)."""
        return self.es if language == "es" and self.es is not None else self.value

    @property
    def is_predicted(self) -> bool:
        """True when the lesson predicts this quantity (shown beside its measurement)."""
        return self.predicted is not None

    @property
    def error(self) -> float | None:
        """|predicted − measured| / |measured|; for lists, the largest over ranks."""
        return relative_error(self.value, self.predicted)

    @property
    def before_error(self) -> float | None:
        """The same error for the prediction made before the run."""
        return relative_error(self.value, self.before)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: None fields left out, non-finite numbers as null (strict JSON)."""
        out = {k: finite(v) for k, v in asdict(self).items() if v is not None}
        for key, error in (("error", self.error), ("before_error", self.before_error)):
            if error is not None and math.isfinite(error):
                out[key] = error
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Metric:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def relative_error(measured: Value, predicted: Value) -> float | None:
    if isinstance(measured, list):
        twins = predicted if isinstance(predicted, list) else [predicted] * len(measured)
        if len(twins) != len(measured):
            return None
        errors = [relative_error(m, p) for m, p in zip(measured, twins, strict=True)]
        known = [e for e in errors if e is not None]
        return max(known) if known else None
    if not _number(measured) or not _number(predicted) or not measured:
        return None
    return abs(float(predicted) - float(measured)) / abs(float(measured))  # type: ignore[arg-type]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite(value: Any) -> Any:
    """The value with every non-finite number (nested in lists and dicts) as None: strict
    JSON whatever a lesson computed (`--json`, the HTML export, saved runs)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [finite(v) for v in value]
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    return value


def find(metrics: list[Metric], name: str, series: str | None = None) -> Metric | None:
    """The metric called `name` of `series` (or the first of that name if the series has none)."""
    named = [m for m in metrics if m.name == name]
    return next((m for m in named if m.series == series), named[0] if named else None)


def series_of(metrics: list[Metric]) -> list[str]:
    """The series the metrics speak of, in order of first appearance."""
    seen: dict[str, None] = {}
    for metric in metrics:
        if metric.series is not None:
            seen.setdefault(metric.series)
    return list(seen)


@dataclass(frozen=True)
class Curve:
    """A figure a lesson draws beside its timeline: y series over one x axis, with
    labelled vertical lines (the checkpoint-interval lesson's overhead vs interval,
    with Young's, Daly's and the simulated optimum). Rendered generically."""

    title: str
    x_label: str
    y_label: str
    x: list[float]
    lines: dict[str, list[float]]  # a named y series per entry, same length as x
    marks: dict[str, float]  # a vertical line per entry, at that x
    y_unit: Unit = "fraction"
    log_x: bool = False
    x_unit: Unit = "s"  # how the marks' x is printed (a duration, or bytes: a bucket size)
    # Its texts (title, axis labels, line and mark names) in Spanish, keyed by the English
    # one: the app shows the learner's language (the HTML page is in English).
    es: dict[str, str] = field(default_factory=dict)

    def text(self, english: str, language: str) -> str:
        return self.es.get(english, english) if language == "es" else english

    def to_dict(self) -> dict[str, Any]:
        return {k: finite(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Lane:
    """One item of work's row in a Lanes figure: its phases as (phase, start, end), in
    seconds on the timeline's clock, as `source` ("measured" or "predicted") has them."""

    label: str
    source: str
    phases: tuple[tuple[str, float, float], ...]


@dataclass(frozen=True)
class Lanes:
    """A figure of one row per item of work (a served request: waiting and prefilled,
    then decoded), measured beside predicted on one time axis. Drawn generically by the
    HTML export (playground.export.lanes); `omitted` items did not fit its cap."""

    title: str
    lanes: tuple[Lane, ...]
    omitted: int = 0
