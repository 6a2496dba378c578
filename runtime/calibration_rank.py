"""Rank side of calibration: time ring-neighbour exchanges and a reduction, all ranks at once.

The `calibrate` job of runtime.worker; runtime.calibration fits the numbers.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from runtime.calibration import REDUCE_BYTES, REPS, SIZES, STEPS


def _exchange(send: torch.Tensor, recv: torch.Tensor, right: int, left: int) -> None:
    requests = [dist.isend(send, right), dist.irecv(recv, left)]
    for request in requests:
        request.wait()


def run_rank(ctx: Any) -> dict[str, Any]:
    n, rank = ctx.world_size, ctx.rank
    right, left = (rank + 1) % n, (rank - 1) % n
    timings: dict[str, list[float]] = {}
    for size in SIZES:
        send = torch.ones(size // 4, dtype=torch.float32)
        recv = torch.empty_like(send)
        for _ in range(2):
            _exchange(send, recv, right, left)
        samples = []
        for _ in range(REPS):
            # Back-to-back exchanges, as the steps of a ring follow each other: the
            # per-step cost at steady state, including waiting for a descheduled peer.
            dist.barrier()
            start = time.perf_counter()
            for _ in range(STEPS):
                _exchange(send, recv, right, left)
            samples.append((time.perf_counter() - start) / STEPS)
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
