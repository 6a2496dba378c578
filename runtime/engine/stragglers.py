"""Every worker reports, the parent aggregates: per-rank series, spreads, the straggler.

Where it sits (docs/design.md): runtime's pure part, in the parent (UI) process.
runtime.engine.live_workers keeps each rank's figures per step (runtime.engine.workers) as
records arrive, and hands them here as a WorkersReport, which says:

- per rank, the series over the run's steps (step time, busy fraction, compute,
  transfer, waiting, idle, bytes, peak memory, throughput) and its totals:
  memory now and peak by category (the Counters), the device's memory and
  utilisation on CUDA ranks (absent elsewhere, never 0: runtime.engine.device_stats),
  errors (failures from the Marks of the rank, restarts of the run);
- per figure, min / median / max across ranks;
- per step, the slowest rank (the most work: compute and transfers, waiting
  left out) and the straggler: a rank whose work is at least `threshold` (1.2
  by default) times the median rank's, with the reason: compute or
  communication, whichever grew more over the median rank's;
- for the run, the slowest rank (the most work in all) and the straggler: the
  rank flagged in the most steps, if in at least half of them (`run_verdict`).

A step counts towards the verdicts once it is closed: every rank has gone on to
a later step (or the run ended), so a half-streamed step never flags anyone.
The report's `to_dict` is the `workers` key of `--json`.

Pure: stdlib only.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.engine.workers import RankStep, StepShares, Window

DEFAULT_THRESHOLD = 1.2
# The per-step series of each rank, in the order `--json` lists them.
SERIES = (
    "step_s",
    "busy",
    "compute_s",
    "comm_s",
    "wait_s",
    "idle_s",
    "work_s",
    "sent_bytes",
    "received_bytes",
    "memory_peak_bytes",
    "throughput",
)


@dataclass(frozen=True)
class Verdict:
    """Who was slowest in a step (or the run), and whether it straggled, and why."""

    slowest: int | None = None
    ratio: float | None = None  # the slowest rank's work over the median rank's
    straggler: int | None = None
    reason: str | None = None  # "compute" or "communication"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def verdict(steps: Sequence[Any], threshold: float) -> Verdict:
    """`steps`: one record per rank with rank, work_s, compute_s and comm_s."""
    if len(steps) < 2:
        return Verdict()
    slowest = max(steps, key=lambda s: (s.work_s, -s.rank))
    median = statistics.median(s.work_s for s in steps)
    if median <= 0:
        return Verdict(slowest.rank)
    ratio = slowest.work_s / median
    if ratio < threshold:
        return Verdict(slowest.rank, ratio)
    compute = slowest.compute_s - statistics.median(s.compute_s for s in steps)
    comm = slowest.comm_s - statistics.median(s.comm_s for s in steps)
    return Verdict(
        slowest.rank, ratio, slowest.rank, "compute" if compute >= comm else "communication"
    )


def run_verdict(slowest: Verdict, steps: Sequence[Verdict]) -> Verdict:
    """The run's verdict: `slowest` (the most work over the closed steps), and the
    straggler flagged in the most steps if that is at least half of them, with the
    median of its steps' ratios and its most frequent reason. A rank slowed once by
    a noisy neighbour is not a straggler; one slow in every step is."""
    judged = [v for v in steps if v.slowest is not None]
    flagged = [v for v in judged if v.straggler is not None]
    if not flagged:
        return Verdict(slowest.slowest, slowest.ratio)
    counts = Counter(v.straggler for v in flagged)
    rank, count = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if 2 * count < len(judged):
        return Verdict(slowest.slowest, slowest.ratio)
    mine = [v for v in flagged if v.straggler == rank]
    reasons = Counter(v.reason for v in mine)
    reason = max(("compute", "communication"), key=lambda r: reasons[r])
    ratio = statistics.median(v.ratio for v in mine if v.ratio is not None)
    return Verdict(slowest.slowest, ratio, rank, reason)


@dataclass
class RankTotals(StepShares):
    """One rank over the whole run (its closed and open steps)."""

    rank: int
    steps: int = 0
    step_s: float = 0.0
    compute_s: float = 0.0
    comm_s: float = 0.0
    wait_s: float = 0.0
    idle_s: float = 0.0
    sent_bytes: float = 0.0
    received_bytes: float = 0.0
    items: float | None = None
    memory_peak_bytes: float | None = None
    memory: dict[str, dict[str, float]] = field(default_factory=dict)  # category: now, peak
    device_memory_bytes: dict[str, float] | None = None  # now, peak (CUDA ranks)
    device_utilization: float | None = None  # percent, where NVML answers
    failures: int = 0
    restarts: int = 0
    straggler_steps: int = 0


def spread(values: Iterable[float | None]) -> dict[str, float] | None:
    """min, median, max of the values present (None when none is)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"min": min(present), "median": statistics.median(present), "max": max(present)}


@dataclass
class WorkersReport:
    threshold: float
    items_unit: str | None
    windows: list[Window]
    closed: list[bool]
    per_rank: dict[int, list[RankStep | None]]  # rank -> its step in each window
    totals: dict[int, RankTotals]
    verdicts: list[Verdict]  # per window
    overall: Verdict

    @property
    def ranks(self) -> list[int]:
        return sorted(self.totals)

    def latest(self, rank: int) -> RankStep | None:
        """The rank's last closed step (else its last one so far)."""
        steps = self.per_rank.get(rank, [])
        done = [s for s, closed in zip(steps, self.closed, strict=True) if s and closed]
        return done[-1] if done else next((s for s in reversed(steps) if s), None)

    def aggregate(self) -> dict[str, dict[str, float] | None]:
        totals = [self.totals[r] for r in self.ranks]
        return {name: spread(_figure(t, name) for t in totals) for name in SERIES}

    def to_dict(self) -> dict[str, Any]:
        """The `workers` key of `--json`: series per rank and window, and the aggregates."""
        ranks = []
        for rank in self.ranks:
            totals = self.totals[rank]
            steps = self.per_rank[rank]
            ranks.append(
                {
                    "rank": rank,
                    "per_step": {n: [_figure(s, n) if s else None for s in steps] for n in SERIES},
                    "totals": {n: _figure(totals, n) for n in SERIES},
                    "memory": totals.memory,
                    "device": {
                        "memory_bytes": totals.device_memory_bytes,
                        "utilization": totals.device_utilization,
                    },
                    "errors": {"failures": totals.failures, "restarts": totals.restarts},
                    "straggler_steps": totals.straggler_steps,
                }
            )
        return {
            "threshold": self.threshold,
            "items": self.items_unit,
            "windows": [
                {"series": w.series, "step": w.step, "start": w.start, "end": w.end, "closed": c}
                for w, c in zip(self.windows, self.closed, strict=True)
            ],
            "ranks": ranks,
            "aggregate": self.aggregate(),
            "steps": [v.to_dict() for v in self.verdicts],
            **self.overall.to_dict(),
        }


def _figure(record: Any, name: str) -> float | None:
    return getattr(record, name)


def sum_of(rank: int, steps: list[RankStep]) -> RankTotals:
    out = RankTotals(rank, steps=len(steps))
    for s in steps:
        out.step_s += s.step_s
        out.compute_s += s.compute_s
        out.comm_s += s.comm_s
        out.wait_s += s.wait_s
        out.idle_s += s.idle_s
        out.sent_bytes += s.sent_bytes
        out.received_bytes += s.received_bytes
    return out
