"""The simulator: executes a Program on a virtual clock with a CostModel.

The second engine of docs/design.md's picture. It emits one Span per Action with the
same action ids the real engine uses, so a predicted timeline pairs with the
measured one action by action.

It is a discrete-event simulation with one global clock. Each rank starts its
next action at the instant its previous one ends (plus the dispatch gap below);
events (a rank becoming free, a compute finishing) are processed in time order,
earliest first.

Semantics (the same ones the real engine implements in runtime.engine.worker):
- compute: CostModel.compute_time is its base duration, the time it takes with
  a core to itself. A compute with the `io` effect (a checkpoint's write) waits on a
  device, not a core: it takes its duration whoever else computes. A compute with
  the `synced` effect and a `group` runs collectives inside it (FSDP2's forward): it
  ends on every member together, when the last member's compute has. When the
  model has a core count (`cores`), the computing ranks share those cores as
  processor sharing: at any instant, if k ranks are computing, each progresses at
  min(1, cores/k) of its base speed, and the rates change whenever a compute starts
  or ends anywhere. A static slow-down by world size / cores would be wrong wherever
  ranks idle: in a pipeline's warm-up only the first stage computes, at full speed,
  while in its steady state all stages compete for the cores. Ranks waiting on
  communication do not count as computing (calibration folds the CPU that loopback
  traffic burns into alpha and beta). Without a core count, computes run at base speed.
- a compute that starts right after its rank blocked (a recv, a ring step, a
  blocking collective, a wait, a disk write, an idle `until`) takes the cost
  model's wake-up seconds more (Corrections.wake): the core it runs on had idled
  (calibrated; 0 after a run, whose measured compute holds it).
- a rank starts its next action the cost model's dispatch gap after the previous
  one ended (Corrections.dispatch_gap, and after a barrier its exit lag): what its
  executor spends between two actions (0 unless a run measured it).
- a compute with the `until` effect, Until(back, seconds), computes nothing: the
  rank idles until `seconds` after the end of its action `back` places earlier (a
  server waiting for a request to arrive, on the clock its run started).
- send: blocking, like `send` (or `isend` then `wait`): the message occupies
  the directed link (src, dst) for alpha + S·beta, one message after another,
  and the sender is free when its message is delivered. It never waits for
  the receiver to post its recv (gloo and NCCL buffer the message). A send
  with the `nonblocking` effect is an `isend` whose wait comes later: the sender
  goes on after its issue (Corrections.send_issue, 0 unless a run measured it or
  a CPU lesson estimates it; no core taken, not slowed) and the message still
  takes the link as above (pipelines).
- messages pair in order per channel (src, dst, tag), the `tag` arg being 0
  unless a Program separates channels (see runtime.sim.program); all channels
  from src to dst share the one link.
- recv: completes when its message has arrived (plus gamma per byte when it
  reduces what it received).
- sendrecv: a ring step; posts its message (eager, on the link as above) and
  ends when the incoming one has arrived (then reduces it if asked).
- collective: a synchronisation of its group; it starts when the last member
  arrives and takes CostModel.collective_time. Each member's span runs from its
  own arrival, so waiting for a late rank shows up as time in the collective,
  as it does when measured.
- non-blocking collective (the `nonblocking` effect: a DDP bucket's all-reduce):
  the rank goes on at once; the collective starts when the last member has
  launched it and every member's communication stream is free (one after
  another, in launch order, as on one NCCL stream), and takes its time; its
  span runs from the rank's launch to its end, overlapping the rank's compute.
  A `wait` action ends when every non-blocking collective of the rank has.

Communication is costed the moment it is posted: a message's arrival time is
known when it is sent, so a waiting receiver's end is fixed then and there.
Only compute needs the global clock, because its speed depends on who else is
computing meanwhile.

When no rank can move and some are not finished, the Program is deadlocked:
DeadlockError names each stuck rank, its action and what it waits for.

How: each Action is compiled into an op (runtime.sim.ops: its seconds, its link
and channel) and runtime.sim.eventloop runs them; a lesson predicting at a
scale where building every Action is slow compiles its own ops and runs the
same loop. `simulate_lockstep` is the closed form for ranks that are all
alike (the same actions, costs and groups: data parallelism): they move in
lockstep, so one of them stands for all.

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.sim.corrections import ScaleKey
from runtime.sim.costmodel import CostModel
from runtime.sim.eventloop import CollectiveMismatch, Run, run_ops
from runtime.sim.ops import (
    BLOCKING,
    COMPUTING,
    Collective,
    Compute,
    Drain,
    Idle,
    Io,
    Launch,
    Op,
    Recv,
    Send,
    SendRecv,
    Synced,
)
from runtime.sim.program import Action, Program, ProgramError, span_for
from runtime.sim.trace import Span, Timeline

# The scale of a hand-made collective's steps (its sendrecvs), as a run timed them.
SENDRECV_SCALE = ScaleKey("sendrecv")


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


def simulate(program: Program, model: CostModel) -> Timeline:
    """Run `program` on a virtual clock; return the predicted Timeline."""
    ops, groups = compile_program(program, model)
    try:
        run = run_ops(ops, groups, model, series_gaps(program, model))
    except CollectiveMismatch as exc:
        heads = [program.ranks[r][i] for r, i in exc.heads]
        raise ProgramError(
            "collective mismatch in group "
            + ", ".join(f"rank {h.rank}: {h.kind} {h.bytes}B ({h.id})" for h in heads)
        ) from None
    stuck = run.stuck()
    if stuck:
        raise DeadlockError([_why_stuck(program, r, run) for r in stuck])
    if run.launched:  # launched by some members only, and never waited for
        key, who = next(iter(run.launched.items()))
        missing = sorted(set(groups[key[0]]) - set(who))
        raise DeadlockError(
            [
                StuckRank(r, "", f"a non-blocking collective rank(s) {missing} never launch")
                for r in sorted(who)
            ]  # fmt: skip
        )
    spans: list[Span] = []
    done = [0] * program.world_size
    for rank in run.order:  # in the order the actions ended, as they were simulated
        i = done[rank]
        done[rank] = i + 1
        spans.append(span_for(program.ranks[rank][i], run.starts[rank][i], run.ends[rank][i]))
    return Timeline(spans=spans)


def compile_program(
    program: Program, model: CostModel
) -> tuple[list[list[Op]], list[tuple[int, ...]]]:
    """Each rank's Actions as ops (runtime.sim.eventloop), and the collective groups."""
    compiler = Compiler(model)
    return [compiler.ops(actions) for actions in program.ranks], compiler.groups


