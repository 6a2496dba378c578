"""Chrome trace-event JSON of one Outcome, for Perfetto (ui.perfetto.dev) or chrome://tracing.

In docs/design.md's picture this is one of the "playground/ exports": `--trace
FILE.json` hands the measured and predicted Timelines to the tools engineers
already use for real profiles (the PyTorch profiler writes this same format),
so a learner can zoom, search and measure with them.

Layout of the trace (the "JSON Object Format" of the Trace Event Format spec):
- process 1 is "measured", process 2 is "predicted" (process_name metadata;
  process_sort_index keeps measured on top); thread = rank ("rank N").
- each Span is a complete event (`ph: "X"`): name = label, cat = kind,
  ts/dur in microseconds from the run's start, args = the Span's optional
  fields (action_id, bytes, peer, step, ...). A measured Span with a predicted
  pair also carries `predicted_dur_us` and `prediction_error` (|pred-meas|/meas),
  the number each lesson is about.
- each Mark (failure, checkpoint, restart) is an instant event (`ph: "i"`),
  thread-scoped when it names a rank, process-scoped otherwise.
- each Counter sample (memory by category) is a counter event (`ph: "C"`), so
  Perfetto draws it as a track under the process.

The file is written to a temporary sibling and moved into place with
`os.replace`, so a failure never leaves half a file.

A path ending in a separator (`--trace runs/trace/`) writes a new folder of one file
per rank instead (`rank-N.json`, issue 39 item 7), the layout the field's tools read:
each file carries `distributedInfo` (backend, rank, world size, the default process
group) as torch.profiler writes it, so Holistic Trace Analysis' `TraceAnalysis` loads
the folder; each Span is a `cpu_op` event, a collective or a message named as torch's
profiler names it (`gloo:all_reduce`, `gloo:send`) with `Group size`, bytes, peer and
the lesson's mechanism in its args; a send and its receive are joined by a flow event
(`ph: "s"` in the sender's file, `"f"` in the receiver's, same id), so Perfetto draws
the arrow. `playground trace FOLDER` reads it back (playground.kineto).

Imports: stdlib and runtime's pure part; never torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.engine.files import SHARED_FILE, write_text_atomic
from runtime.sim.collective_kinds import KINDS
from runtime.sim.trace import OPTIONAL_SPAN_FIELDS, Span, Timeline

if TYPE_CHECKING:
    from playground.session import Outcome

MEASURED_PID = 1
PREDICTED_PID = 2
_US = 1e6  # trace-event times are microseconds
# The Span fields that are set only for some actions; each becomes an arg when set.


def write_trace(outcome: Outcome, path: str | os.PathLike[str]) -> None:
    """Write the Chrome trace-event JSON of `outcome` to `path` (atomically); a path ending
    in a separator: a new folder of one file per rank (`write_rank_traces`)."""
    if str(path).endswith((os.sep, "/")):
        write_rank_traces(outcome, path)
        return
    # Compact separators: a big run has tens of thousands of events.
    text = json.dumps(trace_events(outcome), separators=(",", ":"), allow_nan=False)
    # A document to share (0644), written in place of a regular file only.
    write_text_atomic(Path(path), text, mode=SHARED_FILE)


def trace_events(outcome: Outcome) -> dict[str, Any]:
    """The whole trace document: {"traceEvents": [...], "displayTimeUnit": "ms"}."""
    events: list[dict[str, Any]] = []
    predicted_pairs = outcome.predicted.by_action()
    if outcome.measured is not None:
        events += _process(MEASURED_PID, "measured", outcome.measured, predicted_pairs)
    events += _process(PREDICTED_PID, "predicted", outcome.predicted, {})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        # Free-form metadata the viewers keep and show ("otherData" in the spec).
        "otherData": {
            "scenario": outcome.lesson.name,
            "params": outcome.params.typed(),
            "profile": outcome.profile.name,
            "backend": outcome.backend,
        },
    }


def _process(
    pid: int, name: str, timeline: Timeline, pairs: dict[str, Span]
) -> list[dict[str, Any]]:
    ranks = sorted(
        set(timeline.ranks())
        | {m.rank for m in timeline.marks if m.rank is not None}
        | {c.rank for c in timeline.counters}
    )
    events: list[dict[str, Any]] = [
        _meta(pid, 0, "process_name", {"name": name}),
        _meta(pid, 0, "process_sort_index", {"sort_index": pid}),
    ]
    for rank in ranks:
        events.append(_meta(pid, rank, "thread_name", {"name": f"rank {rank}"}))
        events.append(_meta(pid, rank, "thread_sort_index", {"sort_index": rank}))
    events += [_complete(pid, span, pairs.get(span.action_id or "")) for span in timeline.spans]
    for mark in timeline.marks:
        events.append(
            {
                "name": mark.label,
                "cat": mark.kind,
                "ph": "i",
                "ts": _us(mark.t),
                "pid": pid,
                "tid": mark.rank if mark.rank is not None else 0,
                "s": "t" if mark.rank is not None else "p",
            }
        )
    for counter in timeline.counters:
        events.append(
            {
                "name": f"rank {counter.rank} {counter.series or 'memory'}",
                "ph": "C",
                "ts": _us(counter.t),
                "pid": pid,
                "tid": counter.rank,
                "args": {counter.category: counter.value},
            }
        )
    return events


def _complete(pid: int, span: Span, pair: Span | None) -> dict[str, Any]:
    args: dict[str, Any] = {
        name: getattr(span, name)
        for name in OPTIONAL_SPAN_FIELDS
        if getattr(span, name) is not None
    }
    if pair is not None:
        args["predicted_dur_us"] = _us(pair.duration)
        if span.duration > 0:
            args["prediction_error"] = round(abs(pair.duration - span.duration) / span.duration, 6)
    return {
        "name": span.label,
        "cat": span.kind,
        "ph": "X",
        "ts": _us(span.start),
        # A clock step can make end < start by a few ns; the format needs dur >= 0.
        "dur": max(0.0, _us(span.duration)),
        "pid": pid,
        "tid": span.rank,
        "args": args,
    }


def _meta(pid: int, tid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _us(seconds: float) -> float:
    # Nanosecond resolution is all perf_counter_ns gives; more digits only cost bytes.
    return round(seconds * _US, 3)


# -- one file per rank (issue 39 item 7) ---------------------------------------------------
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


def write_rank_traces(outcome: Outcome, folder: str | os.PathLike[str]) -> list[Path]:
    """A new folder holding `rank-N.json` per rank (the measured run, else the prediction)."""
    where = Path(folder)
    where.mkdir(mode=0o755)  # a new folder: an existing one is never written into
    written = []
    for rank, doc in rank_documents(outcome).items():
        target = where / f"rank-{rank}.json"
        # json's default separators on purpose: HTA finds a file's rank by the text
        # `"rank": N` (with the space) before it parses the file.
        text = json.dumps(doc, allow_nan=False)
        write_text_atomic(target, text, mode=SHARED_FILE)
        written.append(target)
    return written


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
                _meta(rank, 0, "process_name", {"name": f"rank {rank}"}),
                _meta(rank, 0, "process_sort_index", {"sort_index": rank}),
                _meta(rank, rank, "thread_name", {"name": f"rank {rank}"}),
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
    args: dict[str, Any] = {
        name: getattr(span, name)
        for name in OPTIONAL_SPAN_FIELDS
        if getattr(span, name) is not None
    }
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
        "ts": _us(span.start),
        "dur": max(0.0, _us(span.duration)),
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
                {**common, "ph": "s", "pid": send.rank, "tid": send.rank, "ts": _us(send.start)}
            )
            flows.append(
                {**common, "ph": "f", "bp": "e", "pid": recv.rank, "tid": recv.rank,
                 "ts": _us(max(recv.start, recv.end - 1e-9))}
            )  # fmt: skip
    return flows
