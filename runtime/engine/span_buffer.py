"""A rank's Spans as it records them: preallocated slots, filled on the timed path, and
how they travel to the parent.

Part of the real engine (runtime.engine.worker records into it; runtime.engine.launch
unpacks on the parent's side). Recording a Span stores the Action and its two clock
readings (perf_counter_ns) in slots made before the run, so nothing is built or
allocated between a collective's end and the next action. What ships between steps:

- `pack` (a launched rank): each record's index in the rank's own Actions (the
  Program's, which the parent has too) and the clock readings, as two byte strings,
  one message per batch. The rank builds no Span, and the parent, which shares the
  cores with the ranks while they run, unpickles two strings; it makes the Spans
  (`unpack`) once the run is over, or at once for a listener that shows them live.
- `take` (a torchrun rank, a rank that keeps its records to the end): the Span dicts.

Both give the same Spans, to the bit: the same integers, the same division.
Torch-free: the parent imports it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any

from runtime.sim.program import Action, span_for
from runtime.sim.trace import Span

# A whole number of steps B: a streamed run then ships its records only in every other
# block of B steps (steps 0..B-1, 2B..3B-1, ...) and keeps those of the blocks between
# until the next block that ships. benchmarks/ring_allreduce.py sets it, to time
# streamed and kept steps of one run side by side (runtime.engine.worker.stream_blocks).
STREAM_BLOCKS_ENV = "PLAYGROUND_STREAM_BLOCKS"

# A batch of records as `pack` gives it: the index of each record's Action (past the
# end of the rank's Actions: one of `extra`, shipped with it), the start and end of
# each (int64 pairs), both as bytes, and the Actions the rank's own list lacks.
Packed = tuple[bytes, bytes, list[Action]]


class SpanBuffer:
    """A rank's Spans as recorded: the Action and its start and end (perf_counter_ns) in
    slots made before the run, one per Action of the rank's Program (doubled if a lesson
    records more). Recording stores three values; `take` or `pack` give the records so
    far, off the timed path, and the slots are used again from the first.

    `table`: the rank's Actions, in its Program's order, which `pack` names by index."""

    def __init__(self, capacity: int, table: Sequence[Action] = ()) -> None:
        self._actions: list[Action | None] = [None] * max(16, capacity)
        self._times = array("q", bytes(8 * 2 * len(self._actions)))
        self._count = 0
        # Looked up by identity: the table keeps its Actions alive, so no other object
        # can share an id with one of them, and an equal Action made elsewhere ships
        # whole (as `extra`), which is still right.
        self._table = list(table)
        self._index = {id(action): i for i, action in enumerate(self._table)}

    def __len__(self) -> int:
        return self._count

    def add(self, action: Action, start_ns: int, end_ns: int) -> None:
        i = self._count
        if i == len(self._actions):  # more records than the Program has Actions
            self._actions.extend([None] * i)
            self._times.extend(array("q", bytes(8 * 2 * i)))
        self._actions[i] = action
        self._times[2 * i] = start_ns
        self._times[2 * i + 1] = end_ns
        self._count = i + 1

    def take(self, t0_ns: int) -> list[dict[str, Any]]:
        """The Span dicts of the records so far (seconds after `t0_ns`), in order."""
        actions, times, out = self._actions, self._times, []
        for i in range(self._count):
            action = actions[i]
            assert action is not None
            start, end = (times[2 * i] - t0_ns) / 1e9, (times[2 * i + 1] - t0_ns) / 1e9
            out.append(span_for(action, start, end).to_dict())
            actions[i] = None
        self._count = 0
        return out

    def pack(self) -> Packed:
        """The records so far as `Packed`, in order, for `unpack` in the parent."""
        count, index, known = self._count, self._index, len(self._table)
        codes = array("q", [index.get(id(a), -1) for a in self._actions[:count]])
        extra: list[Action] = []
        if -1 in codes:  # an Action not in the rank's list: shipped whole, once per record
            for i, code in enumerate(codes):
                if code == -1:
                    action = self._actions[i]
                    assert action is not None
                    codes[i] = known + len(extra)
                    extra.append(action)
        self._count = 0
        return codes.tobytes(), self._times[: 2 * count].tobytes(), extra


def unpack(t0_ns: int, packed: Packed, table: Sequence[Action]) -> Iterator[Span]:
    """The Spans of a packed batch (seconds after `t0_ns`), in order: `table` is the
    rank's Actions as the parent handed them (the Program's list for that rank).
    ValueError if the batch does not fit them."""
    raw_codes, raw_times, extra = packed
    codes, times = array("q"), array("q")
    codes.frombytes(raw_codes)
    times.frombytes(raw_times)
    known = len(table)
    if len(times) != 2 * len(codes) or any(not 0 <= c < known + len(extra) for c in codes):
        raise ValueError("a packed batch of records that does not fit the rank's Actions")
    for k, code in enumerate(codes):
        action = table[code] if code < known else extra[code - known]
        start, end = (times[2 * k] - t0_ns) / 1e9, (times[2 * k + 1] - t0_ns) / 1e9
        yield span_for(action, start, end)


# A launched rank's batch: ("packed", rank, span dicts, counter dicts, t0_ns, *Packed).
# The dicts are records taken before time zero moved (RankContext.t0_ns); they come
# first. The parent turns it into the ("records", rank, span dicts, counter dicts) every
# listener reads (`as_records`), or keeps it packed until the run is over (`spans_of`).
PACKED = "packed"


def as_records(message: tuple, table: Sequence[Action]) -> tuple:
    """A `packed` message as the `records` message it stands for (its Span dicts built)."""
    _, rank, spans, counters, t0_ns, *packed = message
    built = [s.to_dict() for s in unpack(t0_ns, tuple(packed), table)]  # type: ignore[arg-type]
    return ("records", rank, [*spans, *built], counters)


def spans_of(message: tuple, table: Sequence[Action]) -> list[Span]:
    """The Spans of a `records` or `packed` message, in order."""
    spans = [Span.from_dict(s) for s in message[2]]
    if message[0] == PACKED:
        spans.extend(unpack(message[4], tuple(message[5:]), table))  # type: ignore[arg-type]
    return spans
