"""The simulator's event loop, on compiled ops: what runtime.sim.simulate runs a Program with.

Part of docs/design.md's second engine. runtime.sim.simulate compiles each Action into
an op, a plain tuple of the numbers the loop needs (a compute's seconds, a
message's link, latency, bytes·beta and channel, a collective's group and
seconds), and runs them here; a lesson that predicts at a scale where building
every Action would be slow (a 64-stage pipeline of 256 microbatches) compiles its
ops from its schedule and runs the same loop (runtime.sim.simulate states it).

Ops (tuples, first item the code):
- (COMPUTE, seconds): the base duration, with a core to itself;
- (SEND, link, alpha, bytes_beta, channel, issue): None blocks to arrival, else secs held;
- (RECV, channel, reduce_seconds);
- (SENDRECV, link, alpha, bytes_beta, out_channel, in_channel, reduce_seconds);
- (COLLECTIVE, group_id, seconds, signature): the members must agree on the
  signature (kind, bytes);
- (WAIT, seconds): the rank is busy without holding a core (I/O: a checkpoint's
  fsync'ed write waits on the disk, not the CPU);
- (ASYNC, group_id, seconds, signature): a non-blocking collective (a DDP
  bucket's all-reduce): the rank goes on at once; the collective starts when
  every member has launched it and each member's communication stream is free
  (its non-blocking collectives run one after another, in launch order), and
  ends `seconds` later; a member's op spans its launch to that end;
- (DRAIN,): until every non-blocking collective the rank launched has ended;
- (UNTIL, seconds, back): idle until `seconds` after the end of its op `back` places
  earlier (a server waiting for a request's arrival, from where its run started);
- (SYNCED, seconds, group_id, signature): a compute that runs collectives inside
  it (FSDP2's forward all-gathers unit by unit): computed as COMPUTE, then it ends
  on every member of the group together, when the last member's compute has.
`link` and `channel` are any hashable keys: messages on one link queue one
after another; on one channel they pair in order.

An op that ends at the very instant it starts (a non-blocking send, a receive
whose message is already there) is followed at once by the rank's next op,
without a trip through the event queue, unless a compute is due at that
instant (computes due first end first, as they always do).

A rank is free for its next op the model's DISPATCH seconds after an op ends (0
unless a run measured what its executor spends between two actions), or the gap
`gaps[rank][i]` the caller gives after each op where series differ in it; the op
that ends at the very instant it starts then waits for it too.

A slowed rank (CostModel.slow, the `slow` fault) computes at its shared speed,
then stays busy (factor − 1) times the compute's duration without holding a core,
as the real rank sleeps; its reductions of received data take factor times as long.

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import math
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from runtime.sim.coresharing import CoreSharing
from runtime.sim.costmodel import DISPATCH, CostModel

COMPUTE, SEND, RECV, SENDRECV, COLLECTIVE, WAIT, ASYNC, DRAIN, UNTIL, SYNCED = range(10)

Op = tuple[Any, ...]


class CollectiveMismatch(Exception):
    """Members of a group issued different collectives: (rank, op index) of each."""

    def __init__(self, heads: list[tuple[int, int]]):
        super().__init__("collective mismatch")
        self.heads = heads


@dataclass
class Run:
    """Where each op started and ended, and where each rank stopped."""

    starts: list[list[float]]
    ends: list[list[float]]
    order: list[int]  # the rank of each op, in the order ops ended
    pc: list[int]  # ops each rank ended (all of them, unless it is stuck)
    registered: dict[int, tuple[int, int]]  # rank -> the collective it waits in
    arrivals: dict[tuple[int, int], dict[int, float]]  # collective -> who arrived when
    # Non-blocking collectives some member never launched: key -> who launched it.
    launched: dict[tuple[int, int], dict[int, float]] = field(default_factory=dict)

    def stuck(self) -> list[int]:
        return [
            r
            for r, (done, row) in enumerate(zip(self.pc, self.starts, strict=True))
            if done < len(row)
        ]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection meanwhile: a simulation allocates no cycles, and the
    passes over its tuples took 5-10% of a 64-stage pipeline's prediction."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@gc_paused()
def run_ops(
    ops: list[list[Op]],
    groups: list[tuple[int, ...]],
    model: CostModel,
    gaps: list[list[float]] | None = None,
) -> Run:
    """Run each rank's ops on one virtual clock (runtime.sim.simulate's semantics).
    `groups[group_id]`: the members of each collective group, in order; `gaps`: the
    seconds after each op of each rank before its next (the model's DISPATCH if None)."""
    n = len(ops)
    pc = [0] * n
    starts = [[0.0] * len(row) for row in ops]
    ends = [[0.0] * len(row) for row in ops]
    order: list[int] = []
    # When each rank is free to start its next op: (time, rank). A rank has at
    # most one entry, and ties go to the lower rank, so runs are deterministic.
    ready = [(0.0, r) for r in range(n) if ops[r]]
    heapq.heapify(ready)
    push, pop = heapq.heappush, heapq.heappop
    sharing = CoreSharing(model, n) if model.cores is not None and model.cores > 0 else None
    slow = model.slow_factors(n) or [1.0] * n  # each rank's compute factor
    mailbox: dict[Any, deque[float]] = defaultdict(deque)  # channel -> arrival times
    link_free: dict[Any, float] = {}
    waiting: dict[Any, tuple[int, float]] = {}  # channel -> (blocked rank, since)
    sequence: dict[tuple[int, int], int] = defaultdict(int)
    arrivals: dict[tuple[int, int], dict[int, float]] = defaultdict(dict)
    registered: dict[int, tuple[int, int]] = {}
    # Non-blocking collectives: per rank, when its communication stream is free, how many
    # of its collectives are still running and when the last one ended; the ranks blocked
    # in a WAIT (since when); per launched collective, each member's (launch time, op index).
    stream_free = [0.0] * n
    running = [0] * n
    settled = [0.0] * n
    in_wait: dict[int, float] = {}
    launches: dict[tuple[int, int], dict[int, tuple[float, int]]] = defaultdict(dict)
    # Per SYNCED compute, each member's (start, end of its own compute).
    computed: dict[tuple[int, int], dict[int, tuple[float, float]]] = defaultdict(dict)
    synced_seen: dict[tuple[int, int], int] = defaultdict(int)
    # The seconds after each op before the rank's next (None: no gaps at all).
    uniform = model.compute.get(DISPATCH, 0.0)
    gap_rows = gaps if gaps is not None or not uniform else [[uniform] * len(r) for r in ops]

    def finish(rank: int, start: float, end: float) -> None:
        i = pc[rank]
        starts[rank][i] = start
        ends[rank][i] = end
        order.append(rank)
        pc[rank] = i + 1
        if i + 1 < len(ops[rank]):
            push(ready, (end + (gap_rows[rank][i] if gap_rows else 0.0), rank))

    def post(rank: int, op: Op, t: float) -> float:
        # Only src posts on its links, in its program order, so a link's queue is
        # in program order however the events of other ranks interleave.
        link = op[1]
        leave = max(t, link_free.get(link, 0.0))
        arrive = leave + op[2] + op[3]
        link_free[link] = arrive
        blocked = waiting.pop(op[4], None)
        if blocked is None:
            mailbox[op[4]].append(arrive)
        else:
            other, since = blocked
            head = ops[other][pc[other]]
            reduce = head[2] if head[0] == RECV else head[6]
            finish(other, since, max(since, arrive) + reduce * slow[other])
        return arrive

    def collective(rank: int, op: Op, t: float) -> None:
        gid = op[1]
        key = (gid, sequence[(rank, gid)])
        sequence[(rank, gid)] += 1
        registered[rank] = key
        members = arrivals[key]
        members[rank] = t
        group = groups[gid]
        if len(members) < len(group):
            return
        if any(ops[m][pc[m]][3] != op[3] for m in group):
            raise CollectiveMismatch([(m, pc[m]) for m in group])
        end = max(members.values()) + op[2]
        del arrivals[key]
        for m in group:
            del registered[m]
            finish(m, members[m], end)

    def launch(rank: int, op: Op, i: int, t: float) -> None:
        gid = op[1]
        key = (gid, sequence[(rank, gid)])
        sequence[(rank, gid)] += 1
        members = launches[key]
        members[rank] = (t, i)
        running[rank] += 1
        group = groups[gid]
        if len(members) < len(group):
            return
        if any(ops[m][members[m][1]][3] != op[3] for m in group):
            raise CollectiveMismatch([(m, members[m][1]) for m in group])
        begin = max(max(at for at, _ in members.values()), max(stream_free[m] for m in group))
        end = begin + op[2]
        del launches[key]
        for m in group:
            ends[m][members[m][1]] = end
            stream_free[m] = end
            running[m] -= 1
            settled[m] = max(settled[m], end)
            if not running[m] and m in in_wait:
                since = in_wait.pop(m)
                finish(m, since, max(since, settled[m]))

    def synced(rank: int, begun: float, t: float) -> None:
        """A SYNCED compute of `rank` (begun then) is done at t: it ends when the
        group's last member's is."""
        gid = ops[rank][pc[rank]][2]
        key = (gid, synced_seen[(rank, gid)])  # the rank's n-th synced compute in the group
        synced_seen[(rank, gid)] += 1
        members = computed[key]
        members[rank] = (begun, t)
        if len(members) == len(groups[gid]):
            release = max(done for _, done in members.values())
            del computed[key]
            for m, (start, _) in members.items():
                finish(m, start, release)

    share = sharing.start if sharing is not None else None  # a compute joins the cores

    def step(rank: int, t: float, due: float) -> None:
        """Start the rank's next ops at t; `due`: when the next compute ends (nothing
        here changes it until this rank starts a compute, and then it stops)."""
        row = ops[rank]
        while True:
            i = pc[rank]
            op = row[i]
            code = op[0]
            if code in (COMPUTE, SYNCED):
                if share is None:
                    (synced if code == SYNCED else finish)(rank, t, t + op[1] * slow[rank])
                else:
                    share(rank, op[1], t)
                return
            if code == ASYNC:
                starts[rank][i] = t
                order.append(rank)
                pc[rank] = i + 1
                launch(rank, op, i, t)  # its end is known once every member launched it
                if i + 1 == len(row):
                    return
                gap = gap_rows[rank][i] if gap_rows else 0.0
                if gap or due <= t:
                    push(ready, (t + gap, rank))
                    return
                continue
            if code == SEND:
                arrive = post(rank, op, t)
                end = arrive if op[5] is None else t + op[5]  # blocking, or its issue
            elif code in (RECV, SENDRECV):  # checked early: the loop's most frequent op
                if code == SENDRECV:
                    post(rank, op, t)
                    channel, reduce = op[5], op[6]
                else:
                    channel, reduce = op[1], op[2]
                box = mailbox.get(channel)
                if not box:
                    waiting[channel] = (rank, t)
                    return
                end = max(t, box.popleft()) + reduce * slow[rank]
            elif code == WAIT:
                end = t + op[1]
            elif code == DRAIN:
                if running[rank]:
                    in_wait[rank] = t
                    return
                end = max(t, settled[rank])
            elif code == UNTIL:
                end = max(t, ends[rank][i - op[2]] + op[1])
            else:  # COLLECTIVE
                collective(rank, op, t)
                return
            starts[rank][i] = t
            ends[rank][i] = end
            order.append(rank)
            pc[rank] = i + 1
            if i + 1 == len(row):
                return
            gap = gap_rows[rank][i] if gap_rows else 0.0
            if end != t or due <= t or gap:
                push(ready, (end + gap, rank))
                return
            # Ended the instant it started: the next op starts now.

    inf = math.inf
    if sharing is None:
        while ready:
            t, rank = pop(ready)
            step(rank, t, inf)
    else:
        advance, pop_ended = sharing.advance, sharing.pop_ended
        while True:
            compute_end = sharing.due  # an advance does not move it (CoreSharing)
            # Computes ending at the same instant as a rank becomes free end first:
            # the order does not change any rate, as no time passes in between.
            if ready and ready[0][0] < compute_end:
                t, rank = pop(ready)
                advance(t)
                step(rank, t, compute_end)
            elif compute_end < inf:
                for rank, begun in pop_ended():
                    # The rank goes on at once: the same instant, no rate changed since.
                    now = sharing.now
                    i = pc[rank]
                    if ops[rank][i][0] == SYNCED:  # it waits for the group's last
                        synced(rank, begun, now + (slow[rank] - 1.0) * (now - begun))
                        continue
                    starts[rank][i] = begun
                    order.append(rank)
                    pc[rank] = i + 1
                    gap = gap_rows[rank][i] if gap_rows else 0.0
                    if slow[rank] != 1.0:  # it sleeps off the rest, holding no core
                        end = now + (slow[rank] - 1.0) * (now - begun)
                        ends[rank][i] = end
                        if i + 1 < len(ops[rank]):
                            push(ready, (end + gap, rank))
                        continue
                    ends[rank][i] = now
                    if i + 1 < len(ops[rank]):
                        if gap:
                            push(ready, (now + gap, rank))
                        else:
                            step(rank, now, sharing.due)
            else:
                break
    unfinished = {key: {m: at for m, (at, _) in who.items()} for key, who in launches.items()}
    return Run(starts, ends, order, pc, registered, dict(arrivals), unfinished)
