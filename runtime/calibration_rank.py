"""Rank side of calibration: time ring steps and a reduction, all ranks at once.

The `calibrate` job of runtime.worker; runtime.calibration fits the numbers.
The ring steps are the very Actions and executor the hand-made ring uses
(runtime.collectives + runtime.comm, receives pre-posted), run as an
all-gather so no reduction mixes into the transfer time: what is fitted is
what a step of the lesson costs on this machine at this world size.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from runtime import collectives
from runtime.calibration import REDUCE_BYTES, REPS, SIZES
from runtime.comm import Comm


def run_rank(ctx: Any) -> dict[str, Any]:
    n, rank = ctx.world_size, ctx.rank
    group = list(range(n))
    comm = Comm()
    timings: dict[str, list[float]] = {}
    for size in SIZES:
        # Each step moves one chunk of `size` bytes to the right neighbour.
        buffer = torch.ones(size // 4 * n, dtype=torch.float32)
        steps = collectives.ring_all_gather(group, buffer.numel(), 4)[rank]
        for _ in range(2):
            comm.run(steps, buffer)
        samples = []
        for _ in range(REPS):
            dist.barrier()
            start = time.perf_counter()
            comm.run(steps, buffer)
            samples.append((time.perf_counter() - start) / len(steps))
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
    return {"sendrecv": timings, "reduce_s": reduce_s}
