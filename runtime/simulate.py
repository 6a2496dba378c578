"""The simulator: executes a Program on a virtual clock with a CostModel.

The second engine of DESIGN.md's picture. It emits one Span per Action with the
same action ids the real engine uses, so a predicted timeline pairs with the
measured one action by action.

It is a discrete-event simulation with one global clock. Each rank starts its
next action at the instant its previous one ends; events (a rank becoming
free, a compute finishing) are processed in time order, earliest first.

Semantics (the same ones the real engine implements in runtime.worker):
- compute: CostModel.compute_time is its base duration, the time it takes with
  a core to itself. When the model has a core count (`cores`), the computing
  ranks share those cores as processor sharing: at any instant, if k ranks are
  computing, each progresses at min(1, cores/k) of its base speed, and the
  rates change whenever a compute starts or ends anywhere. A static slow-down
  by world size / cores would be wrong wherever ranks idle: in a pipeline's
  warm-up only the first stage computes, at full speed, while in its steady
  state all stages compete for the cores. Ranks waiting on communication do
  not count as computing (calibration folds the CPU that loopback traffic
  burns into alpha and beta). Without a core count every compute runs at its
  base speed.
- send: blocking, like `send` (or `isend` then `wait`): the message occupies
  the directed link (src, dst) for alpha + S·beta, one message after another,
  and the sender is free when its message is delivered. It never waits for
  the receiver to post its recv (gloo and NCCL buffer the message). A send
  with the `nonblocking` arg is an `isend` whose wait comes later: the sender
  goes on at once and the message still takes the link as above (pipelines).
- messages pair in order per channel (src, dst, tag), the `tag` arg being 0
  unless a Program separates channels (see runtime.program); all channels
  from src to dst share the one link.
- recv: completes when its message has arrived (plus gamma per byte when it
  reduces what it received).
- sendrecv: a ring step; posts its message (eager, on the link as above) and
  ends when the incoming one has arrived (then reduces it if asked).
- collective: a synchronisation of its group; it starts when the last member
  arrives and takes CostModel.collective_time. Each member's span runs from its
  own arrival, so waiting for a late rank shows up as time in the collective,
  as it does when measured.

Communication is costed the moment it is posted: a message's arrival time is
known when it is sent, so a waiting receiver's end is fixed then and there.
Only compute needs the global clock, because its speed depends on who else is
computing meanwhile.

When no rank can move and some are not finished, the Program is deadlocked:
DeadlockError names each stuck rank, its action and what it waits for.

Pure: stdlib only.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict, deque
from dataclasses import dataclass

from runtime.costmodel import CostModel
from runtime.program import Action, Program, ProgramError
from runtime.trace import Span, Timeline

# Compute jobs whose finish tags differ by less than this (relative) end together:
# tags reached by different sums of the same durations can differ in the last
# bits, and an extra event a few ulps later would only split one instant in two.
_TIE = 1e-12


@dataclass(frozen=True)
class StuckRank:
    rank: int
    action_id: str
    waiting_for: str


class DeadlockError(RuntimeError):
    def __init__(self, stuck: list[StuckRank]):
        self.stuck = stuck
        detail = "; ".join(
            f"rank {s.rank} at {s.action_id} waits for {s.waiting_for}" for s in stuck
        )
        super().__init__(f"deadlock: {len(stuck)} rank(s) can never finish: {detail}")


def span_for(action: Action, start: float, end: float) -> Span:
    return Span(
        rank=action.rank,
        kind=action.kind,
        label=action.label,
        start=start,
        end=end,
        **action.span_fields(),
    )


class _CoreSharing:
    """Compute actions sharing the model's CPU cores (egalitarian processor sharing).

    Every computing rank progresses at the same rate, CostModel.core_share(k)
    = min(1, cores/k) while k of them compute. So rather than decrementing
    each one's remaining work at every event, we keep one work clock
    `work_done`, the integral of that rate over time: a compute of base length
    w started when the clock read V ends when it reads V + w, its tag. Computes therefore end in tag order (a heap), an event costs
    O(log k), and computes with equal tags end at the same instant exactly.
    """

    def __init__(self, model: CostModel) -> None:
        self.model = model
        self.now = 0.0
        self.work_done = 0.0
        # (tag, rank, start, action); a rank runs one compute at a time, so
        # (tag, rank) is unique and the Action is never compared.
        self.jobs: list[tuple[float, int, float, Action]] = []

    def rate(self) -> float:
        return self.model.core_share(len(self.jobs))

    def advance(self, t: float) -> None:
        """Move the clock to `t`, crediting the computes in flight."""
        if t > self.now:
            if self.jobs:
                self.work_done += self.rate() * (t - self.now)
            self.now = t

    def start(self, action: Action, base: float, t: float) -> None:
        self.advance(t)
        heapq.heappush(self.jobs, (self.work_done + base, action.rank, t, action))

    def next_end(self) -> float:
        if not self.jobs:
            return math.inf
        left = self.jobs[0][0] - self.work_done
        # An advance may land a rounding error short of (or past) a tag: that
        # compute is due now, not a few ulps later as an event of its own.
        if left <= _TIE * abs(self.work_done):
            return self.now
        return self.now + left / self.rate()

    def pop_ended(self) -> list[tuple[float, Action]]:
        """Advance to the next compute end; return (start, action) of all ending then."""
        end = self.next_end()
        tag = self.jobs[0][0]
        # Land exactly on the tag and time rather than on rate·dt sums, so the
        # finishing jobs leave no residue that would need another event.
        self.now = end
        self.work_done = max(self.work_done, tag)
        limit = self.work_done + _TIE * abs(self.work_done)
        ended = []
        while self.jobs and self.jobs[0][0] <= limit:
            _, _, start, action = heapq.heappop(self.jobs)
            ended.append((start, action))
        return ended


def simulate(program: Program, model: CostModel) -> Timeline:
    """Run `program` on a virtual clock; return the predicted Timeline."""
    n = program.world_size
    ranks = program.ranks
    pc = [0] * n
    spans: list[Span] = []
    # When each rank is free to start its next action: (time, rank). A rank has
    # at most one entry, and ties go to the lower rank, so runs are deterministic.
    ready: list[tuple[float, int]] = [(0.0, r) for r in range(n) if ranks[r]]
    heapq.heapify(ready)
    # Without a core count every compute runs at base speed and ends where it
    # starts plus its duration, exactly, with no sharing bookkeeping.
    sharing = _CoreSharing(model) if model.cores is not None and model.cores > 0 else None

    # Arrival times of the messages posted on each channel (src, dst, tag).
    mailbox: dict[tuple[int, int, int], deque[float]] = defaultdict(deque)
    link_free: dict[tuple[int, int], float] = defaultdict(float)
    # channel -> the recv or sendrecv that dst is blocked in, and when it began.
    waiting: dict[tuple[int, int, int], tuple[Action, float]] = {}
    collective_seq: dict[tuple[int, int], int] = defaultdict(int)
    arrivals: dict[tuple[int, int], dict[int, float]] = defaultdict(dict)
    registered: dict[int, tuple[int, int]] = {}
    group_ids: dict[int, int] = {}  # id(group tuple) -> small int
    distinct_groups: dict[tuple[int, ...], int] = {}

    def group_key(action: Action) -> int:
        # Hashing a 4096-rank group tuple on every step would make large
        # collectives quadratic; scenarios share one tuple object per group.
        group = action.group or ()
        gid = group_ids.get(id(group))
        if gid is None:
            gid = group_ids[id(group)] = distinct_groups.setdefault(group, len(distinct_groups))
        return gid

    def finish(action: Action, start: float, end: float) -> None:
        rank = action.rank
        spans.append(span_for(action, start, end))
        pc[rank] += 1
        if pc[rank] < len(ranks[rank]):
            heapq.heappush(ready, (end, rank))

    def receive(action: Action, start: float, arrive: float) -> None:
        nbytes = action.recv_bytes if action.kind == "sendrecv" else action.bytes
        finish(action, start, max(start, arrive) + (model.gamma * nbytes if action.reduce else 0.0))

    def post(action: Action, t: float) -> float:
        # Only src posts on (src, dst), in its program order, so the link queue
        # is in program order however the events of other ranks interleave.
        src, dst = action.rank, action.dst
        alpha, beta = model.link(src, dst)
        leave = max(t, link_free[(src, dst)])
        arrive = leave + alpha + action.bytes * beta
        link_free[(src, dst)] = arrive
        channel = (src, dst, action.arg("tag", 0))
        mailbox[channel].append(arrive)
        blocked = waiting.pop(channel, None)
        if blocked is not None:
            receive(blocked[0], blocked[1], mailbox[channel].popleft())
        return arrive

    def take(action: Action, t: float) -> None:
        channel = (action.src, action.rank, action.arg("tag", 0))
        box = mailbox[channel]
        if box:
            receive(action, t, box.popleft())
        else:
            waiting[channel] = (action, t)

    def start(rank: int, t: float) -> None:
        action = ranks[rank][pc[rank]]
        kind = action.kind
        if kind == "send":
            arrive = post(action, t)
            finish(action, t, t if action.arg("nonblocking", False) else arrive)
        elif kind == "recv":
            take(action, t)
        elif kind == "sendrecv":
            post(action, t)
            take(action, t)
        elif action.is_collective:
            gid = group_key(action)
            key = (gid, collective_seq[(rank, gid)])
            collective_seq[(rank, gid)] += 1
            registered[rank] = key
            members = arrivals[key]
            members[rank] = t
            group = action.group or ()
            if len(members) < len(group):
                return
            heads = [ranks[m][pc[m]] for m in group]
            kinds = {(h.kind, h.bytes) for h in heads}
            if len(kinds) != 1:
                raise ProgramError(
                    "collective mismatch in group "
                    + ", ".join(f"rank {h.rank}: {h.kind} {h.bytes}B ({h.id})" for h in heads)
                )
            end = max(members.values()) + model.collective_time(action)
            del arrivals[key]
            for head in heads:
                registered.pop(head.rank)
                finish(head, members[head.rank], end)
        elif sharing is None:
            finish(action, t, t + model.compute_time(action))
        else:
            sharing.start(action, model.compute_time(action), t)

    while True:
        compute_end = sharing.next_end() if sharing is not None else math.inf
        # Computes ending at the same instant as a rank becomes free end first:
        # the order does not change any rate, as no time passes in between.
        if ready and ready[0][0] < compute_end:
            t, rank = heapq.heappop(ready)
            if sharing is not None:
                sharing.advance(t)
            start(rank, t)
        elif compute_end < math.inf:
            assert sharing is not None
            for begun, action in sharing.pop_ended():
                finish(action, begun, sharing.now)
        else:
            break

    stuck = [r for r in range(n) if pc[r] < len(ranks[r])]
    if stuck:
        raise DeadlockError([_why_stuck(program, r, pc[r], registered, arrivals) for r in stuck])
    return Timeline(spans=spans)


def _why_stuck(
    program: Program,
    rank: int,
    pc: int,
    registered: dict[int, tuple[int, int]],
    arrivals: dict[tuple[int, int], dict[int, float]],
) -> StuckRank:
    action = program.ranks[rank][pc]
    if action.is_collective:
        key = registered.get(rank)
        here = set(arrivals.get(key, {})) if key else set()
        missing = sorted(set(action.group or ()) - here)
        return StuckRank(
            rank, action.id, f"{action.kind} with rank(s) {missing}, which never arrive"
        )
    if action.kind in ("recv", "sendrecv"):
        tag = action.arg("tag", 0)
        channel = f" on tag {tag}" if tag else ""
        return StuckRank(
            rank, action.id, f"a message from rank {action.src}{channel} that is never sent"
        )
    return StuckRank(rank, action.id, "nothing (internal error)")
