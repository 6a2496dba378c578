"""Rank side of lesson 0: the memory cap refuses one rank and admits ZeRO-3; DDP against time.

Called inside each rank process by runtime.engine.worker with a RankContext. The
Program (scenarios.why_distribute.demo) runs its series one after the other,
each from the MiniGPT's seed, on the same global batches (`microbatch_size ·
ranks` sequences a step, a different seed each step):

1. the reference: one process trains on the whole global batch with torch's
   Adam (rank 0, broadcast to all: the ZeRO lesson's `shared_reference`);
   FSDP2's first Adam step pays DTensor's first calls, a cost of its own as in
   the ZeRO lesson (scenarios.zero.program.FIRST_FSDP2_ADAM);
2. `alone`: rank 0 tries a step on its microbatch under the cap and refuses
   when its live tensors go over it (the line names the bytes by category);
3. `zero3`, `fsdp2`: every rank, its microbatch, the same cap; their parameters
   after the steps are compared with the reference;
4. `ddp<n>`, `torch_ddp<n>`: ranks 0..n-1 split the global batch n ways; the
   others wait at the next barrier. Parameters compared with the reference.

Compute costs for the prediction are the CPU seconds each F, B and Adam took
(all ranks share the cores; the simulator models that), the median per key over
the steps the timing counts (after the warm-up: demo.warmup_steps).

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import os
import statistics
import time
from collections import defaultdict
from itertools import groupby
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.models import GPTConfig, MiniGPT, batch
from runtime.engine.worker import RankContext
from runtime.sim.program import Action, past_warmup
from scenarios.why_distribute import demo
from scenarios.why_distribute.capped import (
    CappedDDP,
    CappedFsdp2,
    CappedZero3,
    MemoryCapExceeded,
    TorchDDP,
)
from scenarios.why_distribute.params import WhyParams, WhyResult
from scenarios.zero.rank import flat_units, max_diff, shared_reference

LR = 1e-3
COMPUTE = frozenset({"F", "B", "opt"})


def run_rank(ctx: RankContext[WhyParams]) -> WhyResult:
    params = ctx.params
    cfg = GPTConfig.from_shape(params.demo_shape)
    rank, world = ctx.rank, ctx.world_size
    limit = demo.cap(params)
    every = {s.name: s for s in demo.series(world, params.microbatch_size)}
    total = params.microbatch_size * world
    batches = [batch(cfg, total, seed=1 + step) for step in range(params.steps)]
    reference = shared_reference(cfg, batches, rank, _mine(batches, world, rank)[0])
    share = min(1.0, (os.cpu_count() or 1) / world)  # of a core, while every rank computes
    # Every rank creates every DDP process group, in the same order (torch's rule).
    groups = {s.members: dist.new_group(list(range(s.members))) for s in every.values()}
    costs: dict[str, list[float]] = defaultdict(list)
    peaks: dict[str, dict[str, int]] = {}
    peak_total: dict[str, int] = {}
    refused: dict[str, dict[str, str]] = {}
    diffs: dict[str, float] = {}

    warm = demo.warmup_steps(params.steps)
    ctx.start_clock()
    for name, group_actions in groupby(ctx.actions, key=lambda a: a.series):
        actions = list(group_actions)
        s = every.get(name or "")
        if s is None or rank >= s.members:
            ctx.execute(actions, lambda a: dist.barrier() if a.kind == "barrier" else None)
            continue
        mine = _mine(batches, s.members, rank)
        state: dict[str, Any] = {"executor": None, "refused": False}

        def sample(category: str, value: float, _stage: str | None, series: str = s.name) -> None:
            ctx.sample(category, value, series)

        def handle(action: Action, s: demo.Series = s, mine: list = mine, state=state) -> None:
            try:
                if state["executor"] is None and not state["refused"]:
                    # Built as the series' start barrier runs, outside its steps: built in
                    # its first forward, it would make step 0's F several times step 1's.
                    state["executor"] = _executor(s, cfg, limit, groups, sample)
                if action.kind == "barrier":
                    dist.barrier()
                    return
                if state["refused"]:
                    return
                executor = state["executor"]
                if action.kind == "F" and action.chunk in (0, None):
                    executor.set_batch(*mine[action.step])
                start, wall = time.process_time(), time.perf_counter()
                executor(action)
                counted = action.kind in COMPUTE and action.cost_key
                if counted and past_warmup(action.step, warm):
                    seconds = time.process_time() - start
                    if s.kind == "fsdp2" and action.kind != "opt":
                        # its gathers wait inside F and B: wall time at this rank's core
                        # share, as the ZeRO lesson measures FSDP2
                        seconds = max(seconds, (time.perf_counter() - wall) * share)
                    costs[action.cost_key].append(seconds)
            except MemoryCapExceeded as exc:
                state["refused"] = True
                at = action.label if state["executor"] is not None else "init"  # its state alone
                refused[s.name] = demo.refusal_line(rank, at, exc.held, exc.cap)
                if action.kind == "barrier":
                    dist.barrier()  # every rank meets there, refused or not

        ctx.execute(actions, handle)
        executor = state["executor"]
        if executor is None:
            continue
        if hasattr(executor, "peaks"):
            peaks[s.name] = dict(executor.peaks)
            peak_total[s.name] = executor.peak_total
        if not state["refused"] and s.name != "alone":  # alone trains its microbatch only
            diffs[s.name] = _diff(executor, reference)
    return WhyResult(
        peaks=peaks,
        peak_total=peak_total,
        refused=refused,
        param_diff=diffs,
        cpu_cores=len(os.sched_getaffinity(0)),
        compute_costs={key: statistics.median(values) for key, values in costs.items()},
    )


def _mine(batches: list[tuple], members: int, rank: int) -> list[tuple]:
    """This rank's share of each step's global batch, split `members` ways."""
    return [(x.chunk(members)[rank], y.chunk(members)[rank]) for x, y in batches]


def _executor(s: demo.Series, cfg: GPTConfig, limit: int, groups: dict, sample: Any) -> Any:
    model = MiniGPT(cfg)
    limit = limit if s.name in demo.MEMORY_SERIES else 0  # the cap is the memory half's
    if s.kind == "ddp":
        return CappedDDP(model, s.members, limit, lr=LR, sample=sample)
    if s.kind == "zero3":
        return CappedZero3(model, limit, lr=LR, sample=sample)
    if s.kind == "fsdp2":
        return CappedFsdp2(model, limit, lr=LR, sample=sample)
    return TorchDDP(model, groups[s.members], lr=LR)


def _diff(executor: Any, reference: list[torch.Tensor]) -> float:
    """Largest difference between this rank's parameters and the reference's."""
    if isinstance(executor, TorchDDP):
        mine = flat_units(executor.model)
        return max((a - b).abs().max().item() for a, b in zip(mine, reference, strict=True))
    return max_diff(executor, reference)
