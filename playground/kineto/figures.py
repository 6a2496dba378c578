"""Per-rank idle / compute / non-compute shares and comm-compute overlap, as HTA measures them.

Part of playground.kineto (issue 39). The field's own tool for these figures is
Holistic Trace Analysis (github.com/facebookresearch/HolisticTraceAnalysis, MIT);
this module follows its definitions exactly so the numbers agree with it (tested on
its own test traces, tests/test_trace_figures.py), without its pandas dependency:

- events: those with a duration and a category, except the profiler's own `Trace`
  span; times rounded as HTA rounds nanosecond traces (start up, end down, in µs);
- GPU kernels: events with a GPU `stream` (≥ 0) and a launch `correlation` (≥ 0). When
  the trace holds two or more `ProfilerStep#N`, HTA drops the last step: only kernels
  launched by CPU events that start before the last step's start are kept
  (`Trace._filter_irrelevant_gpu_kernels`);
- a kernel is communication if its name matches `^nccl|^hip|^hccl|ncclKernel`, memory
  if `^(hip)?Memcpy|^(hip)?Memset|^dma`, computation if neither and not another
  runtime/sync name (hta.common.types' grouping patterns as of its commit f4d0062c; the
  0.5.0 release's are narrower: `^nccl` alone for communication, and a `Stream Wait
  Event` counted as computation. The tests' expected figures are 0.5.0's, on traces
  where the two agree);
- temporal breakdown (`get_temporal_breakdown`): the span is from the first kernel's
  start to the last kernel's end; idle = span − union of all kernels; compute = union
  of computation kernels; non-compute = span − compute − idle; each over the span;
- overlap (`get_comm_comp_overlap`): |union(comm) ∩ union(compute)| / |union(comm)|,
  undefined (None) for a rank with no communication kernel.

A gloo job has no GPU kernels: its communication is CPU time, so these GPU figures
are None for it and the collectives table (playground.kineto.collectives) carries it.

Pure: stdlib only.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from playground.kineto.schema import Event

COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)"
    r"|(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)"
    r"|(^collective_subgraph_execution)"
)
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)")
SYNC_NAMES = frozenset({"Event Sync", "Context Sync"})

Interval = tuple[int, int]


@dataclass(frozen=True)
class Kernel:
    """A GPU kernel (or memcpy/memset) as HTA keeps it: integer µs, its stream and kind."""

    name: str
    start: int
    end: int
    stream: int
    correlation: int
    kind: str  # "communication", "memory", "computation", "other"


@dataclass(frozen=True)
class RankFigures:
    """HTA's figures for one rank (None where the rank has no GPU kernel / no comm)."""

    span_us: int
    idle_us: int
    compute_us: int
    non_compute_us: int
    comm_us: int
    overlap_us: int

    @property
    def idle_fraction(self) -> float | None:
        return self.idle_us / self.span_us if self.span_us > 0 else None

    @property
    def compute_fraction(self) -> float | None:
        return self.compute_us / self.span_us if self.span_us > 0 else None

    @property
    def non_compute_fraction(self) -> float | None:
        return self.non_compute_us / self.span_us if self.span_us > 0 else None

    @property
    def overlap_fraction(self) -> float | None:
        return self.overlap_us / self.comm_us if self.comm_us > 0 else None


def kernel_kind(name: str) -> str:
    """HTA's get_kernel_type: communication, memory, computation or other."""
    if COMM.match(name):
        return "communication"
    if MEMORY.match(name):
        return "memory"
    if not NOT_COMPUTE.match(name):
        return "computation"
    return "other"


def rounded(event: Event) -> tuple[int, int] | None:
    """(start, end) in whole µs as HTA rounds them (start up, end down); None if the event
    has no duration or no category, or is the profiler's own `Trace` span."""
    if event.ts is None or event.dur is None or event.cat is None or event.cat == "Trace":
        return None
    return math.ceil(event.ts), math.floor(event.ts + event.dur)


def _number(value: object, default: int = -1) -> int:
    """pandas.to_numeric(errors="coerce").fillna(-1).astype(int), for one value."""
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else default
    try:
        number = float(str(value).strip())
    except ValueError:
        return default
    return int(number) if math.isfinite(number) else default


def gpu_kernels(events: list[Event]) -> list[Kernel]:
    """The kernels HTA's analyses read for one rank (its last-step filter applied)."""
    rows: list[tuple[Event, int, int, int, int]] = []
    for event in events:
        times = rounded(event)
        if times is None:
            continue
        args = event.args
        stream = _number(args.stream) if args is not None else -1
        correlation = _number(args.correlation) if args is not None else -1
        rows.append((event, times[0], times[1], stream, correlation))
    steps = {e.name for e, *_ in rows if PROFILER_STEP.match(e.name)}
    gpu = [r for r in rows if (r[3] >= 0 and r[4] >= 0) or r[0].name in SYNC_NAMES]
    cpu = [r for r in rows if not ((r[3] >= 0 and r[4] >= 0) or r[0].name in SYNC_NAMES)]
    if len(steps) >= 2 and cpu:  # HTA drops the last profiler step (its kernels may be cut)
        step_starts = [r[1] for r in cpu if PROFILER_STEP.match(r[0].name)]
        last_start = max(step_starts) if step_starts else min((r[1] for r in cpu), default=0)
        kept_cpu = [r for r in cpu if r[1] < last_start]
        keep_correlations = {r[4] for r in kept_cpu}
        gpu = [r for r in gpu if r[4] in keep_correlations]
        rows = gpu + kept_cpu
    return [
        Kernel(e.name, start, end, stream, corr, kernel_kind(e.name))
        for e, start, end, stream, corr in rows
        if stream != -1
    ]


def merged(intervals: list[Interval]) -> list[Interval]:
    """The union of intervals as disjoint ones, in order (touching ones join, as HTA's
    merge_kernel_intervals joins them)."""
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def length(intervals: list[Interval]) -> int:
    return sum(end - start for start, end in intervals)


def intersection(a: list[Interval], b: list[Interval]) -> int:
    """Total length common to two unions of disjoint sorted intervals."""
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def rank_figures(kernels: list[Kernel]) -> RankFigures | None:
    """HTA's temporal breakdown and overlap of one rank; None with no GPU kernel."""
    if not kernels:
        return None
    everything = merged([(k.start, k.end) for k in kernels])
    # HTA: the end of the merged interval that starts last (not the latest end).
    span = everything[-1][1] - everything[0][0]
    idle = span - length(everything)
    compute = merged([(k.start, k.end) for k in kernels if k.kind == "computation"])
    comm = merged([(k.start, k.end) for k in kernels if k.kind == "communication"])
    compute_us = length(compute)
    return RankFigures(
        span_us=span,
        idle_us=idle,
        compute_us=compute_us,
        non_compute_us=span - compute_us - idle,
        comm_us=length(comm),
        overlap_us=intersection(comm, compute),
    )
