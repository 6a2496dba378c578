"""The zero lesson's calibration probe: FSDP2's overheads, timed in every rank at once.

Rank side of scenarios.zero.rates.PROBES (runtime.fit.calibration_probes): the
calibrate job's ranks call `sharded(rank, world_size)` after the generic timings;
scenarios.zero.rates.fit turns every rank's row into ZeroRates.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import os
import statistics
import time

import torch
import torch.distributed as dist

from runtime.engine.models import GPTConfig, MiniGPT, batch
from runtime.fit.calibration import REPS

# (layers, hidden, seq, vocab, sequences) of the MiniGPT timed under FSDP2 and plain:
# the lesson's default model.
SHARDED_SHAPE = (2, 32, 16, 64, 4)


def sharded(rank: int, world_size: int) -> list[float]:
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
