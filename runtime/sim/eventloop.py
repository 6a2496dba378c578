"""The simulator's event loop over compiled ops: what runtime.sim.simulate runs a Program with.

Part of docs/design.md's second engine. runtime.sim.simulate compiles each Action into
an op (runtime.sim.ops: a typed record of the numbers the loop needs) and runs them
here; a lesson that predicts at a scale where building every Action would be slow
compiles its ops from its schedule and runs the same loop. Each op type has its own
handler (`EventLoop.handlers`): it starts its rank's op at t and returns when the op
ends, or None when the rank waits (for a message, its group, the cores) and someone
else ends the op later (`finish`).

An op that ends the instant it starts (a receive whose message is there, a send issued in
no time) is followed at once by the rank's next op, without a trip through the event
queue, unless a compute is due at that instant (computes due first end first, always).

A rank is free for its next op the model's dispatch gap after an op ends (0 unless a
run measured it: Corrections.dispatch), or the gap `gaps[rank][i]` the caller gives
after each op where series differ in it; an op that ends at the very instant it
starts then waits for it too.

A slowed rank (CostModel.slow, the `slow` fault) computes at its shared speed, then
stays busy (factor − 1) times the compute's duration without holding a core, as the
real rank sleeps; its reductions of received data take factor times as long.

Pure: stdlib only.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict, deque
from collections.abc import Callable, Hashable

from runtime.sim.coresharing import CoreSharing
from runtime.sim.costmodel import CostModel
from runtime.sim.ops import (
    Collective,
    CollectiveMismatch,
    Compute,
    Drain,
    Idle,
    Io,
    Launch,
    Op,
    Recv,
    Run,
    Send,
    SendRecv,
    Synced,
    gc_paused,
)

Key = tuple[int, int]  # a collective instance: (group id, the k-th of its group)

# A handler: (the loop, rank, op, its index, t) -> the op's end; None: the rank waits and
# someone ends the op later; WENT_ON: the rank went on at once while the op goes on (a
# non-blocking collective's launch; its end is written when the collective ends).
Handler = Callable[["EventLoop", int, Op, int, float], object]
WENT_ON = object()
_push = heapq.heappush


@gc_paused()
def run_ops(
    ops: list[list[Op]],
    groups: list[tuple[int, ...]],
    model: CostModel,
    gaps: list[list[float]] | None = None,
) -> Run:
    """Run each rank's ops on one virtual clock (runtime.sim.simulate's semantics).
    `groups[group_id]`: the members of each collective group, in order; `gaps`: the
    seconds after each op of each rank before its next (the model's dispatch gap if None)."""
    return EventLoop(ops, groups, model, gaps).run()


class EventLoop:
    """The state of one run: the ranks' progress, the links and mailboxes, the groups
    waiting to complete; one handler per op type."""

    def __init__(
        self,
        ops: list[list[Op]],
        groups: list[tuple[int, ...]],
        model: CostModel,
        gaps: list[list[float]] | None,
    ) -> None:
        n = len(ops)
        self.ops, self.groups = ops, groups
        self.pc = [0] * n
        self.starts = [[0.0] * len(row) for row in ops]
        self.ends = [[0.0] * len(row) for row in ops]
        self.order: list[int] = []
        # When each rank is free to start its next op: (time, rank). A rank has at most
        # one entry, and ties go to the lower rank, so runs are deterministic.
        self.ready = [(0.0, r) for r in range(n) if ops[r]]
        heapq.heapify(self.ready)
        cores = model.cores is not None and model.cores > 0
        self.sharing = CoreSharing(model, n) if cores else None
        self.slow = model.slow_factors(n) or [1.0] * n  # each rank's compute factor
        # Messages: channel -> arrivals; link -> when free; channel -> (rank, since) blocked.
        self.mailbox: defaultdict[Hashable, deque[float]] = defaultdict(deque)
        self.link_free: dict[Hashable, float] = {}
        self.waiting: dict[Hashable, tuple[int, float]] = {}
        # Collectives: each rank's count per group, who arrived when, who waits in which.
        self.sequence: defaultdict[tuple[int, int], int] = defaultdict(int)
        self.arrivals: defaultdict[Key, dict[int, float]] = defaultdict(dict)
        self.registered: dict[int, Key] = {}
        # Non-blocking collectives: per rank, when its stream is free, how many still run
        # and when the last ended; the ranks in a Drain (since); per launched collective,
        # each member's (launch time, op index).
        self.stream_free = [0.0] * n
        self.running = [0] * n
        self.settled = [0.0] * n
        self.in_wait: dict[int, float] = {}
        self.launches: defaultdict[Key, dict[int, tuple[float, int]]] = defaultdict(dict)
        # Per Synced compute, each member's (start, end of its own compute).
        self.computed: defaultdict[Key, dict[int, tuple[float, float]]] = defaultdict(dict)
        self.synced_seen: defaultdict[tuple[int, int], int] = defaultdict(int)
        # The seconds after each op before the rank's next (None: no gaps at all).
        uniform = model.corrections.dispatch
        self.gaps = gaps if gaps is not None or not uniform else [[uniform] * len(r) for r in ops]
        # The handler of each op type (functions, not bound methods: no cycle to collect).
        cls = EventLoop
        alone = self.sharing is None  # each compute with a core to itself
        self.handlers: dict[type, Handler] = {
            Compute: cls.compute_alone if alone else cls.compute_shared,
            Synced: cls.synced_alone if alone else cls.compute_shared,
            Io: cls.io,
            Send: cls.send,
            Recv: cls.recv,
            SendRecv: cls.sendrecv,
            Collective: cls.collective,
            Launch: cls.launch,
            Drain: cls.drain,
            Idle: cls.idle,
        }  # type: ignore[dict-item]

    # -- the loop ---------------------------------------------------------------------
    def run(self) -> Run:
        ready, pop, sharing = self.ready, heapq.heappop, self.sharing
        if sharing is None:
            step, inf = self.step, math.inf
            while ready:
                t, rank = pop(ready)
                step(rank, t, inf)
        else:
            while True:
                compute_end = sharing.due  # an advance does not move it (CoreSharing)
                # Computes ending at the same instant as a rank becomes free end first:
                # the order does not change any rate, as no time passes in between.
                if ready and ready[0][0] < compute_end:
                    t, rank = pop(ready)
                    sharing.advance(t)
                    self.step(rank, t, compute_end)
                elif compute_end < math.inf:
                    self.computes_ended(sharing)
                else:
                    break
        left = {k: {m: at for m, (at, _) in who.items()} for k, who in self.launches.items()}
        done = (self.starts, self.ends, self.order, self.pc, self.registered)
        return Run(*done, dict(self.arrivals), left)

    def step(self, rank: int, t: float, due: float) -> None:
        """Start the rank's next ops at t; `due`: when the next compute ends (nothing
        here changes it until this rank starts a compute, and then it stops)."""
        row, pc, handlers, gaps = self.ops[rank], self.pc, self.handlers, self.gaps
        starts, ends, order, last = self.starts[rank], self.ends[rank], self.order, len(row) - 1
        while True:
            i = pc[rank]
            op = row[i]
            end = handlers[type(op)](self, rank, op, i, t)
            if end is None:
                return
            if end is WENT_ON:
                end = t
            else:
                starts[i] = t
                ends[i] = end
                order.append(rank)
                pc[rank] = i + 1
            if i == last:
                return
            gap = gaps[rank][i] if gaps else 0.0
            if end != t or due <= t or gap:
                _push(self.ready, (end + gap, rank))  # type: ignore[operator]
                return
            # Ended the instant it started: the next op starts now.

    def finish(self, rank: int, start: float, end: float) -> None:
        """The rank's current op, which waited, ran from start to end."""
        pc = self.pc
        i = pc[rank]
        self.starts[rank][i] = start
        self.ends[rank][i] = end
        self.order.append(rank)
        pc[rank] = i + 1
        if i + 1 < len(self.ops[rank]):
            gaps = self.gaps
            _push(self.ready, (end + gaps[rank][i] if gaps else end, rank))

    def computes_ended(self, sharing: CoreSharing) -> None:
        """The computes that end next on the shared cores; their ranks go on at once (the
        same instant, no rate changed since)."""
        ops, pc, slow, gaps = self.ops, self.pc, self.slow, self.gaps
        for rank, begun in sharing.pop_ended():
            now = sharing.now
            i = pc[rank]
            if type(ops[rank][i]) is Synced:  # it waits for the group's last
                self.synced_done(rank, begun, now + (slow[rank] - 1.0) * (now - begun))
                continue
            self.starts[rank][i] = begun
            self.order.append(rank)
            pc[rank] = i + 1
            gap = gaps[rank][i] if gaps else 0.0
            if slow[rank] != 1.0:  # it sleeps off the rest, holding no core
                end = now + (slow[rank] - 1.0) * (now - begun)
                self.ends[rank][i] = end
                if i + 1 < len(ops[rank]):
                    _push(self.ready, (end + gap, rank))
                continue
            self.ends[rank][i] = now
            if i + 1 < len(ops[rank]):
                if gap:
                    _push(self.ready, (now + gap, rank))
                else:
                    self.step(rank, now, sharing.due)

    # -- one handler per op type (Handler) -------------------------------------------
    def compute_alone(self, rank: int, op: Compute, i: int, t: float) -> float | None:
        end = t + op.seconds * self.slow[rank]
        if end != t:
            return end  # `step` queues the rank at its end, as `finish` does
        self.finish(rank, t, end)  # through the queue all the same: computes due end first
        return None

    def compute_shared(self, rank: int, op: Compute | Synced, i: int, t: float) -> None:
        self.sharing.start(rank, op.seconds, t)  # type: ignore[union-attr]

    def synced_alone(self, rank: int, op: Synced, i: int, t: float) -> None:
        self.synced_done(rank, t, t + op.seconds * self.slow[rank])

    def synced_done(self, rank: int, begun: float, t: float) -> None:
        """The rank's Synced compute (begun then) is done at t: it ends when the group's
        last member's is."""
        gid = self.ops[rank][self.pc[rank]].group  # type: ignore[union-attr]
        key = (gid, self.synced_seen[(rank, gid)])  # the rank's n-th in the group
        self.synced_seen[(rank, gid)] += 1
        members = self.computed[key]
        members[rank] = (begun, t)
        if len(members) == len(self.groups[gid]):
            release = max(done for _, done in members.values())
            del self.computed[key]
            for m, (start, _) in members.items():
                self.finish(m, start, release)

    def io(self, rank: int, op: Io, i: int, t: float) -> float:
        return t + op.seconds

    def post(self, op: Send | SendRecv, channel: Hashable, t: float) -> float:
        """Put the op's message on its link; returns its arrival. Only its source posts on
        a link, in program order, so a link's queue is in program order however the
        events of other ranks interleave."""
        leave = max(t, self.link_free.get(op.link, 0.0))
        arrive = leave + op.alpha + op.bytes_beta
        self.link_free[op.link] = arrive
        blocked = self.waiting.pop(channel, None)
        if blocked is None:
            self.mailbox[channel].append(arrive)
        else:
            other, since = blocked
            head: Recv | SendRecv = self.ops[other][self.pc[other]]  # type: ignore[assignment]
            self.finish(other, since, max(since, arrive) + head.reduce * self.slow[other])
        return arrive

    def send(self, rank: int, op: Send, i: int, t: float) -> float:
        arrive = self.post(op, op.channel, t)
        return arrive if op.issue is None else t + op.issue  # blocking, or its issue

    def recv(self, rank: int, op: Recv, i: int, t: float) -> float | None:
        """Its message's arrival (then reduced), or None: the rank waits for it (post)."""
        box = self.mailbox.get(op.channel)
        if not box:
            self.waiting[op.channel] = (rank, t)
            return None
        return max(t, box.popleft()) + op.reduce * self.slow[rank]

    def sendrecv(self, rank: int, op: SendRecv, i: int, t: float) -> float | None:
        self.post(op, op.out_channel, t)
        box = self.mailbox.get(op.in_channel)
        if not box:
            self.waiting[op.in_channel] = (rank, t)
            return None
        return max(t, box.popleft()) + op.reduce * self.slow[rank]

    def drain(self, rank: int, op: Drain, i: int, t: float) -> float | None:
        if self.running[rank]:
            self.in_wait[rank] = t
            return None
        return max(t, self.settled[rank])

    def idle(self, rank: int, op: Idle, i: int, t: float) -> float:
        return max(t, self.ends[rank][i - op.back] + op.seconds)

    def collective(self, rank: int, op: Collective, i: int, t: float) -> None:
        gid = op.group
        key = (gid, self.sequence[(rank, gid)])
        self.sequence[(rank, gid)] += 1
        self.registered[rank] = key
        members = self.arrivals[key]
        members[rank] = t
        group = self.groups[gid]
        if len(members) < len(group):
            return
        ops, pc = self.ops, self.pc
        if any(ops[m][pc[m]].signature != op.signature for m in group):  # type: ignore[union-attr]
            raise CollectiveMismatch([(m, pc[m]) for m in group])
        end = max(members.values()) + op.seconds
        del self.arrivals[key]
        for m in group:
            del self.registered[m]
            self.finish(m, members[m], end)

    def launch(self, rank: int, op: Launch, i: int, t: float) -> object:
        self.starts[rank][i] = t
        self.order.append(rank)
        self.pc[rank] = i + 1
        gid = op.group
        key = (gid, self.sequence[(rank, gid)])
        self.sequence[(rank, gid)] += 1
        members = self.launches[key]
        members[rank] = (t, i)
        self.running[rank] += 1
        group = self.groups[gid]
        if len(members) < len(group):
            return WENT_ON  # its end is known once every member launched it
        ops = self.ops
        if any(ops[m][members[m][1]].signature != op.signature for m in group):  # type: ignore[union-attr]
            raise CollectiveMismatch([(m, members[m][1]) for m in group])
        begin = max(max(at for at, _ in members.values()), max(self.stream_free[m] for m in group))
        end = begin + op.seconds
        del self.launches[key]
        for m in group:
            self.ends[m][members[m][1]] = end
            self.stream_free[m] = end
            self.running[m] -= 1
            self.settled[m] = max(self.settled[m], end)
            if not self.running[m] and m in self.in_wait:
                since = self.in_wait.pop(m)
                self.finish(m, since, max(since, self.settled[m]))
        return WENT_ON
