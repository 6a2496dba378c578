"""Rank side of lesson 2: train MiniGPT under each stage, measure memory and bytes sent.

Called inside each rank process by runtime.worker with a RankContext:

1. The reference: one process, the whole global batch, torch's Adam, `steps`
   steps from MiniGPT's seed; its parameters flattened per unit.
2. For each stage of the Program (ddp, zero1, zero2, zero3 by hand through
   runtime.zero_exec; fsdp2 through torch's fully_shard), a fresh MiniGPT from
   the same seed, this rank's `microbatch` sequences of each step's global batch,
   every Action run and timed into a Span, memory sampled as Counters
   "<stage>/<category>" after each one.
3. After each stage: the largest difference between the parameter elements this
   rank holds and DDP's (the reference's when DDP is not in the list), the peak
   bytes per category, and the bytes this rank sent.

Compute costs for the prediction are the CPU seconds each F, B and Adam took
(all ranks share this machine's cores, as in the pipeline lesson), averaged.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from itertools import groupby
from typing import Any

import torch

from runtime.models import GPTConfig, MiniGPT, batch
from runtime.program import Action
from runtime.zero_exec import Fsdp2Executor, ZeroExecutor, units_of

LR = 1e-3
COMPUTE = frozenset({"F", "B", "opt"})


def config(params: dict[str, Any]) -> GPTConfig:
    return GPTConfig.from_params(params)


def stage_of(action: Action) -> str:
    return action.id.split("/", 1)[0]


def global_batches(cfg: GPTConfig, params: dict[str, Any], world: int) -> list[tuple]:
    """One global batch per step (a different seed each step), the same on every rank."""
    count = params["microbatch"] * world
    return [batch(cfg, count, seed=1 + step) for step in range(params["steps"])]


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


def max_diff(executor: Any, baseline: list[torch.Tensor]) -> float:
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


def run_rank(ctx: Any) -> dict[str, Any]:
    params = ctx.params
    cfg = config(params)
    rank, world = ctx.rank, ctx.world_size
    batches = global_batches(cfg, params, world)
    mine = [(x.chunk(world)[rank], y.chunk(world)[rank]) for x, y in batches]
    reference = reference_params(cfg, batches)
    by_stage = {name: list(acts) for name, acts in groupby(ctx.actions, key=stage_of)}
    costs: dict[str, list[float]] = defaultdict(list)

    ctx.start_clock()
    results: dict[str, Any] = {}
    baseline = reference
    ddp_diff = None
    for stage, actions in by_stage.items():
        model = MiniGPT(cfg)
        if stage == "fsdp2":
            executor: Any = Fsdp2Executor(model, lr=LR, sample=ctx.sample)
        else:
            executor = ZeroExecutor(model, stage, lr=LR, sample=ctx.sample)

        def handle(action: Action, executor: Any = executor) -> None:
            if action.kind == "F" and action.chunk in (0, None):
                executor.set_batch(*mine[action.step])
            if action.kind not in COMPUTE:
                executor(action)
                return
            start = time.process_time()
            executor(action)
            costs[action.cost_key or action.kind].append(time.process_time() - start)

        ctx.execute(actions, handle)
        diff = max_diff(executor, baseline)
        if stage == "ddp":
            # DDP against one process; then every other stage against DDP.
            ddp_diff, diff = diff, 0.0
            baseline = flat_units(model)
        results[stage] = {
            "peak_bytes": dict(executor.peaks),
            "bytes_sent": executor.bytes_sent,
            "param_diff_vs_ddp": diff,
            "losses": executor.losses,
        }
    return {
        "stages": results,
        "ddp_diff_vs_single_process": ddp_diff,
        "compute_costs": {key: statistics.median(values) for key, values in costs.items()},
    }
