"""The pieces of the Trace Event Format both trace exports write alike.

In the "playground/ exports" box of docs/design.md, under playground.export.chrome_trace
(one file: measured and predicted) and playground.export.rank_traces (a file per rank):
times in microseconds, metadata events, a Span's optional fields as an event's args.

Imports: runtime's pure trace types only; never torch.
"""

from __future__ import annotations

from typing import Any

from runtime.sim.trace import OPTIONAL_SPAN_FIELDS, Span

_US = 1e6  # trace-event times are microseconds


def meta(pid: int, tid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A metadata event (`ph: "M"`): a process's or thread's name or sort index."""
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def us(seconds: float) -> float:
    """Seconds as the format's microseconds."""
    # Nanosecond resolution is all perf_counter_ns gives; more digits only cost bytes.
    return round(seconds * _US, 3)


def span_args(span: Span) -> dict[str, Any]:
    """The Span's fields set only for some actions (action_id, bytes, peer, step, ...),
    each an arg when set."""
    return {
        name: getattr(span, name)
        for name in OPTIONAL_SPAN_FIELDS
        if getattr(span, name) is not None
    }
