"""Rank side of calibration: time ring steps and a reduction, all ranks at once.

The `calibrate` job of runtime.engine.worker; runtime.fit.calibration fits the numbers.
Then the compute half (runtime.fit.calibration_compute: what a rank's compute costs),
and last the lessons' own probes, handed in as the job's params
(runtime.fit.calibration_probes: each a function named by its entry, run in turn).
The ring steps are the very Actions and executor the hand-made ring uses
(runtime.engine.collectives + runtime.engine.comm, receives pre-posted, the first one before
the barrier that starts each repetition), run as two all-gathers (the steps of
an all-reduce, but no reduction mixes into the transfer time): what is fitted is
what a step of the lesson costs on this machine at this world size.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import functools
import importlib
import time
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine import collectives
from runtime.engine.comm import Comm
from runtime.engine.models import Block, GPTConfig
from runtime.engine.worker import RankContext
from runtime.fit import calibration_compute as timing
from runtime.fit.calibration import REPS
from runtime.fit.calibration_busy import BUSY_BYTES, BUSY_REPS
from runtime.fit.calibration_probes import ProbeJob
from runtime.fit.link_fit import REDUCE_BYTES, SIZES
from runtime.sim.program import Action


def run_rank(ctx: RankContext[tuple[ProbeJob, ...] | None]) -> dict[str, Any]:
    n, rank = ctx.world_size, ctx.rank
    comm = Comm()
    return {
        **_links(ctx, comm),
        **(_busy_timings(ctx, comm) if n > 1 else {}),
        "blocks": timing.blocks(),
        "adam": timing.adam(),
        "op_s": timing.op_seconds(),
        "wake": timing.wake(n),
        "probes": run_probes(ctx.params or (), rank, n),
    }


def run_links(ctx: RankContext[None]) -> dict[str, Any]:
    """The link's half alone (ring steps and a reduction): what `lab nodes -- calibrate`
    needs inside a node, where the compute is timed by its run across the nodes."""
    return _links(ctx, Comm())


def _links(ctx: RankContext[Any], comm: Comm) -> dict[str, Any]:
    """Seconds of ring steps per size, and of a reduction (runtime.fit.link_fit.fit_link)."""
    n, rank = ctx.world_size, ctx.rank
    group = list(range(n))
    timings: dict[str, list[float]] = {}
    # A barrier Action first, as in the lesson's iterations: the first step's receive is
    # posted before it (runtime.engine.comm), and the clock starts after it.
    barrier = Action(id="barrier", rank=rank, kind="barrier", group=tuple(group))
    rings = []
    # One rank alone sends nothing: no link to time (runtime.fit.calibration.fit says so).
    for size in SIZES if n > 1 else ():
        # Each step moves one chunk of `size` bytes to the right neighbour; two
        # all-gathers back to back make 2(n-1) steps, as many as the lesson's all-reduce.
        buffer = torch.ones(size // 4 * n, dtype=torch.float32)
        steps = [
            *collectives.ring_all_gather(group, buffer.numel(), 4, prefix="a.")[rank],
            *collectives.ring_all_gather(group, buffer.numel(), 4, prefix="b.")[rank],
        ]
        for _ in range(2):
            comm.run([barrier, *steps], buffer)
        rings.append((buffer, steps, timings.setdefault(str(size), [])))
    # The sizes take turns, repetition by repetition: this machine's pace moves by the
    # second, and timed one size after the other, a slow spell could catch one size
    # alone (a small size then reads slower per step than a larger one).
    for _ in range(REPS):
        for buffer, steps, samples in rings:
            comm.run([barrier, *steps], buffer, runner=functools.partial(_timed, samples))
    a = torch.ones(REDUCE_BYTES // 4, dtype=torch.float32)
    b = torch.ones_like(a)
    a.add_(b)
    reduce_s = []
    for _ in range(REPS):
        dist.barrier()
        start = time.perf_counter()
        a.add_(b)
        reduce_s.append(time.perf_counter() - start)
    return {"sendrecv": timings, "reduce_s": reduce_s}


def run_probes(jobs: tuple[ProbeJob, ...], rank: int, world_size: int) -> dict[str, Any]:
    """Each lesson's probes, in the order handed (every rank the same, so a probe may
    use collectives): lesson -> probe name -> what the function returned."""
    out: dict[str, dict[str, Any]] = {}
    for lesson, name, entry in jobs:
        module, _, function = entry.partition(":")
        probe = getattr(importlib.import_module(module), function)
        out.setdefault(lesson, {})[name] = probe(rank, world_size)
    return out


def _busy_timings(ctx: RankContext[None], comm: Comm) -> dict[str, list[float]]:
    """Seconds of each collective timed between computes (_busy_collective), as
    runtime.fit.calibration_busy reads them: the hand-made ring all-reduce and its
    reduce-scatter half, torch's all-reduce and torch's all-gather."""
    halves: list[float] = []
    return {
        "busy_all_reduce": _busy_collective(ctx, comm, halves=halves),
        "busy_reduce_scatter": halves,
        "busy_builtin_all_reduce": _busy_collective(ctx, comm, builtin="all_reduce"),
        "busy_builtin_all_gather": _busy_collective(ctx, comm, builtin="all_gather"),
    }


def _busy_collective(
    ctx: RankContext[None],
    comm: Comm,
    builtin: str | None = None,
    halves: list[float] | None = None,
) -> list[float]:
    """Seconds of a collective of BUSY_BYTES between computes, as a training step
    interleaves them: every rank runs a block's forward, then joins the collective. A rank
    descheduled by the others' compute holds up every step of the ring; an all-reduce
    timed alone (above) never sees that, a lesson's always does. The hand-made ring (the
    lessons' own), or with `builtin` torch's: "all_reduce" (`dist.all_reduce`, a TP
    layer's) or "all_gather" (`dist.all_gather` of the same bytes in all, gathered from
    every rank's equal part: failure-resume's gradients).
    `halves` (hand-made only): gets each repetition's reduce-scatter half, read as the
    ring turns to its all-gather, so the all-reduce runs exactly as without it."""
    group = list(range(ctx.world_size))
    numel = BUSY_BYTES // 4
    buffer = torch.ones(numel, dtype=torch.float32)
    each = numel // ctx.world_size  # torch's all_gather wants equal parts
    parts = list(buffer[: each * ctx.world_size].view(ctx.world_size, each).unbind(0))
    mine = parts[ctx.rank].clone()
    steps = collectives.ring_all_reduce(group, numel, 4)[ctx.rank]
    block = Block(GPTConfig(vocab=64, seq=64, hidden=64, heads=4, layers=1))
    x = torch.randn(8, 64, 64)
    samples: list[float] = []
    turn = [0.0]  # when this repetition's ring turned to its all-gather

    def runner(actions: list[Action], handler: Any) -> None:
        for action in actions:
            if action.phase == "all-gather" and not turn[0]:
                turn[0] = time.perf_counter()
            handler(action)

    dist.barrier()
    for rep in range(BUSY_REPS + 2):
        with torch.no_grad():
            block(x)
        turn[0] = 0.0
        start = time.perf_counter()
        if builtin == "all_reduce":
            dist.all_reduce(buffer)
        elif builtin == "all_gather":
            dist.all_gather(parts, mine)
        else:
            comm.run(steps, buffer, runner=runner)
        if rep >= 2:  # two warm-ups
            samples.append(time.perf_counter() - start)
            if halves is not None:
                halves.append(turn[0] - start)
    return samples


def _timed(samples: list[list[float]], actions: list[Action], handler: Any) -> None:
    """Run a barrier then a ring's steps, appending [start, end, steps] to `samples`: the
    clock starts as the barrier releases. Absolute times (one monotonic clock for every
    process of this machine): the fit spans the first rank's start to the last one's
    end, as the lesson times an iteration."""
    handler(actions[0])
    start = time.perf_counter()
    for action in actions[1:]:
        handler(action)
    samples.append([start, time.perf_counter(), len(actions) - 1])
