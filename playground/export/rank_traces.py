"""Each rank's trace document of one Outcome, as torch.profiler writes it for that rank.

In the "playground/ exports" box of docs/design.md, beside playground.export.chrome_trace:
`--trace DIR/` writes a folder of one file per rank (`rank-N.json`, issue 39 item 7;
playground.export.trace_folder writes them), the layout the field's tools read. Each
document carries `distributedInfo` (backend, rank, world size, the default process
group) as torch.profiler writes it, so Holistic Trace Analysis' `TraceAnalysis` loads
the folder; each Span is a `cpu_op` event, a collective or a message named as torch's
profiler names it (`gloo:all_reduce`, `gloo:send`) with `Group size`, bytes, peer and
the lesson's mechanism in its args; a send and its receive are joined by a flow event
(`ph: "s"` in the sender's file, `"f"` in the receiver's, same id), so Perfetto draws
the arrow. `playground trace FOLDER` reads it back (playground.kineto).

Imports: runtime's pure part and the trace format's pieces; never torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from playground.export.trace_format import meta, span_args, us
from runtime.sim.collective_kinds import KINDS
from runtime.sim.trace import Span

if TYPE_CHECKING:
    from playground.outcome import Outcome

COMM_KINDS = ("send", "recv", "sendrecv")
FLOW_CAT = "p2p"
# The mechanism a lesson's collectives teach (playground.kineto.collectives' names), so
# that reading a run back names each one as the lesson does.
LESSON_MECHANISMS = {
    ("ring-allreduce", "sendrecv"): "ring_all_reduce",
    ("ring-allreduce", "all_reduce"): "ring_all_reduce",
    ("zero", "all_gather"): "fsdp_param_all_gather",
    ("zero", "reduce_scatter"): "fsdp_grad_reduce_scatter",
    ("tensor-parallel", "all_reduce"): "tp_f_g_all_reduce",
    ("tensor-parallel", "all_gather"): "sequence_parallel",
    ("tensor-parallel", "reduce_scatter"): "sequence_parallel",
    ("pipeline", "send"): "pipeline_send_recv",
    ("pipeline", "recv"): "pipeline_send_recv",
    ("mixed-precision", "all_reduce"): "ddp_bucket_all_reduce",
}


def rank_documents(outcome: Outcome) -> dict[int, dict[str, Any]]:
    """Each rank's trace document, as torch.profiler would write it for that rank."""
    timeline = outcome.measured if outcome.measured is not None else outcome.predicted
    backend = outcome.backend or "sim"  # a prediction ran on no backend
    world = outcome.params.world_size
    groups = {a.id: a.group for a in outcome.lesson.build(outcome.params).actions()}
    info = {"backend": backend, "world_size": world, "pg_count": 1}
    default_pg = {"pg_name": "0", "pg_desc": "default_pg", "pg_size": world,
                  "ranks": list(range(world))}  # fmt: skip
    docs: dict[int, dict[str, Any]] = {}
    for rank in range(world):
        docs[rank] = {
            "schemaVersion": 1,
            "distributedInfo": {**info, "rank": rank, "pg_config": [default_pg]},
            "displayTimeUnit": "ms",
            "traceEvents": [
                meta(rank, 0, "process_name", {"name": f"rank {rank}"}),
                meta(rank, 0, "process_sort_index", {"sort_index": rank}),
                meta(rank, rank, "thread_name", {"name": f"rank {rank}"}),
            ],
            "otherData": {"scenario": outcome.lesson.name, "source": "playground"},
        }
    for span in timeline.spans:
        if span.rank in docs:
            group = groups.get(span.action_id or "")
            event = _rank_event(outcome.lesson.name, backend, span, group)
            docs[span.rank]["traceEvents"].append(event)
    for flow in _flows(timeline.spans):
        docs[flow["pid"]]["traceEvents"].append(flow)
    return docs


def _rank_event(lesson: str, backend: str, span: Span, group: Any) -> dict[str, Any]:
    args = span_args(span)
    name = span.label
    if span.kind in COMM_KINDS or span.kind in KINDS:
        name = f"{backend}:{span.kind}"  # as torch.profiler names a c10d op
        args["label"] = span.label
        if group:
            args["Group size"] = len(group)
        mechanism = LESSON_MECHANISMS.get((lesson, span.kind))
        if span.kind == "all_reduce" and (span.series or "").startswith("ddp"):
            mechanism = "ddp_bucket_all_reduce"
        if mechanism is not None:
            args["mechanism"] = mechanism
    if span.series is not None:
        args["series"] = span.series
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": span.rank,
        "tid": span.rank,
        "ts": us(span.start),
        "dur": max(0.0, us(span.duration)),
        "args": args,
    }


def _flows(spans: list[Span]) -> list[dict[str, Any]]:
    """A flow from each send to the receive that took its message: the k-th send from a
    to b pairs with the k-th receive on b from a (messages between two ranks keep order)."""
    sends: dict[tuple[int, int], list[Span]] = {}
    recvs: dict[tuple[int, int], list[Span]] = {}
    for span in sorted(spans, key=lambda s: s.start):
        if span.peer is None:
            continue
        if span.kind == "send":
            sends.setdefault((span.rank, span.peer), []).append(span)
        elif span.kind == "recv":
            recvs.setdefault((span.peer, span.rank), []).append(span)
    flows: list[dict[str, Any]] = []
    for pair, out in sorted(sends.items()):
        for send, recv in zip(out, recvs.get(pair, []), strict=False):
            flow_id = len(flows) // 2 + 1
            common = {"cat": FLOW_CAT, "name": "message", "id": flow_id}
            flows.append(
                {**common, "ph": "s", "pid": send.rank, "tid": send.rank, "ts": us(send.start)}
            )
            flows.append(
                {**common, "ph": "f", "bp": "e", "pid": recv.rank, "tid": recv.rank,
                 "ts": us(max(recv.start, recv.end - 1e-9))}
            )  # fmt: skip
    return flows
