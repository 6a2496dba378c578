"""The tensor-parallel lesson's calibration probe: DTensor's dispatch per parallelized module.

Rank side of scenarios.tensor_parallel.rates.PROBES (runtime.fit.calibration_probes):
the calibrate job's ranks call `parallelized(rank, world_size)` after the generic
timings; scenarios.tensor_parallel.rates.fit turns every rank's row into TPRates.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from runtime.fit.calibration import REPS

# (hidden, sequences, seq) of the MLP timed under torch's tensor parallelism: the
# lesson's default size.
PARALLEL_SHAPE = (64, 4, 32)


def parallelized(rank: int, world_size: int) -> list[float] | None:
    """[forward, backward under torch's tensor parallelism, forward, backward of the same
    rank's shard as plain Linears]: CPU seconds of an MLP (Linear h->4h, GELU, Linear
    4h->h) under ColwiseParallel + RowwiseParallel over every rank, against the local
    compute it does; medians of REPS after a warm-up. The difference, over its two
    modules, is DTensor's dispatch per parallelized module (TPRates.parallel_*). None
    where the MLP does not split: one rank, or a world size that does not divide its 4h
    columns."""
    if world_size == 1 or 4 * PARALLEL_SHAPE[0] % world_size:
        return None
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
