"""Per-rank metrics of a run: what each worker did in each step, from the records we keep.

Where it sits (docs/design.md): runtime's pure part, beside trace.py. Both engines
already record a Span per Action, memory Counters and Marks; this module turns
one step's Spans (a `window`) into each rank's figures, the USE method per
worker: utilisation (busy fraction), saturation (waiting on peers), errors are
counted from Marks by runtime.engine.stragglers. No lesson is named: every lesson gets
these figures for free, measured or predicted alike.

A window is one step of one series (the spans' `series` and `step`); a series
without steps is one window (a pipeline schedule is one training step); spans
with neither fall into one-second bins. A window of barriers only (a stage's
start line) is not a step.

Per rank and window:
- `step_s`: from the rank's first action in the window to its last;
- `compute_s`: its compute actions (kinds other than messages and collectives);
- `wait_s`: time spent waiting for peers inside communication: in a collective
  (a barrier too) from its own arrival to the last member's; in a receive
  until the sender posted the message; and a `wait` for the rank's own
  non-blocking collectives (the part of them backward did not hide). Instances pair by order (the k-th
  all_gather of unit 3 on every rank; the k-th message from s to r), the rule
  collectives and p2p follow (runtime.sim.program). Spans do not carry their group,
  so alike collectives of disjoint subgroups pair as one: a future lesson with
  subgroups would see their waits merged;
- `comm_s`: the rest of its communication (the transfer itself);
- `idle_s`: between its actions (the bubble);
- bytes sent and received: messages exactly (`bytes`, `peer`); a collective by
  its kind's bus-bandwidth factor over the world (runtime.sim.collective_kinds:
  2(n−1)/n·S for an all-reduce, (n−1)/n·S for a reduce-scatter or all-gather, S
  for a broadcast);
- `memory_peak_bytes`: the largest sum of the memory categories (the Counters
  of the rank's own series) sampled inside the window (`memory_peak`);
- `items`: samples or tokens it processed, where the lesson says what one is.

`work_s` = compute + transfer = what the step would take if no one made the rank
wait: in data parallelism every collective waits for the slowest rank, so all
ranks' wall step times are alike and a straggler shows in its work, not its step.

Pure: stdlib only.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from runtime.sim.collective_kinds import COLLECTIVE_KINDS, lookup
from runtime.sim.trace import Span

COLLECTIVES = COLLECTIVE_KINDS  # every registered kind (runtime.sim.collective_kinds)
MESSAGES = frozenset({"send", "recv", "sendrecv"})
WAITS = frozenset({"wait"})  # for the rank's own non-blocking collectives (runtime.sim.program)
BIN_S = 1.0  # the bins of spans that belong to no series and no step
# The series of a lesson's warm-up steps (first-touch buffers, connections, caches): run
# and simulated like the others, drawn as warm-up by the Gantt and the HTML export, and
# left out of the lesson's times (Hooks.warmup_steps counts them).
WARMUP_SERIES = "warm-up"

WindowKey = tuple[str | None, int | None, int | None]  # (series, step, one-second bin)


def window_key(span: Span) -> WindowKey:
    if span.series is None and span.step is None:
        return (None, None, int(span.start // BIN_S))
    return (span.series, span.step, None)


@dataclass(frozen=True)
class Window:
    """One step of one series (or a second of a run without steps), across ranks."""

    series: str | None
    step: int | None
    start: float
    end: float

    @property
    def label(self) -> str:
        if self.series is None and self.step is None:
            return f"{self.start:.0f}s"
        parts = [self.series or "", f"step {self.step}" if self.step is not None else ""]
        return " ".join(p for p in parts if p)


class StepShares:
    """What a rank's figures say once divided by its step time (a RankStep's, or a run's
    totals in runtime.engine.stragglers): the attributes step_s, compute_s, comm_s and items."""

    step_s: float
    compute_s: float
    comm_s: float
    items: float | None

    @property
    def busy(self) -> float:
        """The share of the step spent computing."""
        return self.compute_s / self.step_s if self.step_s > 0 else 0.0

    @property
    def work_s(self) -> float:
        """Compute and transfers: the step without waiting for anyone."""
        return self.compute_s + self.comm_s

    @property
    def throughput(self) -> float | None:
        """Items per second of step (None where the lesson does not count items)."""
        if self.items is None or self.step_s <= 0:
            return None
        return self.items / self.step_s


@dataclass(frozen=True)
class RankStep(StepShares):
    """What one rank did in one window (seconds, bytes); None where a figure is absent."""

    rank: int
    start: float
    end: float
    compute_s: float
    comm_s: float
    wait_s: float
    idle_s: float
    sent_bytes: float
    received_bytes: float
    memory_peak_bytes: float | None = None
    items: float | None = None

    @property
    def step_s(self) -> float:
        return self.end - self.start


def collective_bytes(kind: str, nbytes: int, world: int) -> float:
    """Bytes one rank sends (and receives) in a ring collective of S = `nbytes`: its
    kind's bus-bandwidth factor times S (none for a barrier)."""
    return lookup(kind).busbw_factor(max(1, world)) * nbytes


