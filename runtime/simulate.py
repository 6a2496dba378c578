"""The simulator: executes a Program on a virtual clock with a CostModel.

The second engine of DESIGN.md's picture. It emits one Span per Action with the
same action ids the real engine uses, so a predicted timeline pairs with the
measured one action by action.

Semantics (the same ones the real engine implements in runtime.worker):
- compute: takes CostModel.compute_time, slowed by core sharing when the ranks
  outnumber the CPU cores.
- send: blocking, like `send` (or `isend` then `wait`): the message occupies
  the directed link (src, dst) for alpha + S·beta, one message after another,
  and the sender is free when its message is delivered. It never waits for
  the receiver to post its recv (gloo and NCCL buffer the message).
- recv: completes when its message has arrived (plus gamma per byte when it
  reduces what it received).
- sendrecv: a ring step; posts its message (eager, on the link as above) and
  ends when the incoming one has arrived (then reduces it if asked).
- collective: a synchronisation of its group; it starts when the last member
  arrives and takes CostModel.collective_time. Each member's span runs from its
  own arrival, so waiting for a late rank shows up as time in the collective,
  as it does when measured.

When no rank can move and some are not finished, the Program is deadlocked:
DeadlockError names each stuck rank, its action and what it waits for.

Pure: stdlib only.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from runtime.costmodel import CostModel
from runtime.program import Action, Program, ProgramError
from runtime.trace import Span, Timeline


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


def simulate(program: Program, model: CostModel, *, busy_ranks: int | None = None) -> Timeline:
    """Run `program` on a virtual clock; return the predicted Timeline.

    `busy_ranks` is how many ranks compete for the CPU cores (default: the
    world size) when the model has a core count.
    """
    n = program.world_size
    sharing = model.sharing(busy_ranks if busy_ranks is not None else n)
    pc = [0] * n
    clock = [0.0] * n
    spans: list[Span] = []
    mailbox: dict[tuple[int, int], deque[float]] = defaultdict(deque)
    link_free: dict[tuple[int, int], float] = defaultdict(float)
    posted: set[int] = set()  # ranks whose current sendrecv has already sent its part
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

    def post(src: int, dst: int, nbytes: int, t: float) -> float:
        alpha, beta = model.link(src, dst)
        leave = max(t, link_free[(src, dst)])
        arrive = leave + alpha + nbytes * beta
        link_free[(src, dst)] = arrive
        mailbox[(src, dst)].append(arrive)
        return arrive

    def finish(action: Action, start: float, end: float) -> None:
        spans.append(span_for(action, start, end))
        clock[action.rank] = end
        pc[action.rank] += 1

    def try_step(rank: int) -> bool:
        action = program.ranks[rank][pc[rank]]
        t = clock[rank]
        if action.is_collective:
            group = action.group or ()
            gid = group_key(action)
            if rank not in registered:
                key = (gid, collective_seq[(rank, gid)])
                collective_seq[(rank, gid)] += 1
                registered[rank] = key
                arrivals[key][rank] = t
            key = registered[rank]
            members = arrivals[key]
            if len(members) < len(group):
                return False
            heads = [program.ranks[m][pc[m]] for m in group]
            kinds = {(h.kind, h.bytes) for h in heads}
            if len(kinds) != 1:
                raise ProgramError(
                    "collective mismatch in group "
                    + ", ".join(f"rank {h.rank}: {h.kind} {h.bytes}B ({h.id})" for h in heads)
                )
            end = max(members.values()) + model.collective_time(action)
            for head in heads:
                registered.pop(head.rank)
                finish(head, members[head.rank], end)
            del arrivals[key]
            return True
        if action.kind == "send":
            finish(action, t, post(rank, action.dst, action.bytes, t))
            return True
        if action.kind == "recv":
            box = mailbox[(action.src, rank)]
            if not box:
                return False
            arrive = box.popleft()
            end = max(t, arrive) + (model.gamma * action.bytes if action.reduce else 0.0)
            finish(action, t, end)
            return True
        if action.kind == "sendrecv":
            if rank not in posted:
                post(rank, action.dst, action.bytes, t)
                posted.add(rank)
            box = mailbox[(action.src, rank)]
            if not box:
                return True  # posted its send: progress, even though it now waits
            arrive = box.popleft()
            posted.discard(rank)
            done = max(t, arrive)
            end = done + (model.gamma * action.recv_bytes if action.reduce else 0.0)
            finish(action, t, end)
            return True
        finish(action, t, t + model.compute_time(action, sharing))
        return True

    while True:
        pending = [r for r in range(n) if pc[r] < len(program.ranks[r])]
        if not pending:
            break
        progressed = False
        # Earliest clock first keeps link order causal when several ranks share a link.
        for rank in sorted(pending, key=lambda r: clock[r]):
            before = (pc[rank], rank in registered, rank in posted)
            try_step(rank)
            if (pc[rank], rank in registered, rank in posted) != before:
                progressed = True
        if not progressed:
            raise DeadlockError(
                [_why_stuck(program, r, pc[r], registered, arrivals) for r in pending]
            )
    return Timeline(spans=spans)


def _why_stuck(program: Program, rank: int, pc: int, registered, arrivals) -> StuckRank:
    action = program.ranks[rank][pc]
    if action.is_collective:
        key = registered.get(rank)
        here = set(arrivals.get(key, {})) if key else set()
        missing = sorted(set(action.group or ()) - here)
        return StuckRank(
            rank, action.id, f"{action.kind} with rank(s) {missing}, which never arrive"
        )
    if action.kind in ("recv", "sendrecv"):
        return StuckRank(rank, action.id, f"a message from rank {action.src} that is never sent")
    return StuckRank(rank, action.id, "nothing (internal error)")
