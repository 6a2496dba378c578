"""Rank side of lesson 5: time the stages, run each schedule for real, check gradients.

Called inside each rank process by runtime.engine.worker with a RankContext of
PipelineParams and this rank's Actions (grouped by their `series`, the schedule):

1. Build MiniGPT from its seed (the same weights on every rank) and the
   deterministic batch; cut it into p·v stages per schedule, keep this rank's.
2. Reference: the whole model, one process, the whole batch: its gradients,
   computed by rank 0 alone and broadcast (every rank computing the same bits
   at once cost the shared cores a world size's worth of work), and kept by a
   warm rank for its next job with the same model and batch.
3. Stage costs: an untimed warm-up step of a schedule, every F, B and split Bi
   and W timed in CPU seconds (the median per stage and kind), so each cost is
   what one core does with the ranks sharing the cores as the schedule shares
   them; the simulator adds the sharing itself. The step also warms the
   allocator and every channel; a schedule whose costs an earlier one gave
   (1F1B after GPipe) skips it. Then each pair of neighbours ping-pongs an
   activation-sized message (its one-way time refines alpha).
4. For each schedule, with fresh gradients: its Actions through
   scenarios.pipeline.executor, one Span each, Counters of activations held; then
   the largest difference between this rank's gradients and the reference's.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import functools
import os
import statistics
import time
from itertools import groupby

import torch
import torch.distributed as dist

from runtime.engine.models import GPTConfig, MiniGPT, batch, split_stages
from runtime.engine.worker import RankContext
from runtime.sim.program import Action
from scenarios.pipeline.executor import PipelineExecutor
from scenarios.pipeline.params import (
    PipelineParams,
    PipelineResult,
    ScheduleRun,
    StageActivations,
)
from scenarios.pipeline.schedules import cost_key


@functools.lru_cache(maxsize=1)
def reference_grads(cfg: GPTConfig, count: int, threads: int) -> torch.Tensor:
    """The whole model's gradients on the whole batch of `count` sequences in one process
    on `threads` threads, flat in named_parameters order. Deterministic, so it is kept
    for a warm rank's next job (runtime.engine.pool) with the same model, batch and threads:
    the very same bits."""
    inputs, targets = batch(cfg, count)
    model = MiniGPT(cfg)
    own = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        model(inputs, targets).backward()
    finally:
        torch.set_num_threads(own)
    return torch.cat([param.grad.reshape(-1) for _, param in model.named_parameters()])


def shared_reference_grads(
    cfg: GPTConfig, count: int, model: MiniGPT, rank: int
) -> dict[str, torch.Tensor]:
    """reference_grads, computed by rank 0 and broadcast; `model` gives the names and shapes.
    Rank 0 takes every core for it: the other ranks only wait in the broadcast (blocked,
    not spinning), and this is the longest thing a cold run does before its clock."""
    named = list(model.named_parameters())
    if rank == 0:
        threads = max(torch.get_num_threads(), os.cpu_count() or 1)
        flat = reference_grads(cfg, count, threads).clone()
    else:
        flat = torch.empty(sum(param.numel() for _, param in named))
    dist.broadcast(flat, src=0)
    parts = flat.split([param.numel() for _, param in named])
    return {name: part.view_as(param) for (name, param), part in zip(named, parts, strict=True)}


def p2p_seconds(ctx: RankContext[PipelineParams], nbytes: int, reps: int = 10) -> float | None:
    """One-way time of an activation-sized message between pipeline neighbours:
    half the median round trip, pair by pair while the other ranks wait, with the
    receive posted first as the executor posts it."""
    buffer = torch.zeros(max(1, nbytes // 4))
    times = []
    for left in range(ctx.world_size - 1):
        if ctx.rank in (left, left + 1):
            peer = left + 1 if ctx.rank == left else left
            for _ in range(reps + 1):
                start = time.perf_counter()
                if ctx.rank == left:
                    dist.send(buffer, peer)
                    dist.recv(buffer, peer)
                else:
                    dist.recv(buffer, peer)
                    dist.send(buffer, peer)
                times.append((time.perf_counter() - start) / 2)
            del times[-reps - 1]  # the first round trip warms the pair up
        dist.barrier()
    return statistics.median(times) if times else None


def run_rank(ctx: RankContext[PipelineParams]) -> PipelineResult:
    params = ctx.params
    cfg = GPTConfig.from_shape(params.model)
    p, m = params.stages, params.microbatches
    inputs, targets = batch(cfg, m * params.microbatch_size)
    micro_inputs = list(inputs.chunk(m))
    micro_targets = list(targets.chunk(m))
    model = MiniGPT(cfg)
    names = {id(param): name for name, param in model.named_parameters()}
    reference = shared_reference_grads(cfg, m * params.microbatch_size, model, ctx.rank)
    by_schedule = {name: list(acts) for name, acts in groupby(ctx.actions, key=lambda a: a.series)}
    runs: dict[str, tuple[PipelineExecutor, list[Action]]] = {}
    for schedule in params.schedule:
        virtual = params.shape(schedule).virtual_stages
        stages = split_stages(model, virtual)
        mine = {s: stages[s] for s in range(ctx.rank, virtual, p)}
        executor = PipelineExecutor(
            mine, micro_inputs, micro_targets, hidden=cfg.hidden, sample=ctx.sample
        )
        runs[schedule] = (executor, by_schedule[schedule])

    # A warm rank that ran these very params before (the app's rank pool) already has
    # what follows: the stage costs it measured then, a warm allocator and every channel
    # used. Every rank must agree, or the collectives below would not pair.
    key = (params, ctx.world_size, torch.get_num_threads())
    have = torch.tensor([int(key in _PREPARED)])
    dist.all_reduce(have, op=dist.ReduceOp.MIN)
    if have.item():
        costs, activations, one_way_s = _PREPARED[key]
    else:
        costs, activations, one_way_s = prepare(ctx, runs, model)
        _PREPARED.clear()  # one set of params kept: the last one run
        _PREPARED[key] = (costs, activations, one_way_s)
    dist.barrier()

    ctx.start_clock()
    results = {
        schedule: run_schedule(ctx, schedule, executor, actions, reference, names)
        for schedule, (executor, actions) in runs.items()
    }
    return PipelineResult(
        compute_costs=costs,
        p2p=[] if one_way_s is None else [(params.activation_bytes, one_way_s)],
        activations=activations,
        schedules=results,
    )


# params, world size, threads -> (stage costs, activation bytes, one-way p2p seconds)
_PREPARED: dict[tuple, tuple[dict[str, float], list[StageActivations], float | None]] = {}


def prepare(
    ctx: RankContext[PipelineParams],
    runs: dict[str, tuple[PipelineExecutor, list[Action]]],
    model: MiniGPT,
) -> tuple[dict[str, float], list[StageActivations], float | None]:
    """Before the clock: an untimed step of each schedule that brings stage costs not
    known yet, each F, B, Bi and W timed in CPU seconds (the stage costs: the median per
    stage and kind) with the bytes each microbatch's forward keeps; then the p2p latency.
    The same step brings the allocator to its peak footprint and has every channel carry
    a message. A schedule whose costs an earlier one brought skips it: 1F1B after GPipe
    runs the same stages, holds fewer activations and uses the same channels."""
    params = ctx.params
    samples: dict[str, list[float]] = {}
    held: dict[tuple[int, int], int] = {}  # (virtual stages, stage) -> bytes
    model.zero_grad(set_to_none=True)
    for schedule, (executor, actions) in runs.items():
        virtual = params.shape(schedule).virtual_stages
        keys = {_cost_kind(a, virtual) for a in actions} - {None}
        if keys <= samples.keys():
            continue
        sampler, executor.sample = executor.sample, None
        executor.prepost(actions)
        for action in actions:
            kind = _cost_kind(action, virtual)
            start = time.process_time()
            handle(executor, action)
            if kind is not None:
                samples.setdefault(kind, []).append(time.process_time() - start)
            if action.kind == "F":
                stage, mb = action.stage or 0, action.microbatch or 0
                nbytes = executor.held[(stage, mb)].bytes()
                held[(virtual, stage)] = max(held.get((virtual, stage), 0), nbytes)
        executor.finish()
        executor.sample = sampler
        for stage in executor.stages.values():
            stage.zero_grad(set_to_none=True)
    dist.barrier()
    one_way_s = p2p_seconds(ctx, params.activation_bytes)
    costs = {key: statistics.median(values) for key, values in samples.items()}
    activations = [
        StageActivations(stages=virtual, stage=stage, bytes=nbytes)
        for (virtual, stage), nbytes in sorted(held.items())
    ]
    return costs, activations, one_way_s


def _cost_kind(action: Action, virtual: int) -> str | None:
    """The stage-cost key an Action is timed under (runtime.sim.costmodel): F, B, or a
    split backward's Bi and W; None for what is not a stage's compute."""
    if action.kind == "F":
        kind = "F"
    elif action.kind == "B":
        kind = "Bi" if action.arg("split", False) else "B"
    elif action.kind == "W":
        kind = "W"
    else:
        return None
    return cost_key(kind, action.stage or 0, virtual)


def handle(executor: PipelineExecutor, action: Action) -> None:
    if action.kind == "barrier":
        dist.barrier()
    else:
        executor(action)


def run_schedule(
    ctx: RankContext[PipelineParams],
    schedule: str,
    executor: PipelineExecutor,
    actions: list[Action],
    reference: dict[str, torch.Tensor],
    names: dict[int, str],
) -> ScheduleRun:
    """One timed step of `schedule` from fresh gradients, checked against the reference."""
    for stage in executor.stages.values():
        stage.zero_grad(set_to_none=True)
    executor.peak_inflight = executor.peak_bytes = executor.bytes_sent = 0
    executor.losses.clear()
    executor.prepost(actions)
    cpu_start = time.process_time()
    ctx.execute(actions, lambda action: handle(executor, action))
    executor.finish()
    cpu_s = time.process_time() - cpu_start
    params = [param for stage in executor.stages.values() for param in stage.parameters()]
    missing = [names[id(param)] for param in params if param.grad is None]
    if missing:
        raise RuntimeError(f"{schedule}: no gradient for {', '.join(missing[:3])}")
    diffs = [(param.grad - reference[names[id(param)]]).abs().max().item() for param in params]
    return ScheduleRun(
        peak_inflight=executor.peak_inflight,
        peak_activation_bytes=executor.peak_bytes,
        p2p_bytes=executor.bytes_sent,
        cpu_s=cpu_s,
        max_grad_diff=max(diffs, default=0.0),
        losses=[executor.losses[k] for k in sorted(executor.losses)],
    )
