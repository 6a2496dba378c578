"""Rank side of calibration: time ring steps and a reduction, all ranks at once.

The `calibrate` job of runtime.worker; runtime.calibration fits the numbers.
Then the compute half (runtime.compute): a MiniGPT block's forward and backward
at the shapes the lessons use, an Adam step, and (rank 0) a checkpoint-sized
fsync'ed write, all in CPU seconds with every rank busy at once.
The ring steps are the very Actions and executor the hand-made ring uses
(runtime.collectives + runtime.comm, receives pre-posted, the first one before
the barrier that starts each repetition), run as an
all-gather so no reduction mixes into the transfer time: what is fitted is
what a step of the lesson costs on this machine at this world size.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

import torch
import torch.distributed as dist

from runtime import collectives
from runtime.calibration import (
    BLOCK_SHAPES,
    BUSY_BYTES,
    BUSY_REPS,
    DISK_BYTES,
    REDUCE_BYTES,
    REPS,
    SIZES,
)
from runtime.comm import Comm
from runtime.models import Block, GPTConfig
from runtime.program import Action
from runtime.rundirs import runs_root
from runtime.worker import RankContext


def run_rank(ctx: RankContext[None]) -> dict[str, Any]:
    n, rank = ctx.world_size, ctx.rank
    group = list(range(n))
    comm = Comm()
    timings: dict[str, list[float]] = {}
    for size in SIZES:
        # Each step moves one chunk of `size` bytes to the right neighbour.
        buffer = torch.ones(size // 4 * n, dtype=torch.float32)
        steps = collectives.ring_all_gather(group, buffer.numel(), 4)[rank]
        # A barrier Action first, as in the lesson's iterations: the first step's
        # receive is posted before it (runtime.comm), and the clock starts after it.
        barrier = Action(id="barrier", rank=rank, kind="barrier", group=tuple(group))
        samples: list[float] = []

        def timed(actions: list[Action], handler: Any, samples: list[float] = samples) -> None:
            handler(actions[0])
            start = time.perf_counter()
            for action in actions[1:]:
                handler(action)
            samples.append((time.perf_counter() - start) / (len(actions) - 1))

        for _ in range(2):
            comm.run([barrier, *steps], buffer)
        for _ in range(REPS):
            comm.run([barrier, *steps], buffer, runner=timed)
        timings[str(size)] = samples
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
        "busy_all_reduce": _busy_all_reduce(ctx, comm),
        "blocks": _blocks(),
        "adam_s_per_element": _adam(),
        "disk_bytes_per_s": _disk() if rank == 0 else None,
    }


def _busy_all_reduce(ctx: RankContext[None], comm: Comm) -> list[float]:
    """Seconds of hand-made ring all-reduces of BUSY_BYTES between computes, as a training
    step interleaves them: every rank runs a block's forward, then joins the all-reduce.
    A rank descheduled by the others' compute holds up every step of the ring; an
    all-reduce timed alone (above) never sees that, a lesson's always does."""
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
        comm.run(steps, buffer)
        if rep >= 2:  # two warm-ups
            samples.append(time.perf_counter() - start)
    return samples


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
    """[hidden, tokens, seq, forward s, backward s] of one block, per shape."""
    out = []
    for hidden, tokens, seq in BLOCK_SHAPES:
        block = Block(GPTConfig(vocab=64, seq=seq, hidden=hidden, heads=4, layers=1))
        x = torch.randn(tokens // seq, seq, hidden, requires_grad=True)
        forward = _cpu_seconds(lambda block=block, x=x: block(x))

        def both(block: Any = block, x: torch.Tensor = x) -> None:
            block(x).sum().backward()

        out.append([hidden, tokens, seq, forward, max(0.0, _cpu_seconds(both) - forward)])
    return out


def _adam() -> float:
    """CPU seconds of one Adam step, per parameter element."""
    param = torch.nn.Parameter(torch.randn(2**18))
    param.grad = torch.randn_like(param)
    optimizer = torch.optim.Adam([param], lr=1e-3)
    return _cpu_seconds(optimizer.step) / param.numel()


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
