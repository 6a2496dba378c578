"""Rank side of calibration, its compute half: what a rank's compute costs on this machine.

Called by runtime.fit.calibration_rank (the `calibrate` job) in every rank at once;
runtime.fit.calibration fits the numbers into runtime.sim.compute's ComputeRates and the
cost model's wake-up. A MiniGPT block's forward and backward at the shapes the
lessons use (and in fp16 and bf16), one eager operator, a compute right after a
wait, an Adam step (per element and per tensor), FSDP2's and tensor parallelism's
overheads: CPU seconds, with every rank busy at once (the disk's half:
runtime.fit.calibration_disk).

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.models import Block, GPTConfig, MiniGPT, batch
from runtime.engine.split_backward import input_gradients, recording_linears, weight_gradients
from runtime.fit.calibration import (
    ADAM_LARGE,
    ADAM_REPS,
    ADAM_SMALL,
    ADAM_TENSORS,
    BLOCK_ROUNDS,
    BLOCK_SHAPES,
    LIVE_GRAPHS,
    LOW_PRECISION_SHAPE,
    OP_REPS,
    PARALLEL_SHAPE,
    REPS,
    SHARDED_SHAPE,
    SPLIT_SHAPE,
    WAKE_REPS,
)
from runtime.sim.compute import BLOCK_FORWARD_OPS


def cpu_seconds(fn: Any, reps: int = 5) -> float:
    """Median CPU seconds of `fn` (after one warm-up): what one core spends on it."""
    return cpu_seconds_by_turns([fn], reps)[0]


def cpu_seconds_by_turns(fns: list[Any], reps: int) -> list[float]:
    """Median CPU seconds of each of `fns`, called by turns `reps` rounds after one
    warm-up round: the machine's pace, which moves by the second, weighs on each alike."""
    samples: list[list[float]] = [[] for _ in fns]
    for rep in range(reps + 1):
        for fn, times in zip(fns, samples, strict=True):
            start = time.process_time()
            fn()
            if rep:
                times.append(time.process_time() - start)
    return [statistics.median(times) for times in samples]


def blocks() -> list[list[float]]:
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


