"""The conditions a calibration ran in: its spread, the machine's boot and the load then.

Where it sits (docs/design.md): runtime.fit, beside runtime.fit.calibration, which
records a `Conditions` in the cached model's `details["conditions"]` (schema
versioned by SCHEMA; a cache written before it has none and still loads: its
interval is unknown). Two uses:

- the before-run prediction as an interval: `ends` gives the model at the fast and
  the slow end of the spread the calibration measured (compute and communication
  scaled by the fastest and the slowest pace its repetitions showed), which the
  caller simulates beside the model itself (playground.session.run);
- staleness: `staleness` says whether a calibration still describes this machine
  (made before its last boot, or at a load average unlike the one now), a pure
  function of the conditions and of what `boot_time`/`load_now` read now.

Pure: stdlib only (reads /proc/stat; psutil is no base dependency).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from runtime.sim.costmodel import CostModel

# The version of `Conditions.to_dict`'s shape; a record of another version is not read.
SCHEMA = 1
# A load average now this far from the calibration's makes it stale: more than
# LOAD_ABS apart and more than LOAD_REL of the calibration's own (0.4 -> 1.5 is stale,
# 4 -> 5.5 is not: on a busy machine the load wanders by a few tenths a minute).
LOAD_ABS = 1.0
LOAD_REL = 0.5
# /proc/stat is a few KiB; more is not the kernel's.
PROC_STAT_MAX_BYTES = 1 << 20
# The spread's factors, bounded: a record outside them (a hand-edited cache) is unknown.
FACTOR_MIN, FACTOR_MAX = 1e-3, 1e3


@dataclass(frozen=True)
class Spread:
    """How much faster and slower than the fitted median the calibration's repetitions
    ran: (fast, slow) factors, fast ≤ 1 ≤ slow, for the compute and for the links."""

    compute: tuple[float, float] = (1.0, 1.0)
    communication: tuple[float, float] = (1.0, 1.0)


@dataclass(frozen=True)
class Conditions:
    """When and how a calibration ran: seconds since the epoch, the machine's boot (None:
    unreadable), its 1-minute load average then, the spread of its repetitions (None: not
    measured), and each fitted link figure's [low, high] (alpha, beta, gamma)."""

    calibrated_at: float
    booted_at: float | None = None
    load1: float | None = None
    spread: Spread | None = None
    figures: Mapping[str, tuple[float, float]] | None = None

    def to_dict(self) -> dict[str, Any]:
        spread = self.spread
        return {
            "schema": SCHEMA,
            "calibrated_at": self.calibrated_at,
            "booted_at": self.booted_at,
            "load1": self.load1,
            "spread": None
            if spread is None
            else {"compute": list(spread.compute), "communication": list(spread.communication)},
            "figures": {k: list(v) for k, v in (self.figures or {}).items()},
        }

    @classmethod
    def from_dict(cls, data: Any) -> Conditions | None:
        """The record, or None where it is absent, of another schema or malformed (the
        cache is a file anyone could have edited: every number is checked)."""
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            return None
        at = _number(data.get("calibrated_at"), 0, 1e12)
        if at is None:
            return None
        spread = data.get("spread")
        figures = data.get("figures")
        return cls(
            calibrated_at=at,
            booted_at=_number(data.get("booted_at"), 0, 1e12),
            load1=_number(data.get("load1"), 0, 1e6),
            spread=_spread(spread) if isinstance(spread, Mapping) else None,
            figures={
                str(k): pair
                for k, v in (figures.items() if isinstance(figures, Mapping) else ())
                if (pair := _pair(v, 0, 1e6)) is not None
            }
            or None,
        )


