"""Rank side of calibration: time ring steps and a reduction, all ranks at once.

The `calibrate` job of runtime.worker; runtime.calibration fits the numbers.
The ring steps are the very Actions and executor the hand-made ring uses
(runtime.collectives + runtime.comm, receives pre-posted, the first one before
the barrier that starts each repetition), run as an
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
from runtime.program import Action
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
    return {"sendrecv": timings, "reduce_s": reduce_s}
