"""Where the timeline figure puts things: the bubble, the series, the comm lane, the ranks, the unit.

Part of the "playground/ exports" of docs/design.md, split off
playground.export.timeline (which draws the figure with plotly and reads its layout
from here) so that each file reads in one sitting. These are pure functions of a
Timeline, no plotly: the idle time of each pipeline rank inside each series (the
bubble, shaded), the windows of series run one after the other (parted by a line,
each named over its part), the collectives that overlap their rank's own work
(drawn on a "rank R comm" lane, as in the app's Gantt), the ranks a row shows (its
marks' too), and a time unit that keeps tick labels short.

Imports: runtime's pure part; never torch.
"""

from __future__ import annotations

from collections import defaultdict

from runtime.sim.collective_kinds import overlaps
from runtime.sim.trace import Span, Timeline

PIPELINE_COMPUTE = frozenset({"F", "B", "W"})


def bubble_intervals(timeline: Timeline) -> list[tuple[int, float, float]]:
    """(rank, start, end) of the time a pipeline rank computes nothing (F/B/W) while
    its schedule runs: the bubble, shaded so the eye finds it. Schedules that ran
    one after the other (each its own `series`) each get their own window."""
    windows: dict[str, list[float]] = {}
    busy: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for span in timeline.spans:
        if span.kind == "barrier":
            continue
        group = span.series or ""
        window = windows.setdefault(group, [span.start, span.end])
        window[0], window[1] = min(window[0], span.start), max(window[1], span.end)
        if span.kind in PIPELINE_COMPUTE:
            busy[(group, span.rank)].append((span.start, span.end))
    if not busy:
        return []
    ranks = timeline.ranks()
    out = []
    for group, (lo, hi) in windows.items():
        for rank in ranks:
            cursor = lo
            for start, end in sorted(busy.get((group, rank), [])):
                if start > cursor:
                    out.append((rank, cursor, start))
                cursor = max(cursor, end)
            if hi > cursor:
                out.append((rank, cursor, hi))
    return out


def series_windows(timeline: Timeline) -> list[tuple[str, float, float]]:
    """(series, first start, last end) of each series of the timeline (a pipeline's
    schedules, zero's stages, inference's modes, run one after the other), in the order
    they ran; [] unless there are two or more to tell apart."""
    windows: dict[str, list[float]] = {}
    for span in timeline.spans:
        if span.series is None:
            continue
        window = windows.setdefault(span.series, [span.start, span.end])
        window[0], window[1] = min(window[0], span.start), max(window[1], span.end)
    if len(windows) < 2:
        return []
    return sorted(((name, lo, hi) for name, (lo, hi) in windows.items()), key=lambda w: w[1])


def time_unit(end: float) -> tuple[str, float]:
    """A unit that keeps tick labels short for this run's length."""
    if end >= 10:
        return "s", 1.0
    if end >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def comm_lane(spans: list[Span]) -> set[int]:
    """ids of the collectives that overlap their rank's other spans (a DDP bucket's
    all-reduce under backward): drawn on a "rank R comm" lane beneath the rank, as in
    the app's Gantt. At equal starts the rank's own work comes first."""
    out: set[int] = set()
    running: dict[int, float] = {}
    # Kinds that may run beside a rank's own work (runtime.sim.collective_kinds).
    for span in sorted(spans, key=lambda s: (s.start, overlaps(s.kind))):
        if overlaps(span.kind) and running.get(span.rank, float("-inf")) > span.start:
            out.add(id(span))
        else:
            running[span.rank] = max(running.get(span.rank, float("-inf")), span.end)
    return out


def ranks_with_marks(timeline: Timeline) -> list[int]:
    marked = {m.rank for m in timeline.marks if m.rank is not None}
    return sorted(set(timeline.ranks()) | marked)
