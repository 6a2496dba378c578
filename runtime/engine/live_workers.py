"""The parent's live view of every worker: figures per rank and step, as records arrive.

Where it sits (docs/design.md): runtime's pure part, in the parent (UI) process.
`LiveWorkers` is fed the records as the launcher streams them (`add`, or `add_message`
with a `records` message: spans and counters batched by each rank, at most every
runtime.engine.worker.STREAM_INTERVAL_S), or a whole timeline at once (a replay, a
prediction: `workers_report`). It keeps each step's spans (a window,
runtime.engine.workers) and recomputes only the windows that new spans touched; memory
Counters are kept as running totals per rank (a sample's total is the sum of its series'
categories), so a step's memory peak is a bisection away. `report()` hands the figures
to runtime.engine.stragglers (spreads across ranks, the straggler). Thread-safe: a
metrics server reads while the run's thread adds.

Pure: stdlib only.
"""

from __future__ import annotations

import math
import threading
from bisect import insort
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

from runtime.engine.stragglers import (
    DEFAULT_THRESHOLD,
    RankTotals,
    Verdict,
    WorkersReport,
    run_verdict,
    sum_of,
    verdict,
)
from runtime.engine.workers import RankStep, Window, WindowKey, memory_peak, rank_steps, window_key
from runtime.sim.trace import Counter, Mark, Span, Timeline

# Counters a CUDA rank records (runtime.engine.device_stats): absent on CPU ranks.
DEVICE_MEMORY, DEVICE_UTILIZATION = "device_allocated", "device_utilization"