def waits(spans: Iterable[Span]) -> dict[int, float]:
    """id(span) -> seconds it waited for a peer, for the communication spans of a window."""
    by_rank: dict[int, list[Span]] = defaultdict(list)
    for span in spans:
        by_rank[span.rank].append(span)
    arrivals: dict[tuple, list[Span]] = defaultdict(list)  # a collective instance
    sent: dict[tuple, list[Span]] = defaultdict(list)  # messages to a receiver, in order
    received: dict[tuple, list[Span]] = defaultdict(list)
    for rank, mine in by_rank.items():
        mine.sort(key=lambda s: s.start)
        seen: dict[tuple, int] = defaultdict(int)
        for span in mine:
            if span.kind in COLLECTIVES:
                kind_key = (span.kind, span.chunk, span.bytes)
                arrivals[(*kind_key, seen[kind_key])].append(span)
                seen[kind_key] += 1
            elif span.peer is not None and span.kind == "send":
                sent[("send", rank, span.peer, span.microbatch)].append(span)
            elif span.peer is not None and span.kind == "recv":
                received[("send", span.peer, rank, span.microbatch)].append(span)
            elif span.peer is not None and span.kind == "sendrecv":
                # A ring step names where it sends; its source is who sends to it.
                sent[("sendrecv", None, span.peer, span.microbatch)].append(span)
                received[("sendrecv", None, rank, span.microbatch)].append(span)
    out: dict[int, float] = {}
    for members in arrivals.values():
        last = max(s.start for s in members)
        for span in members:
            out[id(span)] = min(max(0.0, last - span.start), span.duration)
    for key, receivers in received.items():
        senders = sorted(sent.get(key, ()), key=lambda s: s.start)
        for span, sender in zip(receivers, senders, strict=False):
            out[id(span)] = out.get(id(span), 0.0) + min(
                max(0.0, sender.start - span.start), span.duration
            )
    return out


def rank_steps(spans: list[Span], world: int, items: float | None = None) -> dict[int, RankStep]:
    """Each rank's figures in one window (its memory peak is `memory_peak`'s)."""
    wait = waits(spans)
    by_rank: dict[int, list[Span]] = defaultdict(list)
    for span in spans:
        by_rank[span.rank].append(span)
    senders: dict[tuple, list[Span]] = defaultdict(list)
    for span in spans:
        if span.kind == "sendrecv" and span.peer is not None:
            senders[(span.peer, span.microbatch)].append(span)
    out: dict[int, RankStep] = {}
    for rank, mine in by_rank.items():
        start, end = min(s.start for s in mine), max(s.end for s in mine)
        compute = comm = waited = busy = sent = received = 0.0
        ring_in = iter(sorted(senders.get((rank, None), []), key=lambda s: s.start))
        for span in sorted(mine, key=lambda s: s.start):
            busy += span.duration
            if span.kind in COLLECTIVES:
                w = wait.get(id(span), 0.0)
                waited += w
                comm += span.duration - w
                moved = collective_bytes(span.kind, span.bytes or 0, world)
                sent, received = sent + moved, received + moved
            elif span.kind in MESSAGES:
                w = wait.get(id(span), 0.0)
                waited += w
                comm += span.duration - w
                nbytes = span.bytes or 0
                if span.kind in ("send", "sendrecv"):
                    sent += nbytes
                if span.kind == "recv":
                    received += nbytes
                elif span.kind == "sendrecv":
                    incoming = next(ring_in, None)
                    received += (incoming.bytes or 0) if incoming is not None else nbytes
            elif span.kind in WAITS:
                waited += span.duration
            else:
                compute += span.duration
        out[rank] = RankStep(
            rank,
            start,
            end,
            compute,
            comm,
            waited,
            max(0.0, (end - start) - busy),
            sent,
            received,
            None,
            items,
        )
    return out


Sample = tuple[float, float, str | None]  # (t, the rank's memory total then, its series)


def memory_peak(samples: list[Sample], step: RankStep, series: str | None) -> float | None:
    """The largest memory total a rank sampled inside its step (samples in time order;
    a sample of another series, a ZeRO stage's model before or after, is not this one's)."""
    first = bisect_left(samples, step.start, key=lambda x: x[0])
    last = bisect_right(samples, step.end, key=lambda x: x[0])
    inside = [
        total for _, total, of in samples[first:last] if series is None or of in (None, series)
    ]
    return max(inside) if inside else None