def series_gaps(program: Program, model: CostModel) -> list[list[float]] | None:
    """The gap after each Action of each rank, where a series has its own (a run
    measured it: runtime.fit.refine.refine_dispatch), and after a barrier the rank's lag
    leaving it; None where every Action has the model's one dispatch gap, which
    runtime.sim.eventloop applies itself."""
    corrections = model.corrections
    if not corrections.per_action:
        return None
    return [[corrections.gap_after(a) for a in row] for row in program.ranks]


def blocks(action: Action) -> bool:
    """Whether its rank has blocked once `action` is done (it compiles to a BLOCKING op):
    for a closed form that walks Actions rather than ops (simulate_lockstep, a lumped
    prediction)."""
    if action.is_collective:
        return not action.nonblocking
    return (
        action.kind in ("recv", "sendrecv")
        or action.is_wait
        or action.effects.until is not None
        or action.effects.io
    )


class Compiler:
    """Actions into ops for one cost model; collective groups get ids as they come.
    A lesson that builds its ops without building every Action (a long pipeline)
    compiles one Action of each shape with it and repeats the op."""

    def __init__(self, model: CostModel) -> None:
        self.model = model
        self.groups: list[tuple[int, ...]] = []
        self._ids: dict[int, int] = {}  # id(group tuple) -> group id
        self._distinct: dict[tuple[int, ...], int] = {}
        self._seconds: dict[tuple[Any, ...], float] = {}
        self._wake = model.corrections.wake
        self._issue = model.corrections.send_issue or 0.0
        # Links (src, dst) and channels (src, dst, tag) as small ints: the event loop looks
        # one up at every send and receive, and a tuple would be hashed anew each time.
        self._keys: dict[tuple[int, ...], int] = {}

    def key(self, endpoints: tuple[int, ...]) -> int:
        return self._keys.setdefault(endpoints, len(self._keys))

    def group_id(self, group: tuple[int, ...]) -> int:
        # Hashing a 4096-rank group tuple for every action would make large
        # collectives quadratic; scenarios share one tuple object per group.
        gid = self._ids.get(id(group))
        if gid is None:
            gid = self._distinct.get(group)
            if gid is None:
                gid = self._distinct[group] = len(self.groups)
                self.groups.append(group)
            self._ids[id(group)] = gid
        return gid

    def ops(self, actions: Iterable[Action], after_wait: bool = False) -> list[Op]:
        """One rank's Actions in order as ops; a compute right after a blocking one
        (`after_wait`: the Action before these blocked) costs the model's wake-up more."""
        wake = self._wake
        out: list[Op] = []
        for a in actions:
            op = self.op(a)
            kind = type(op)
            if after_wait and wake and kind in COMPUTING:
                op = op._replace(seconds=op.seconds + wake)  # type: ignore[union-attr]
            after_wait = kind in BLOCKING
            out.append(op)
        return out

    def op(self, a: Action) -> Op:
        model, kind, rank = self.model, a.kind, a.rank
        if kind == "send" or kind == "sendrecv":
            alpha, beta = model.link(rank, a.dst)  # type: ignore[arg-type]
            tag = a.tag  # read from `args` by name: once
            link, out = self.key((rank, a.dst)), self.key((rank, a.dst, tag))
            if kind == "send":
                # A non-blocking send holds its sender while it issues (gloo copies
                # the message out on the sender's thread), as a run measured it.
                issue = self._issue if a.effects.nonblocking else None
                return Send(link, alpha, a.bytes * beta, out, issue)
            into = self.key((a.src, rank, tag))
            # A hand-made collective's steps, as a run timed them (refine_collectives).
            scale = model.collective_scale.get(SENDRECV_SCALE, 1.0)
            reduce = model.gamma * a.recv_bytes * scale if a.reduce else 0.0
            return SendRecv(link, alpha * scale, a.bytes * beta * scale, out, into, reduce)
        if kind == "recv":
            reduce = model.gamma * a.bytes if a.reduce else 0.0
            return Recv(self.key((a.src, rank, a.tag)), reduce)
        effects = a.effects
        if a.is_collective:
            gid = self.group_id(a.group or ())
            # Everything CostModel.collective_time reads: a series may have its own scale.
            key = (
                kind,
                a.bytes,
                a.sizes,
                a.algorithm,
                gid,
                a.series,
                a.nonblocking,
                effects.untimed,
            )
            seconds = self._seconds.get(key)
            if seconds is None:
                seconds = self._seconds[key] = model.collective_time(a)
            # What every member must agree on: each member's size where they differ.
            signature = (kind, a.bytes) if a.sizes is None else (kind, a.sizes)
            if a.nonblocking:
                return Launch(gid, seconds, signature)
            return Collective(gid, seconds, signature)
        if effects.until is not None:  # idles until a moment after an earlier action's end
            return Idle(float(effects.until.seconds), int(effects.until.back))
        if a.is_wait:  # until the rank's non-blocking collectives have ended
            return Drain()
        if effects.io:  # waits on a device (the disk), not on a core
            return Io(model.compute_time(a))
        if effects.synced and a.group:  # collectives inside it: it ends with its group's
            return Synced(model.compute_time(a), self.group_id(a.group), ("synced", kind))
        return Compute(model.compute_time(a))


