"""Rank side of lesson 2: train MiniGPT under each stage, measure memory and bytes sent.

Called inside each rank process by runtime.engine.worker with a RankContext:

1. The reference: one process, the whole global batch, torch's Adam, `steps`
   steps from MiniGPT's seed; its parameters flattened per unit. Rank 0 trains
   it and broadcasts the result (the same bits every rank used to compute for
   itself, at a world size's worth of CPU on shared cores); meanwhile the other
   ranks take one untimed step on their own microbatch, so that what a process
   pays the first time (lazy initialisation, the optimizer's imports) is paid
   before the clock starts, on every rank, as the reference pays it on rank 0.
2. For each stage of the Program (its Actions' `series`: ddp, zero1, zero2,
   zero3 by hand through scenarios.zero.executors; fsdp2 through torch's
   fully_shard, scenarios.zero.fsdp2), a fresh MiniGPT from the same seed, this
   rank's `microbatch` sequences of each step's global batch, every Action run
   and timed into a Span, memory sampled as Counters "<stage>/<category>" after
   each one.
3. After each stage: the largest difference between the parameter elements this
   rank holds and DDP's (the reference's when DDP is not in the list), the peak
   bytes per category, and the bytes this rank sent.

Compute costs for the prediction are the CPU seconds each F, B and Adam took
(all ranks share this machine's cores, as in the pipeline lesson), the median of
this rank's repetitions (runtime.fit.refine.refine takes the median across ranks).

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import os
import statistics
import time
from collections import defaultdict
from itertools import groupby

import torch
import torch.distributed as dist

from runtime.engine.faults import slow_factors
from runtime.engine.models import GPTConfig, MiniGPT, batch
from runtime.engine.worker import RankContext
from runtime.sim.program import Action
from scenarios.zero.executors import ZeroExecutor
from scenarios.zero.fsdp2 import Fsdp2Executor
from scenarios.zero.measure import units_of
from scenarios.zero.params import ZeroParams
from scenarios.zero.results import Peaks, StageResult, ZeroResult

LR = 1e-3
COMPUTE = frozenset({"F", "B", "opt"})
Executor = ZeroExecutor | Fsdp2Executor


def global_batches(cfg: GPTConfig, params: ZeroParams, world: int) -> list[tuple]:
    """One global batch per step (a different seed each step), the same on every rank."""
    count = params.microbatch * world
    return [batch(cfg, count, seed=1 + step) for step in range(params.steps)]


def flat_units(model: MiniGPT) -> list[torch.Tensor]:
    return [
        torch.cat([p.detach().reshape(-1) for p in unit.parameters()]) for unit in units_of(model)
    ]


def reference_params(cfg: GPTConfig, batches: list[tuple]) -> list[torch.Tensor]:
    """A single process on the whole global batch: what data parallelism must reproduce."""
    model = MiniGPT(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=True)
        model(inputs, targets).backward()
        optimizer.step()
    return flat_units(model)


def warm_up(cfg: GPTConfig, inputs: torch.Tensor, targets: torch.Tensor) -> None:
    """One untimed step (forward, backward, Adam) of a throwaway model."""
    model = MiniGPT(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    model(inputs, targets).backward()
    optimizer.step()


def shared_reference(
    cfg: GPTConfig, batches: list[tuple], rank: int, mine: tuple
) -> list[torch.Tensor]:
    """The reference's units, trained by rank 0 alone and broadcast to every rank; the
    others warm up on `mine` (their first microbatch) meanwhile."""
    if rank == 0:
        units = reference_params(cfg, batches)
    else:
        warm_up(cfg, *mine)
        units = [torch.empty_like(u) for u in flat_units(MiniGPT(cfg))]
    flat = torch.cat(units)
    dist.broadcast(flat, src=0)
    return list(flat.split([u.numel() for u in units]))


def max_diff(executor: Executor, baseline: list[torch.Tensor]) -> float:
    if isinstance(executor, Fsdp2Executor):
        mine = [(u, 0, values) for u, values in enumerate(executor.full_params())]
    else:
        mine = executor.local_params()
    return max(
        (
            (values - baseline[u][offset : offset + values.numel()]).abs().max().item()
            for u, offset, values in mine
            if values.numel()
        ),
        default=0.0,
    )


def run_rank(ctx: RankContext[ZeroParams]) -> ZeroResult:
    params = ctx.params
    cfg = GPTConfig.from_shape(params.model)
    rank, world = ctx.rank, ctx.world_size
    batches = global_batches(cfg, params, world)
    mine = [(x.chunk(world)[rank], y.chunk(world)[rank]) for x, y in batches]
    reference = shared_reference(cfg, batches, rank, mine[0])
    by_stage = {stage: list(acts) for stage, acts in groupby(ctx.actions, key=lambda a: a.series)}
    costs: dict[str, list[float]] = defaultdict(list)
    share = min(1.0, (os.cpu_count() or 1) / world)  # of a core, while every rank computes
    # A rank slowed on purpose (--fault slow:...) makes its peers wait inside FSDP2's
    # collectives: that wait is the fault's, which the simulator adds itself.
    waits_are_costs = not slow_factors(ctx.faults)

    ctx.start_clock()
    results: dict[str, StageResult] = {}
    baseline = reference
    ddp_diff = None
    for stage, actions in by_stage.items():
        assert stage is not None, "every Action of the zero lesson carries its stage"
        model = MiniGPT(cfg)
        if stage == "fsdp2":
            executor: Executor = Fsdp2Executor(model, lr=LR, sample=ctx.sample)
        else:
            executor = ZeroExecutor(model, stage, lr=LR, sample=ctx.sample)

        def handle(action: Action, executor: Executor = executor) -> float | None:
            if action.kind == "F" and action.chunk in (0, None):
                executor.set_batch(*mine[action.step])
            if action.kind not in COMPUTE:
                executor(action)
                return None
            start, wall = time.process_time(), time.perf_counter()
            executor(action)
            cpu = time.process_time() - start
            costs_waits = isinstance(executor, Fsdp2Executor) and action.kind != "opt"
            if costs_waits and waits_are_costs:
                # FSDP2's collectives run inside its forward and backward, so their waits
                # for the slowest rank are part of the span, not CPU: the cost is the
                # wall time at this rank's share of the cores, which the simulator's
                # sharing turns back into the span it measured.
                cpu = max(cpu, (time.perf_counter() - wall) * share)
            costs[action.cost_key or action.kind].append(cpu)
            # A slowed rank slows its own compute (CPU seconds at its share of the
            # cores), not the waits for its peers inside FSDP2's span (runtime.engine.worker).
            return cpu / share if costs_waits else None

        ctx.execute(actions, handle)
        diff = max_diff(executor, baseline)
        if stage == "ddp":
            # DDP against one process; then every other stage against DDP.
            ddp_diff, diff = diff, 0.0
            baseline = flat_units(model)
        results[stage] = StageResult(
            peak_bytes=Peaks(**executor.peaks),
            bytes_sent=executor.bytes_sent,
            param_diff_vs_ddp=diff,
            losses=executor.losses,
        )
    return ZeroResult(
        stages=results,
        ddp_diff_vs_single_process=ddp_diff,
        compute_costs={key: statistics.median(values) for key, values in costs.items()},
    )
