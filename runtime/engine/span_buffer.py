"""A rank's Spans as it records them: preallocated slots, filled on the timed path.

Part of the real engine (runtime.engine.worker records into it). Recording a Span stores
the Action and its two clock readings (perf_counter_ns) in slots made before the run,
so nothing is built or allocated between a collective's end and the next action; the
Span dicts are built only when the rank ships its records to the parent, between steps
(`take`). No torch.
"""

from __future__ import annotations

from array import array
from typing import Any

from runtime.sim.program import Action
from runtime.sim.simulate import span_for


class SpanBuffer:
    """A rank's Spans as recorded: the Action and its start and end (perf_counter_ns) in
    slots made before the run, one per Action of the rank's Program (doubled if a lesson
    records more). Recording stores three values; `take` builds the Span dicts of the
    records so far, off the timed path, and the slots are used again from the first."""

    def __init__(self, capacity: int) -> None:
        self._actions: list[Action | None] = [None] * max(16, capacity)
        self._times = array("q", bytes(8 * 2 * len(self._actions)))
        self._count = 0

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
