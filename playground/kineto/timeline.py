"""A read trace as the two Timelines a run has: the job's ranks measured, the model's prediction.

Part of playground.kineto (issue 39): what lets the same views draw a learner's own
job as they draw a run (the app's Gantt, playground.widgets.gantt; the HTML export,
playground.export.timeline). Per rank, measured: computation kernels (merged, as HTA
merges them) as `compute`, memory copies as `memcpy`, each collective as a span of
its kind labelled with its mechanism where the trace tells it; the gaps are idle and
the views dot them. Predicted: each collective with a known size, at the same start,
lasting what the cost model predicts on the report's profile (paired by action id, so
hovering one shows the other). Times in seconds from the job's first event.

Pure: runtime.sim.trace and the kineto modules.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.kineto.collectives import MECHANISM_NAMES
from playground.kineto.figures import gpu_kernels, merged
from playground.kineto.report import TraceReport, predicted_seconds
from runtime.sim.costmodel import CostModel
from runtime.sim.trace import Span, Timeline

MAX_SPANS_PER_RANK = 20_000  # what a terminal or a browser can still draw


@dataclass
class TraceView:
    """What the timeline views read of a run (playground.export.timeline.build_figure)."""

    measured: Timeline
    predicted: Timeline
    backend: str | None
    profile: CostModel


def trace_view(report: TraceReport) -> TraceView:
    """The report's traces as a measured and a predicted Timeline (see the module)."""
    # (rank, kind, label, start µs, end µs, optional Span fields, predicted?)
    rows: list[tuple[int, str, str, float, float, dict, bool]] = []
    for trace in report.traces:
        kernels = gpu_kernels(trace.events)
        for kind, name in (("computation", "compute"), ("memory", "memcpy")):
            for start, end in merged([(k.start, k.end) for k in kernels if k.kind == kind]):
                rows.append((trace.rank, name, name, float(start), float(end), {}, False))
    for index, c in enumerate(report.collectives):
        label = MECHANISM_NAMES[c.mechanism][0] if c.mechanism else c.kind
        extra = {"action_id": f"r{c.rank}.{index}", "bytes": c.nbytes, "peer": c.peer}
        rows.append((c.rank, c.kind, label, c.start_us, c.end_us, extra, False))
        seconds = predicted_seconds(c, report.profile)
        if seconds is not None:
            end = c.start_us + seconds * 1e6
            rows.append((c.rank, c.kind, label, c.start_us, end, extra, True))
    origin = min((row[3] for row in rows), default=0.0)
    spans: dict[bool, list[Span]] = {False: [], True: []}
    counts: dict[tuple[int, bool], int] = {}
    for rank, kind, label, start, end, extra, is_predicted in sorted(rows, key=lambda r: r[3]):
        key = (rank, is_predicted)
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > MAX_SPANS_PER_RANK:
            continue
        fields = {k: v for k, v in extra.items() if v is not None}
        spans[is_predicted].append(
            Span(rank, kind, label, (start - origin) / 1e6, (end - origin) / 1e6, **fields)
        )
    backend = next((t.backend for t in report.traces if t.backend), None)
    return TraceView(Timeline(spans[False]), Timeline(spans[True]), backend, report.profile)