def _number(value: Any, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and low <= value <= high else None


def _pair(value: Any, low: float, high: float) -> tuple[float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    a, b = (_number(v, low, high) for v in value)
    return (a, b) if a is not None and b is not None and a <= b else None


def _factors(value: Any) -> tuple[float, float] | None:
    pair = _pair(value, FACTOR_MIN, FACTOR_MAX)
    return pair if pair is not None and pair[0] <= 1.0 <= pair[1] else None


def _spread(data: Mapping[str, Any]) -> Spread | None:
    compute, links = _factors(data.get("compute")), _factors(data.get("communication"))
    return None if compute is None or links is None else Spread(compute, links)


def of(model: CostModel) -> Conditions | None:
    """The conditions recorded with a calibrated model; None for a named profile or a
    cache written before they were recorded."""
    return Conditions.from_dict(model.details.get("conditions"))


# -- the machine now ---------------------------------------------------------------------
def boot_time(path: str | Path = "/proc/stat") -> float | None:
    """When this machine booted (seconds since the epoch: /proc/stat's btime); None where
    there is no /proc (not Linux) or it says nothing readable."""
    try:
        with open(path, "rb") as f:
            text = f.read(PROC_STAT_MAX_BYTES).decode("ascii", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("btime "):
            return _number(_int(line.split()[1]), 0, 1e12)
    return None


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def load_now() -> float | None:
    """The 1-minute load average now (None where the system has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# -- staleness -----------------------------------------------------------------------------
Verdict = Literal["fresh", "rebooted", "load", "unknown"]
VERDICTS: tuple[str, ...] = Verdict.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Staleness:
    """Whether a calibration still describes this machine: "fresh"; "rebooted" (made
    before the machine's last boot); "load" (the load average now is unlike the one it
    ran at: `load_then` against `load_now`); "unknown" (no conditions recorded)."""

    verdict: Verdict
    load_then: float | None = None
    load_now: float | None = None

    @property
    def stale(self) -> bool:
        return self.verdict in ("rebooted", "load")

    @classmethod
    def from_dict(cls, data: Any) -> Staleness | None:
        """The verdict as to_dict wrote it (a saved run's profile); None where absent or
        malformed."""
        if not isinstance(data, Mapping) or data.get("verdict") not in VERDICTS:
            return None
        return cls(
            data["verdict"],
            _number(data.get("load_then"), 0, 1e6),
            _number(data.get("load_now"), 0, 1e6),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "stale": self.stale,
            "load_then": self.load_then,
            "load_now": self.load_now,
            "load_threshold": {"absolute": LOAD_ABS, "relative": LOAD_REL},
        }


def staleness(
    conditions: Conditions | None, booted_at: float | None, load: float | None
) -> Staleness:
    """The verdict on `conditions` given the machine's boot time and its load now (either
    None where unreadable: that test is then skipped). Rebooted first: a calibration
    from before the boot measured another machine's state, whatever the load."""
    if conditions is None:
        return Staleness("unknown", load_now=load)
    then = conditions.load1
    if booted_at is not None and conditions.calibrated_at < booted_at:
        return Staleness("rebooted", then, load)
    if then is not None and load is not None and load_differs(then, load):
        return Staleness("load", then, load)
    return Staleness("fresh", then, load)


def load_differs(then: float, now: float) -> bool:
    """More than LOAD_ABS apart and more than LOAD_REL of the calibration's load."""
    gap = abs(now - then)
    return gap > LOAD_ABS and gap > LOAD_REL * then


def staleness_now(model: CostModel) -> Staleness | None:
    """`staleness` of a calibrated model on this machine now; None for a model no
    calibration made (a named profile, a saved run's)."""
    if not model.name.startswith("calibrated:"):
        return None
    return staleness(of(model), boot_time(), load_now())


# -- the spread's ends ---------------------------------------------------------------------
def ends(model: CostModel) -> tuple[CostModel, CostModel] | None:
    """The model at the fast and at the slow end of its calibration's spread; None where
    no spread was recorded (the interval is unknown)."""
    conditions = of(model)
    if conditions is None or conditions.spread is None:
        return None
    spread = conditions.spread
    return (
        scaled(model, spread.compute[0], spread.communication[0]),
        scaled(model, spread.compute[1], spread.communication[1]),
    )


def scaled(model: CostModel, compute: float, links: float) -> CostModel:
    """`model` with every compute cost times `compute` (its cost table, its FLOP rate,
    the CPU time of a wake-up and of a dispatch) and every link time times `links`
    (alpha, beta, gamma: each collective's and each message's formula, and the time a
    send holds its sender). A collective's measured scale stays: it is a ratio to its
    formula. After a lesson's estimate (prepare_model), the cost table holds its costs."""
    c = model.corrections
    return replace(
        model,
        compute={k: v * compute for k, v in model.compute.items()},
        flops_per_s=model.flops_per_s / compute if model.flops_per_s else model.flops_per_s,
        alpha=model.alpha * links,
        beta=model.beta * links,
        gamma=model.gamma * links,
        inter_alpha=_times(model.inter_alpha, links),
        inter_beta=_times(model.inter_beta, links),
        corrections=replace(
            c,
            send_issue=_times(c.send_issue, links),
            wake=c.wake * compute,
            dispatch=c.dispatch * compute,
            series_dispatch={k: v * compute for k, v in c.series_dispatch.items()},
        ),
    )


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


# -- the spread from a calibration's repetitions -------------------------------------------
def pace_range(reps: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(fast, slow): the fastest and slowest repetition's pace against the median, where
    `reps[i][j]` is repetition i's time of measurement j (a size, a shape) taken by
    turns: per repetition the geometric mean over measurements of time / that
    measurement's median; never above 1 for fast nor below 1 for slow."""
    if not reps or not reps[0]:
        return 1.0, 1.0
    medians = [_median([rep[j] for rep in reps]) for j in range(len(reps[0]))]
    paces = [
        math.exp(
            sum(math.log(t / m) for t, m in zip(rep, medians, strict=True) if t > 0 and m > 0)
            / len(rep)
        )
        for rep in reps
    ]
    return min(1.0, min(paces)), max(1.0, max(paces))


def sample_range(groups: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(fast, slow) from groups of samples of one thing each (a shape's forward and
    backward, on one rank): per group its fastest and slowest sample over its median,
    then the median of those over groups (one rank's bad moment is not the machine's)."""
    fast, slow = [], []
    for samples in groups:
        positive = [s for s in samples if s > 0]
        if len(positive) < 2:
            continue
        mid = _median(positive)
        fast.append(min(positive) / mid)
        slow.append(max(positive) / mid)
    if not fast:
        return 1.0, 1.0
    return min(1.0, _median(fast)), max(1.0, _median(slow))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