def simulate_lockstep(
    actions: Sequence[Action], model: CostModel, copies: int, start: float = 0.0
) -> list[Span]:
    """The spans of one rank that stands for `copies` ranks all alike: the same
    actions with the same costs, every collective over all of them (data
    parallelism). They start together and stay in lockstep, so each action starts
    when the one before it ends: a compute takes its cost over the core share of
    `copies` ranks computing at once, a collective its formula (no member waits
    for another). What simulating all `copies` ranks gives, without listing them.
    The first action starts at `start`."""
    if model.slow:
        raise ValueError("a slowed rank is not like the others: simulate every rank")
    share = model.core_share(copies)
    wake = model.corrections.wake
    spans: list[Span] = []
    t, waited = start, False
    for action in actions:
        if action.is_p2p:
            raise ValueError(f"{action.id}: a lockstep rank has no peer to message")
        if action.nonblocking or action.is_wait:
            raise ValueError(f"{action.id}: overlapped communication: simulate every rank")
        if action.is_collective:
            end = t + model.collective_time(action)
        elif action.effects.io:
            end = t + model.compute_time(action)  # waits on the disk, shares no core
        else:
            end = t + (model.compute_time(action) + wake * waited) / share
        waited = blocks(action)
        spans.append(span_for(action, t, end))
        t = end + model.corrections.dispatch_gap(action.series)
    return spans


def _why_stuck(program: Program, rank: int, run: Run) -> StuckRank:
    action = program.ranks[rank][run.pc[rank]]
    if action.is_collective:
        key = run.registered.get(rank)
        here = set(run.arrivals.get(key, {})) if key else set()
        missing = sorted(set(action.group or ()) - here)
        return StuckRank(
            rank, action.id, f"{action.kind} with rank(s) {missing}, which never arrive"
        )
    if action.is_wait:
        return StuckRank(rank, action.id, "non-blocking collectives some rank never launches")
    if action.kind in ("recv", "sendrecv"):
        tag = action.tag
        channel = f" on tag {tag}" if tag else ""
        return StuckRank(
            rank, action.id, f"a message from rank {action.src}{channel} that is never sent"
        )
    return StuckRank(rank, action.id, "nothing (internal error)")
