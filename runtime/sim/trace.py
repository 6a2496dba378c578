"""Timeline records: Span (timing), Counter (memory samples), Mark (events).

In docs/design.md's picture these are the only records that flow from either engine
to the UI and the exports. Both the real engine and the simulator produce a
Timeline; measured and predicted Spans pair by `action_id`.

Times are seconds from the run's start (the instant all ranks left the start
barrier). A Timeline round-trips through JSON exactly.

Pure: stdlib only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# The fields an Action may fill in on its Span (runtime.sim.program.Action.span_fields),
# in the order the exports list them. `series` is the group a step belongs to (a
# schedule, a ZeRO stage, a config): the UI groups by it and never parses ids.
POSITION_FIELDS = ("series", "stage", "microbatch", "chunk", "step")
OPTIONAL_SPAN_FIELDS = ("action_id", *POSITION_FIELDS, "bytes", "peer")


@dataclass
class Span:
    """One action of one rank, from start to end (seconds from the run's start)."""

    rank: int
    kind: str
    label: str
    start: float
    end: float
    action_id: str | None = None
    series: str | None = None
    stage: int | None = None
    microbatch: int | None = None
    chunk: int | None = None
    step: int | None = None
    bytes: int | None = None
    peer: int | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rank": self.rank,
            "kind": self.kind,
            "label": self.label,
            "start": self.start,
            "end": self.end,
        }
        for name in OPTIONAL_SPAN_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Span:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Counter:
    """One sample of a quantity (bytes) on one rank, e.g. memory by category; `series`
    is the variant it belongs to (a ZeRO stage), as on Spans."""

    rank: int
    category: str
    t: float
    value: float
    series: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.series is None:
            del out["series"]
        return out


@dataclass
class Mark:
    """A point event: a failure, a checkpoint, a restart, a phase boundary."""

    t: float
    kind: str
    label: str
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.rank is None:
            del out["rank"]
        return out


def makespan(spans: Iterable[Span]) -> float:
    """From the first span's start to the last one's end (0 for none)."""
    spans = list(spans)
    if not spans:
        return 0.0
    return max(s.end for s in spans) - min(s.start for s in spans)


def mean_step_period(spans: Iterable[Span], first: int, last: int) -> float | None:
    """Steps `first`..`last` as a run flows, per step: from the last span out of step
    first − 1 to the last one out of step `last` (what iterations/s counts: the skew the
    ranks enter a step with is not read as its time). None without both of those steps."""
    ends: dict[int, float] = {}
    for s in spans:
        if s.step == first - 1 or s.step == last:
            ends[s.step] = max(ends.get(s.step, s.end), s.end)
    if first - 1 not in ends or last not in ends:
        return None
    return (ends[last] - ends[first - 1]) / (last - first + 1)


@dataclass
class Timeline:
    spans: list[Span] = field(default_factory=list)
    counters: list[Counter] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)

    @property
    def makespan(self) -> float:
        return makespan(self.spans)

    @property
    def end(self) -> float:
        return max((s.end for s in self.spans), default=0.0)

    def ranks(self) -> list[int]:
        return sorted({s.rank for s in self.spans})

    def by_action(self) -> dict[str, Span]:
        return {s.action_id: s for s in self.spans if s.action_id is not None}

    def of_series(self, series: str | None, *, skip: tuple[str, ...] = ("barrier",)) -> list[Span]:
        """The spans of one series (a schedule, a ZeRO stage), barriers left out."""
        return [s for s in self.spans if s.series == series and s.kind not in skip]

    def to_dict(self) -> dict[str, Any]:
        return {
            "spans": [s.to_dict() for s in self.spans],
            "counters": [c.to_dict() for c in self.counters],
            "marks": [m.to_dict() for m in self.marks],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timeline:
        return cls(
            [Span.from_dict(s) for s in data.get("spans", [])],
            [Counter(**c) for c in data.get("counters", [])],
            [Mark(**m) for m in data.get("marks", [])],
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Timeline:
        return cls.from_dict(json.loads(text))
