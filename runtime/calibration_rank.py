"""Rank side of calibration: time ring steps and a reduction, all ranks at once.

The `calibrate` job of runtime.worker; runtime.calibration fits the numbers.
Then the compute half (runtime.compute): a MiniGPT block's forward and backward
at the shapes the lessons use, an Adam step (per element and per tensor), one eager operator, FSDP2's and tensor parallelism's
overheads, and (rank 0) a checkpoint-sized fsync'ed write, all in CPU seconds
with every rank busy at once.
The ring steps are the very Actions and executor the hand-made ring uses
(runtime.collectives + runtime.comm, receives pre-posted, the first one before
the barrier that starts each repetition), run as two all-gathers (the steps of
an all-reduce, but no reduction mixes into the transfer time): what is fitted is
what a step of the lesson costs on this machine at this world size.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import functools
import os
import statistics
import tempfile
import time
from typing import Any

import torch
import torch.distributed as dist

from runtime import collectives
from runtime.calibration import (
    ADAM_LARGE,
    ADAM_SMALL,
    ADAM_TENSORS,
    BLOCK_ROUNDS,
    BLOCK_SHAPES,
    BUSY_BYTES,
    BUSY_REPS,
    DISK_BYTES,
    LIVE_GRAPHS,
    OP_REPS,
    PARALLEL_SHAPE,
    REDUCE_BYTES,
    REPS,
    SHARDED_SHAPE,
    SIZES,
)
from runtime.comm import Comm
from runtime.compute import BLOCK_FORWARD_OPS
from runtime.models import Block, GPTConfig, MiniGPT, batch
from runtime.program import Action
from runtime.rundirs import runs_root
from runtime.worker import RankContext


def run_rank(ctx: RankContext[None]) -> dict[str, Any]:
    n, rank = ctx.world_size, ctx.rank
    group = list(range(n))
    comm = Comm()
    timings: dict[str, list[float]] = {}
    # A barrier Action first, as in the lesson's iterations: the first step's receive is
    # posted before it (runtime.comm), and the clock starts after it.
    barrier = Action(id="barrier", rank=rank, kind="barrier", group=tuple(group))
    rings = []
    # One rank alone sends nothing: no link to time (runtime.calibration.fit says so).
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
    # alone (on 2 ranks, 64 KiB at 1.68 ms a step beside 256 KiB at 0.27 ms).
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
    return {
        "sendrecv": timings,
        "reduce_s": reduce_s,
        "busy_all_reduce": _busy_all_reduce(ctx, comm) if n > 1 else [],
        "busy_builtin_all_reduce": _busy_all_reduce(ctx, comm, builtin=True) if n > 1 else [],
        "blocks": _blocks(),
        "adam": _adam(),
        "op_s": _op_seconds(),
        "disk_bytes_per_s": _disk() if rank == 0 else None,
        "sharded": _sharded(rank),
        # An MLP splits evenly only over a world size that divides its 4h columns.
        "parallelized": _parallelized() if n > 1 and 4 * PARALLEL_SHAPE[0] % n == 0 else None,
    }


def _busy_all_reduce(ctx: RankContext[None], comm: Comm, builtin: bool = False) -> list[float]:
    """Seconds of ring all-reduces of BUSY_BYTES between computes, as a training step
    interleaves them: every rank runs a block's forward, then joins the all-reduce. A rank
    descheduled by the others' compute holds up every step of the ring; an all-reduce
    timed alone (above) never sees that, a lesson's always does. The hand-made ring (the
    lessons' own), or with `builtin` torch's (`dist.all_reduce`, a TP layer's)."""
    group = list(range(ctx.world_size))
    numel = BUSY_BYTES // 4
    buffer = torch.ones(numel, dtype=torch.float32)
    steps = collectives.ring_all_reduce(group, numel, 4)[ctx.rank]
    block = Block(GPTConfig(vocab=64, seq=64, hidden=64, heads=4, layers=1))
    x = torch.randn(8, 64, 64)
    samples = []
    dist.barrier()
    for rep in range(BUSY_REPS + 2):
        with torch.no_grad():
            block(x)
        start = time.perf_counter()
        if builtin:
            dist.all_reduce(buffer)
        else:
            comm.run(steps, buffer)
        if rep >= 2:  # two warm-ups
            samples.append(time.perf_counter() - start)
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


def _cpu_seconds(fn: Any, reps: int = 5) -> float:
    """Median CPU seconds of `fn` (after one warm-up): what one core spends on it."""
    fn()
    samples = []
    for _ in range(reps):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return statistics.median(samples)


def _blocks() -> list[list[float]]:
    """[hidden, tokens, seq, forward s, backward s] of one block, per shape, timed as a
    training step runs it: each forward on a new input, its activations kept until its
    backward, LIVE_GRAPHS of them alive at once (as a pipeline stage holds its
    microbatches'). Timed alone, a forward on the same input again and again ran up to
    a third faster than on fresh inputs with graphs alive (hidden 64, 2048 tokens); with
    every rank busy at once the two came within a few percent here, but a lesson never
    runs the first way. Every rank times the same shape at the same time (a barrier
    before each): a rank timing alone while the others are elsewhere shares no cache
    with them, and its CPU seconds came out up to 30% fewer than a run's, from one
    calibration to the next."""
    out = []
    for hidden, tokens, seq in BLOCK_SHAPES:
        block = Block(GPTConfig(vocab=64, seq=seq, hidden=hidden, heads=4, layers=1))
        forward: list[float] = []
        backward: list[float] = []
        dist.barrier()
        for rep in range(BLOCK_ROUNDS + 1):  # the first round warms up
            inputs = [
                torch.randn(tokens // seq, seq, hidden, requires_grad=True)
                for _ in range(LIVE_GRAPHS)
            ]
            outputs = []
            for x in inputs:
                start = time.process_time()
                outputs.append(block(x).sum())
                forward.append(time.process_time() - start)
            for y in outputs:
                start = time.process_time()
                y.backward()
                backward.append(time.process_time() - start)
            if rep == 0:
                forward.clear()
                backward.clear()
        out.append([hidden, tokens, seq, statistics.median(forward), statistics.median(backward)])
    return out


def _sharded(rank: int) -> list[float]:
    """[tensors, forward, backward, Adam under FSDP2, forward, backward, Adam plain, the
    first FSDP2 step's Adam beyond a later one's]:
    CPU seconds of one step's phases of the same MiniGPT, each block, the embedding and
    the head one FSDP unit resharding after forward (as the zero lesson's fsdp2 stage),
    every rank at once; medians of REPS after the first step, timed apart (DTensor's
    first-call caches are a once-per-process cost)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    layers, hidden, seq, vocab, sequences = SHARDED_SHAPE
    cfg = GPTConfig(vocab=vocab, seq=seq, hidden=hidden, heads=4, layers=layers)
    inputs, targets = batch(cfg, sequences, seed=1 + rank)
    share = min(1.0, (os.cpu_count() or 1) / dist.get_world_size())
    out: list[float] = []
    for sharded in (True, False):
        model = MiniGPT(cfg)
        if sharded:
            mesh = init_device_mesh("cpu", (dist.get_world_size(),))
            for unit in (model.embedding, *model.blocks, model.head):
                fully_shard(unit, mesh=mesh, reshard_after_forward=True)
            fully_shard(model, mesh=mesh, reshard_after_forward=True)
        # Fused, as the zero lesson's fsdp2 stage steps it (one op over every DTensor).
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
        phases: list[list[float]] = [[], [], []]
        for rep in range(REPS + 1):
            dist.barrier()
            optimizer.zero_grad(set_to_none=True)
            times = [(time.process_time(), time.perf_counter())]
            loss = model(inputs, targets)
            times.append((time.process_time(), time.perf_counter()))
            loss.backward()
            times.append((time.process_time(), time.perf_counter()))
            optimizer.step()
            times.append((time.process_time(), time.perf_counter()))
            if rep == 0:
                first_step = [times[i + 1][0] - times[i][0] for i in range(3)]
            for i in range(3 * (rep > 0)):
                cpu = times[i + 1][0] - times[i][0]
                if sharded and i < 2:
                    # As the zero lesson times FSDP2: its forward and backward wait in
                    # their collectives, the wall time at this rank's share of the cores.
                    cpu = max(cpu, (times[i + 1][1] - times[i][1]) * share)
                phases[i].append(cpu)
        out += [statistics.median(p) for p in phases]
        if sharded:
            first_adam = first_step[2]
    # The first step's Adam beyond a later one's: DTensor's first calls in this process.
    return [float(len(list(MiniGPT(cfg).parameters()))), *out, first_adam - out[2]]


def _parallelized() -> list[float]:
    """[forward, backward under torch's tensor parallelism, forward, backward of the same
    rank's shard as plain Linears]: CPU seconds of an MLP (Linear h->4h, GELU, Linear
    4h->h) under ColwiseParallel + RowwiseParallel over every rank, against the local
    compute it does; medians of REPS after a warm-up. The difference, over its two
    modules, is DTensor's dispatch per parallelized module (ComputeRates.parallel_*)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    hidden, n = PARALLEL_SHAPE[0], dist.get_world_size()
    x = torch.randn(*PARALLEL_SHAPE[1:], hidden)

    def mlp(width: int) -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(hidden, width), torch.nn.GELU(), torch.nn.Linear(width, hidden)
        )

    tp = parallelize_module(
        mlp(4 * hidden),
        init_device_mesh("cpu", (n,)),
        {"0": ColwiseParallel(), "2": RowwiseParallel()},
    )
    out: list[float] = []
    for model in (tp, mlp(4 * hidden // n)):
        forward, backward = [], []
        for rep in range(REPS + 1):
            dist.barrier()
            start = time.process_time()
            y = model(x)
            middle = time.process_time()
            y.sum().backward()
            if rep:
                forward.append(middle - start)
                backward.append(time.process_time() - middle)
        out += [statistics.median(forward), statistics.median(backward)]
    return out


def _op_seconds() -> float:
    """CPU seconds of one eager operator outside autograd: a one-token block forward
    under no_grad (its FLOPs next to nothing) over the BLOCK_FORWARD_OPS operators it
    dispatches, as a server's decode step runs hundreds of them."""
    block = Block(GPTConfig(vocab=64, seq=16, hidden=32, heads=4, layers=1))
    x = torch.randn(1, 1, 32)
    with torch.no_grad():
        for _ in range(20):  # warm-up: first calls fill torch's dispatch caches
            block(x)
        return _cpu_seconds(lambda: block(x), reps=OP_REPS) / BLOCK_FORWARD_OPS


def _adam() -> list[float]:
    """CPU seconds of one Adam step (torch's default on a CPU: a loop over the tensors)
    over one large tensor, then over many small ones: runtime.calibration.fit_adam
    splits them into a cost per element and one per tensor."""
    return [_adam_seconds([ADAM_LARGE]), _adam_seconds([ADAM_SMALL] * ADAM_TENSORS)]


def _adam_seconds(sizes: list[int]) -> float:
    params = [torch.nn.Parameter(torch.randn(n)) for n in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    return _cpu_seconds(torch.optim.Adam(params, lr=1e-3).step, reps=REPS)


def _disk() -> float:
    """Bytes per second of a checkpoint-like write: write, fsync, close, rename."""
    data = os.urandom(DISK_BYTES)
    with tempfile.TemporaryDirectory(dir=runs_root()) as folder:
        samples = []
        for n in range(3):
            path = os.path.join(folder, f"probe{n}")
            start = time.perf_counter()
            with open(path, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(path, path + ".done")
            samples.append(time.perf_counter() - start)
    return DISK_BYTES / statistics.median(samples)
