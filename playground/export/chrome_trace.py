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

A path ending in a separator (`--trace runs/trace/`) writes a folder of one file per
rank instead (`rank-N.json`, issue 39 item 7): playground.export.rank_traces makes
each rank's document, playground.export.trace_folder writes them into the folder.

Imports: stdlib, runtime's pure part and the other trace exports; never torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from playground.export.trace_folder import write_rank_traces
from playground.export.trace_format import meta, span_args, us
from runtime.engine.files import SHARED_FILE, write_text_atomic
from runtime.sim.trace import Span, Timeline

if TYPE_CHECKING:
    from playground.outcome import Outcome

MEASURED_PID = 1
PREDICTED_PID = 2


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
        meta(pid, 0, "process_name", {"name": name}),
        meta(pid, 0, "process_sort_index", {"sort_index": pid}),
    ]
    for rank in ranks:
        events.append(meta(pid, rank, "thread_name", {"name": f"rank {rank}"}))
        events.append(meta(pid, rank, "thread_sort_index", {"sort_index": rank}))
    events += [_complete(pid, span, pairs.get(span.action_id or "")) for span in timeline.spans]
    for mark in timeline.marks:
        events.append(
            {
                "name": mark.label,
                "cat": mark.kind,
                "ph": "i",
                "ts": us(mark.t),
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
                "ts": us(counter.t),
                "pid": pid,
                "tid": counter.rank,
                "args": {counter.category: counter.value},
            }
        )
    return events


def _complete(pid: int, span: Span, pair: Span | None) -> dict[str, Any]:
    args = span_args(span)
    if pair is not None:
        args["predicted_dur_us"] = us(pair.duration)
        if span.duration > 0:
            args["prediction_error"] = round(abs(pair.duration - span.duration) / span.duration, 6)
    return {
        "name": span.label,
        "cat": span.kind,
        "ph": "X",
        "ts": us(span.start),
        # A clock step can make end < start by a few ns; the format needs dur >= 0.
        "dur": max(0.0, us(span.duration)),
        "pid": pid,
        "tid": span.rank,
        "args": args,
    }
