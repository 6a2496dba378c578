"""Ranks run ahead of the global clock wherever nothing needs it: a large pipeline's fast loop.

Part of the simulator (docs/design.md's second engine), beside runtime.sim.eventloop,
whose EventLoop it extends. Communication is costed the moment it is posted: a
message's arrival is known when it is sent, a receive ends at the later of its start
and that arrival, a collective when its last member has arrived. So the times of every
op but a compute on shared cores do not depend on the order in which the ranks are
stepped; only such a compute needs the global clock, because its speed depends on who
else computes meanwhile (runtime.sim.coresharing).

`EagerLoop` therefore steps a rank through its ops on the rank's own clock until it
must wait (a message not sent yet, a group not complete) or, where ranks share cores,
until its next compute, which it queues at its start. Each op then costs no trip
through the event queue, where EventLoop queues the rank after every op that takes
time. The times are EventLoop's (with shared cores, up to rounding: the work clock is
credited in fewer, longer steps); what is not kept is the global order in which ops
ended (`Run.order` lists them as they were stepped), so runtime.sim.simulate, which
emits spans in that order, runs EventLoop. Non-blocking collectives and synced computes
are not taken: their outcome depends on the order in which groups complete.

Without dispatch gaps or slowed ranks (a prediction at scale has neither), `run` keeps
the work clock of the shared cores (runtime.sim.coresharing's arithmetic) in local
variables and does a pipeline slot's receive, compute and send inline, with no call per
op: the same steps in the same order, so the same floats as the generic path, which
tests/test_eager_loop.py checks against EventLoop on every lesson.

Pure: stdlib only.
"""

from __future__ import annotations

import heapq
import math

from runtime.sim.coresharing import TIE
from runtime.sim.costmodel import CostModel
from runtime.sim.eventloop import EventLoop
from runtime.sim.ops import Compute, Drain, Launch, Op, Recv, Run, Send, Synced, gc_paused

_ORDERED_ONLY = (Launch, Drain, Synced)


@gc_paused()
def run_ops_eagerly(
    ops: list[list[Op]],
    groups: list[tuple[int, ...]],
    model: CostModel,
    gaps: list[list[float]] | None = None,
) -> Run:
    """run_ops's times, each rank stepped ahead as far as it can go (module docstring)."""
    for row in ops:
        for op in row:
            if isinstance(op, _ORDERED_ONLY):
                raise ValueError(f"{type(op).__name__} needs the ordered loop (run_ops)")
    return EagerLoop(ops, groups, model, gaps).run()