class LiveWorkers:
    """Per-rank figures kept up to date as records arrive (thread-safe: a metrics
    server reads while the run's thread adds)."""

    def __init__(
        self,
        world_size: int,
        *,
        items: float | None = None,
        items_unit: str | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        memory_categories: Sequence[str] = (),
        ranks: Sequence[int] | None = None,
    ) -> None:
        """`ranks`: the ranks this view reports (a node's, under torchrun: fed only their
        records, a window closes once they all have moved past it); all by default."""
        self.world_size = world_size
        self.ranks = tuple(range(world_size)) if ranks is None else tuple(sorted(ranks))
        self.items, self.items_unit, self.threshold = items, items_unit, threshold
        self.memory_categories = frozenset(memory_categories)
        self._lock = threading.Lock()
        self._spans: dict[WindowKey, list[Span]] = defaultdict(list)
        self._steps: dict[WindowKey, dict[int, RankStep]] = {}
        self._dirty: set[WindowKey] = set()
        self._samples: dict[int, list[tuple[float, float, str | None]]] = defaultdict(list)
        self._current: dict[int, dict[tuple[str | None, str], float]] = defaultdict(dict)
        self._memory: dict[int, dict[str, dict[str, float]]] = defaultdict(dict)
        self._device: dict[int, dict[str, float]] = {}
        self._utilization: dict[int, float] = {}
        self._marks: list[Mark] = []

    def add(self, spans: Iterable[Span] = (), counters: Iterable[Counter] = (), marks=()) -> None:
        with self._lock:
            for span in spans:
                key = window_key(span)
                self._spans[key].append(span)
                self._dirty.add(key)
            for counter in sorted(counters, key=lambda c: c.t):
                self._counter(counter)
            self._marks.extend(marks)

    def add_message(self, message: tuple) -> None:
        """A launcher message; only `records` (spans and counters, as dicts) count."""
        if message[0] == "records":
            self.add([Span.from_dict(s) for s in message[2]], [Counter(**c) for c in message[3]])

    def _counter(self, c: Counter) -> None:
        if c.category in (DEVICE_MEMORY, DEVICE_UTILIZATION):
            if c.category == DEVICE_UTILIZATION:
                self._utilization[c.rank] = c.value
            else:
                device = self._device.setdefault(c.rank, {"now": c.value, "peak": c.value})
                device["now"], device["peak"] = c.value, max(device["peak"], c.value)
            return
        if c.category not in self.memory_categories:
            return
        seen = self._memory[c.rank].setdefault(c.category, {"now": c.value, "peak": c.value})
        seen["now"], seen["peak"] = c.value, max(seen["peak"], c.value)
        current = self._current[c.rank]
        current[(c.series, c.category)] = c.value
        total = sum(v for (series, _), v in current.items() if series == c.series)
        insort(self._samples[c.rank], (c.t, total, c.series), key=lambda x: x[0])

    def report(self, final: bool = False) -> WorkersReport:
        """The figures now; `final`: the run has ended, so every step is closed."""
        with self._lock:
            for key in self._dirty:
                items = self.items if key[2] is None else None
                self._steps[key] = rank_steps(self._spans[key], self.world_size, items)
            self._dirty.clear()
            keys = [k for k, s in self._spans.items() if any(x.kind != "barrier" for x in s)]
            keys.sort(key=lambda k: min(s.start for s in self._spans[k]))
            return self._report(keys, final)

    def _report(self, keys: list[WindowKey], final: bool) -> WorkersReport:
        windows, per_rank = [], {r: [] for r in self.ranks}
        last: dict[int, int] = {}
        for i, key in enumerate(keys):
            steps = self._steps[key]
            windows.append(
                Window(
                    key[0],
                    key[1],
                    min(s.start for s in steps.values()),
                    max(s.end for s in steps.values()),
                )
            )
            for rank in per_rank:
                step = steps.get(rank)
                if step is not None:
                    last[rank] = i
                    peak = memory_peak(self._samples.get(rank, []), step, key[0])
                    step = replace(step, memory_peak_bytes=peak) if peak is not None else step
                per_rank[rank].append(step)
        closed = [final or all(last.get(r, -1) > i for r in per_rank) for i in range(len(keys))]
        verdicts = [
            verdict([s for s in (per_rank[r][i] for r in per_rank) if s], self.threshold)
            if closed[i]
            else Verdict()
            for i in range(len(keys))
        ]
        totals = {r: self._totals(r, per_rank[r], verdicts) for r in per_rank}
        done = [
            sum_of(r, [s for s, c in zip(per_rank[r], closed, strict=True) if s and c])
            for r in per_rank
        ]
        overall = run_verdict(verdict([d for d in done if d.work_s > 0], math.inf), verdicts)
        return WorkersReport(
            self.threshold, self.items_unit, windows, closed, per_rank, totals, verdicts, overall
        )

    def _totals(
        self, rank: int, steps: list[RankStep | None], verdicts: list[Verdict]
    ) -> RankTotals:
        mine = [s for s in steps if s is not None]
        out = sum_of(rank, mine)
        out.items = sum(s.items for s in mine if s.items is not None) if self.items else None
        peaks = [s.memory_peak_bytes for s in mine if s.memory_peak_bytes is not None]
        out.memory_peak_bytes = max(peaks) if peaks else None
        out.memory = {k: dict(v) for k, v in self._memory.get(rank, {}).items()}
        out.device_memory_bytes = dict(self._device[rank]) if rank in self._device else None
        out.device_utilization = self._utilization.get(rank)
        out.failures = sum(1 for m in self._marks if m.kind == "failure" and m.rank == rank)
        out.restarts = sum(1 for m in self._marks if m.kind == "restart")
        out.straggler_steps = sum(1 for v in verdicts if v.straggler == rank)
        return out


def workers_report(
    timeline: Timeline,
    world_size: int,
    *,
    items: float | None = None,
    items_unit: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    memory_categories: Sequence[str] = (),
) -> WorkersReport:
    """The report of a whole timeline (a finished run, a replay, a prediction)."""
    live = LiveWorkers(
        world_size,
        items=items,
        items_unit=items_unit,
        threshold=threshold,
        memory_categories=memory_categories,
    )
    live.add(timeline.spans, timeline.counters, timeline.marks)
    return live.report(final=True)