def split_backward() -> list[float]:
    """[full backward s, Bi s, W s] of one block at SPLIT_SHAPE, timed as blocks() times
    them (LIVE_GRAPHS alive, every rank at once): a round of full backwards, then a round
    of split ones, Bi for each graph and then W for each, as zb-h1 runs them. On a CPU
    the halves are not B/2 each: asking autograd for the input gradient still walks the
    whole graph (a run measured Bi at 0.84-1.26 B and W at 0.32-0.48 B per stage)."""
    hidden, tokens, seq = SPLIT_SHAPE
    block = Block(GPTConfig(vocab=64, seq=seq, hidden=hidden, heads=4, layers=1))
    full: list[float] = []
    bi: list[float] = []
    w: list[float] = []
    dist.barrier()
    for rep in range(BLOCK_ROUNDS + 1):  # the first round warms up
        for split in (False, True):
            graphs = []
            for _ in range(LIVE_GRAPHS):
                x = torch.randn(tokens // seq, seq, hidden, requires_grad=True)
                with recording_linears(block) if split else contextlib.nullcontext([]) as seen:
                    graphs.append((x, block(x).sum(), seen))
            pending = []
            for x, y, seen in graphs:
                start = time.process_time()
                if split:
                    pending.append((seen, input_gradients(block, y, None, x, seen)[1]))
                    bi.append(time.process_time() - start)
                else:
                    y.backward()
                    full.append(time.process_time() - start)
            for seen, grads in pending:
                start = time.process_time()
                weight_gradients(seen, grads)
                w.append(time.process_time() - start)
        if rep == 0:
            for samples in (full, bi, w):
                samples.clear()
    return [statistics.median(full), statistics.median(bi), statistics.median(w)]


def low_precision() -> list[float]:
    """[fp32, fp16, bf16] CPU seconds of one block's forward and backward at
    LOW_PRECISION_SHAPE, its weights in that precision and fp16/bf16 under torch's CPU
    autocast, as the mixed-precision lesson trains (scenarios.mixed_precision.trainer):
    every rank at once, precisions by turns within each round (the machine's pace moves
    by the second). A CPU's fp16 has no fast matmul of its own: a run measured its
    forward 5.7 times fp32's here, where a fixed guess said 2.5."""
    try:
        return _low_precision()
    except RuntimeError:  # a build without a half-precision CPU kernel: the lesson's guess
        return []


def _low_precision() -> list[float]:
    hidden, tokens, seq = LOW_PRECISION_SHAPE
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    cfg = GPTConfig(vocab=64, seq=seq, hidden=hidden, heads=4, layers=1)
    models = [Block(cfg).to(dtype) for dtype in dtypes]
    samples: list[list[float]] = [[] for _ in dtypes]
    dist.barrier()
    for rep in range(2 * BLOCK_ROUNDS + 1):  # the first round warms up
        for dtype, block, out in zip(dtypes, models, samples, strict=True):
            x = torch.randn(tokens // seq, seq, hidden, dtype=dtype, requires_grad=True)
            low = dtype != torch.float32
            start = time.process_time()
            with torch.autocast("cpu", dtype=dtype, enabled=low):
                y = block(x).float().sum()
            y.backward()
            if rep:
                out.append(time.process_time() - start)
    return [statistics.median(out) for out in samples]


def sharded(rank: int) -> list[float]:
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


def parallelized() -> list[float]:
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


def wake(world_size: int) -> list[float]:
    """[after a wait, back to back]: median CPU seconds of a block's forward right after
    the rank blocked in an all-reduce of every rank (alone: a millisecond's sleep), and
    of the same forward two forwards later, by turns. The difference is what a lesson's
    compute pays after each receive or collective (Corrections.wake)."""
    block = Block(GPTConfig(vocab=64, seq=32, hidden=64, heads=4, layers=1))
    x, token = torch.randn(4, 32, 64), torch.zeros(1)
    after: list[float] = []
    back: list[float] = []
    with torch.no_grad():
        block(x)
        for rep in range(WAKE_REPS + 2):
            if world_size > 1:
                dist.all_reduce(token)
            else:
                time.sleep(1e-3)
            # After the wait, then (one forward later, warm again) back to back.
            for samples in (after, None, back):
                start = time.thread_time()
                block(x)
                if rep >= 2 and samples is not None:  # two warm-ups
                    samples.append(time.thread_time() - start)
    return [statistics.median(after), statistics.median(back)]


def op_seconds() -> float:
    """CPU seconds of one eager operator outside autograd: a one-token block forward
    under no_grad (its FLOPs next to nothing) over the BLOCK_FORWARD_OPS operators it
    dispatches, as a server's decode step runs hundreds of them."""
    block = Block(GPTConfig(vocab=64, seq=16, hidden=32, heads=4, layers=1))
    x = torch.randn(1, 1, 32)
    with torch.no_grad():
        for _ in range(20):  # warm-up: first calls fill torch's dispatch caches
            block(x)
        return cpu_seconds(lambda: block(x), reps=OP_REPS) / BLOCK_FORWARD_OPS


def adam() -> list[float]:
    """CPU seconds of one Adam step (torch's default on a CPU: a loop over the tensors)
    over one large tensor, then over many small ones: runtime.fit.calibration.fit_adam
    splits them into a cost per element and one per tensor. The two take turns, every
    rank at once, ADAM_REPS each, so that a slow spell of the machine falls on both rather than
    on one (timed one after the other, calibrations in a row disagreed by half)."""
    steps = [_adam_step([ADAM_LARGE]), _adam_step([ADAM_SMALL] * ADAM_TENSORS)]
    dist.barrier()
    return cpu_seconds_by_turns(steps, ADAM_REPS)


def _adam_step(sizes: list[int]) -> Any:
    """An Adam step over tensors of these sizes, their gradients set."""
    params = [torch.nn.Parameter(torch.randn(n)) for n in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    return torch.optim.Adam(params, lr=1e-3).step