class EagerLoop(EventLoop):
    def step(self, rank: int, t: float, due: float) -> None:
        """Start the rank's next ops at t, the global clock's instant, and go on along
        the rank's own clock until it waits; a compute on shared cores is queued at its
        start instead, unless that is now and no other compute is due now (computes due
        end first, as in EventLoop)."""
        row, pc, handlers, gaps = self.ops[rank], self.pc, self.handlers, self.gaps
        starts, ends, order, last = self.starts[rank], self.ends[rank], self.order, len(row) - 1
        shared, now = self.sharing is not None, t
        while True:
            i = pc[rank]
            op = row[i]
            if shared and type(op) is Compute and (t != now or due <= t):
                heapq.heappush(self.ready, (t, rank))
                return
            end = handlers[type(op)](self, rank, op, i, t)
            if end is None:  # it waits, or its compute runs on the shared cores
                return
            starts[i] = t
            ends[i] = end
            order.append(rank)
            pc[rank] = i + 1
            if i == last:
                return
            t = end + gaps[rank][i] if gaps else end  # type: ignore[operator]

    def run(self) -> Run:
        if self.gaps or any(factor != 1.0 for factor in self.slow):
            return super().run()  # the generic path: each op through its handler
        self._inline()
        left = {k: {m: at for m, (at, _) in who.items()} for k, who in self.launches.items()}
        done = (self.starts, self.ends, self.order, self.pc, self.registered)
        return Run(*done, dict(self.arrivals), left)

    def _inline(self) -> None:
        """The loop of `run` and `step`, and CoreSharing's clock, inline (module
        docstring): `go` is `step`, the rest EventLoop.run and CoreSharing's events."""
        ops, pc, ready, handlers = self.ops, self.pc, self.ready, self.handlers
        starts, ends, order, finish = self.starts, self.ends, self.order, self.finish
        mailbox, link_free, waiting = self.mailbox, self.link_free, self.waiting
        push, pop, inf = heapq.heappush, heapq.heappop, math.inf
        shared = self.sharing is not None
        rates = self.sharing.rates if self.sharing is not None else []
        jobs: list[tuple[float, int, float]] = []  # (tag, rank, start), CoreSharing.jobs
        now = work = 0.0  # CoreSharing's now and work_done
        rate, due = 1.0, inf

        def go(rank: int, t: float) -> None:
            nonlocal rate, due
            row, begun, ended, last = ops[rank], starts[rank], ends[rank], len(ops[rank]) - 1
            at = t  # the rank's own clock
            while True:
                i = pc[rank]
                op = row[i]
                kind = type(op)
                if kind is Compute and shared:
                    if at != t or due <= at:  # it starts on the global clock
                        push(ready, (at, rank))
                        return
                    push(jobs, (work + op.seconds, rank, at))  # CoreSharing.start
                    rate = rates[len(jobs)]
                    left = jobs[0][0] - work
                    due = now if left <= TIE * work else now + left / rate
                    return
                if kind is Compute:
                    end = at + op.seconds
                elif kind is Send:  # EventLoop.post and send (a tuple unpacks faster)
                    link, alpha, bytes_beta, channel, issue = op  # type: ignore[misc]
                    free = link_free.get(link, 0.0)
                    arrive = (at if at >= free else free) + alpha + bytes_beta
                    link_free[link] = arrive
                    blocked = waiting.pop(channel, None)
                    if blocked is None:
                        mailbox[channel].append(arrive)
                    else:
                        other, since = blocked
                        reduce = ops[other][pc[other]].reduce  # type: ignore[union-attr]
                        finish(other, since, (since if since >= arrive else arrive) + reduce)
                    end = arrive if issue is None else at + issue
                elif kind is Recv:  # EventLoop.recv
                    channel, reduce = op  # type: ignore[misc]
                    box = mailbox.get(channel)
                    if not box:
                        waiting[channel] = (rank, at)
                        return
                    arrived = box.popleft()
                    end = (at if at >= arrived else arrived) + reduce
                else:
                    end = handlers[kind](self, rank, op, i, at)  # type: ignore[assignment]
                    if end is None:
                        return
                begun[i] = at
                ended[i] = end
                order.append(rank)
                pc[rank] = i + 1
                if i == last:
                    return
                at = end

        while True:
            if ready and ready[0][0] < due:
                t, rank = pop(ready)
                if t > now:  # CoreSharing.advance
                    if jobs:
                        work += rate * (t - now)
                    now = t
                go(rank, t)
            elif due < inf:  # CoreSharing.pop_ended, then EventLoop.computes_ended
                tag = jobs[0][0]
                now, work = due, (work if work >= tag else tag)
                limit, done = work + TIE * work, []
                while jobs and jobs[0][0] <= limit:
                    _, rank, begun = pop(jobs)
                    done.append((rank, begun))
                rate = rates[len(jobs)]
                left = jobs[0][0] - work if jobs else inf
                due = inf if not jobs else now if left <= TIE * work else now + left / rate
                for rank, begun in done:
                    i = pc[rank]
                    starts[rank][i], ends[rank][i] = begun, now
                    order.append(rank)
                    pc[rank] = i + 1
                    if i + 1 < len(ops[rank]):
                        go(rank, now)
            else:
                return
