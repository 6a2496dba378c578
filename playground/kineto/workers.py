"""A read trace's ranks as a run's Workers tab sees them: per step, compute, comm, waits, straggler.

Part of playground.kineto (issue 39 item 6), between the reader's events and runtime's
pure per-rank accounting (runtime.engine.live_workers, runtime.engine.stragglers): it
turns one job's traces into the spans that accounting reads, so the trace screen's
Workers tab (playground.widgets.workers), the straggler that `playground trace` names
and a run's own Workers tab all follow lesson 1's rules, computed by the same code.

What becomes a span, per rank:
- `compute`: GPU computation kernels (HTA's grouping, playground.kineto.figures), merged
  within each step; memory copies are neither computation nor communication in HTA's
  breakdown, so they are left out (their time is idle here, as a run's would be);
  a rank without GPU kernels (a gloo job) computes in its CPU operators: the union
  of its `cpu_op` events less the time its collectives take;
- each collective, as its kind (an all-to-all, a broadcast, …) so that the k-th
  instance on every rank pairs and its waiting is told apart from its transfer;
  a point-to-point message or a kind the accounting does not know is a message
  without a peer (its time is communication, never waiting).

Steps are the profiler's own (`ProfilerStep#N`): a GPU kernel belongs to the step its
launch was in (through the launch's `correlation`), a CPU op to the step it starts in.
As HTA does, the last step is dropped when there are two or more (its kernels may be
cut off by the profiler's end). A trace without steps is one window.

Pure: runtime's accounting and the kineto modules; no torch.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict

from playground.kineto.collectives import Collective
from playground.kineto.figures import PROFILER_STEP, Kernel, gpu_kernels, merged
from playground.kineto.reader import RankTrace
from runtime.engine.live_workers import LiveWorkers
from runtime.engine.stragglers import WorkersReport
from runtime.engine.workers import MESSAGES
from runtime.sim.collective_kinds import COLLECTIVE_KINDS
from runtime.sim.trace import Span

WHOLE = "trace"  # the series of a trace without profiler steps: one window
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
_STEP = re.compile(PROFILER_STEP.pattern)

Interval = tuple[float, float]


def trace_workers(
    traces: list[RankTrace],
    found: list[Collective],
    threshold: float,
    kernels: dict[int, list[Kernel]] | None = None,
) -> WorkersReport:
    """The Workers report of the job: one row per rank read, its steps, the straggler.
    `kernels`: each rank's `gpu_kernels`, where the caller has them already."""
    spans = workers_spans(traces, found, kernels)
    world = max([tr.rank + 1 for tr in traces] + [tr.world_size or 0 for tr in traces])
    live = LiveWorkers(world, threshold=threshold, ranks=[tr.rank for tr in traces])
    live.add(spans)
    return live.report(final=True)


def workers_spans(
    traces: list[RankTrace],
    found: list[Collective],
    kernels: dict[int, list[Kernel]] | None = None,
) -> list[Span]:
    """Every rank's compute and communication spans, with their step (see the module)."""
    by_rank: dict[int, list[Collective]] = defaultdict(list)
    for c in found:
        by_rank[c.rank].append(c)
    rows: list[tuple[int, str, float, float, int | None, Collective | None]] = []
    for trace in traces:
        mine = kernels[trace.rank] if kernels is not None else gpu_kernels(trace.events)
        rows += _rank_rows(trace, by_rank[trace.rank], mine)
    origin = min((row[2] for row in rows), default=0.0)
    spans = []
    for rank, kind, start, end, step, c in rows:
        series = WHOLE if step is None else None
        extra: dict = {}
        if c is not None:
            extra = {"bytes": c.nbytes, "peer": c.peer if kind in MESSAGES else None}
        spans.append(
            Span(rank, kind, kind, (start - origin) / 1e6, (end - origin) / 1e6,
                 series=series, step=step, **{k: v for k, v in extra.items() if v is not None})
        )  # fmt: skip
    return spans


def workers_kind(kind: str) -> str:
    """A collective's kind as the accounting counts it: its own if registered (paired
    across ranks), a message otherwise (communication, with no peer to wait for)."""
    if kind in COLLECTIVE_KINDS or kind in MESSAGES:
        return kind
    return "sendrecv"


def _rank_rows(
    trace: RankTrace, mine: list[Collective], kernels: list[Kernel]
) -> list[tuple[int, str, float, float, int | None, Collective | None]]:
    starts, numbers = _steps(trace)
    last = numbers[-1] if len(numbers) >= 2 else None  # HTA's last-step filter

    def step_of(t: float) -> int | None:
        if not numbers:
            return None
        return numbers[max(0, bisect.bisect_right(starts, t) - 1)]

    launches: dict[int, float] = {}
    kernel_launch: dict[float, float] = {}  # a comm kernel's start -> its launch's time
    for event in trace.events:
        args = event.args
        if args is None or not isinstance(args.correlation, int) or event.ts is None:
            continue
        if event.cat in _LAUNCH_CATS:
            launches[args.correlation] = event.ts
    for event in trace.events:
        args = event.args
        if event.cat != "kernel" or event.ts is None or args is None:
            continue
        if isinstance(args.correlation, int) and args.correlation in launches:
            kernel_launch[event.ts] = launches[args.correlation]
    rows: list[tuple[int, str, float, float, int | None, Collective | None]] = []
    compute: dict[int | None, list[Interval]] = defaultdict(list)
    for k in kernels:
        if k.kind == "computation":
            at = launches.get(k.correlation, float(k.start))
            compute[step_of(at)].append((float(k.start), float(k.end)))
    comm: dict[int | None, list[Interval]] = defaultdict(list)
    for c in mine:
        at = kernel_launch.get(c.start_us, c.start_us) if c.on_gpu else c.start_us
        step = step_of(at)
        if last is not None and step == last:
            continue
        rows.append((trace.rank, workers_kind(c.kind), c.start_us, c.end_us, step, c))
        comm[step].append((c.start_us, c.end_us))
    if not kernels:  # a CPU job: its operators are its computation
        for event in trace.events:
            if event.cat == "cpu_op" and event.ts is not None and event.dur is not None:
                compute[step_of(event.ts)].append((event.ts, event.ts + event.dur))
        for step, intervals in list(compute.items()):
            compute[step] = _less(merged(intervals), merged(comm.get(step, [])))  # type: ignore[arg-type]
    for step, intervals in compute.items():
        if last is not None and step == last:
            continue
        for start, end in merged(intervals):  # type: ignore[arg-type]
            if end > start:
                rows.append((trace.rank, "compute", start, end, step, None))
    return rows


def _steps(trace: RankTrace) -> tuple[list[float], list[int]]:
    """The starts of the profiler's steps on this rank's CPU, and their numbers, in order."""
    found = sorted(
        (e.ts, int(m.group(1)))
        for e in trace.events
        if e.cat == "user_annotation" and e.ts is not None and (m := _STEP.match(e.name))
    )
    return [ts for ts, _ in found], [n for _, n in found]


def _less(intervals: list[Interval], minus: list[Interval]) -> list[Interval]:
    """`intervals` without the parts in `minus` (both disjoint and sorted)."""
    out: list[Interval] = []
    j = 0
    for start, end in intervals:
        while j < len(minus) and minus[j][1] <= start:
            j += 1
        k, cursor = j, start
        while k < len(minus) and minus[k][0] < end:
            if minus[k][0] > cursor:
                out.append((cursor, minus[k][0]))
            cursor = max(cursor, minus[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out
