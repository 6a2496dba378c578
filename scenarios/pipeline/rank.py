"""Rank side of lesson 5: time the stages, run each schedule for real, check gradients.

Called inside each rank process by runtime.worker with a RankContext of
PipelineParams and this rank's Actions (grouped by their `series`, the schedule):

1. Build MiniGPT from its seed (the same weights on every rank) and the
   deterministic batch; cut it into p·v stages per schedule, keep this rank's.
2. Reference: the whole model, one process, the whole batch: its gradients,
   computed by rank 0 alone and broadcast (every rank computing the same bits
   at once cost the shared cores a world size's worth of work), and kept by a
   warm rank for its next job with the same model and batch.
3. Stage costs: all ranks at once time F, B and the split Bi and W of each of
   their stages on one microbatch, in CPU seconds (median of a few
   repetitions), so each cost is what one core does when the ranks share the
   cores; the simulator adds the sharing itself. Then each pair of neighbours
   ping-pongs an activation-sized message (its one-way time refines alpha).
4. For each schedule, with fresh gradients: its Actions through
   scenarios.pipeline.executor, one Span each, Counters of activations held; then
   the largest difference between this rank's gradients and the reference's.
   Each schedule first runs one untimed warm-up step (allocator, connections).

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from itertools import groupby

import torch
import torch.distributed as dist

from runtime.models import GPTConfig, MiniGPT, batch, split_stages
from runtime.program import Action
from runtime.worker import RankContext
from scenarios.pipeline.executor import PipelineExecutor
from scenarios.pipeline.lesson import (
    PipelineParams,
    PipelineResult,
    ScheduleRun,
    StageActivations,
)
from scenarios.pipeline.schedules import cost_key

CALIBRATION_REPS = 5


@functools.lru_cache(maxsize=1)
def reference_grads(cfg: GPTConfig, count: int, threads: int) -> torch.Tensor:
    """The whole model's gradients on the whole batch of `count` sequences in one process,
    flat in named_parameters order. Deterministic, so it is kept for a warm rank's next
    job (runtime.pool) with the same model, batch and threads: the very same bits."""
    inputs, targets = batch(cfg, count)
    model = MiniGPT(cfg)
    model(inputs, targets).backward()
    return torch.cat([param.grad.reshape(-1) for _, param in model.named_parameters()])


def shared_reference_grads(
    cfg: GPTConfig, count: int, model: MiniGPT, rank: int
) -> dict[str, torch.Tensor]:
    """reference_grads, computed by rank 0 and broadcast; `model` gives the names and shapes."""
    named = list(model.named_parameters())
    if rank == 0:
        flat = reference_grads(cfg, count, torch.get_num_threads()).clone()
    else:
        flat = torch.empty(sum(param.numel() for _, param in named))
    dist.broadcast(flat, src=0)
    parts = flat.split([param.numel() for _, param in named])
    return {name: part.view_as(param) for (name, param), part in zip(named, parts, strict=True)}


def stage_costs(
    executor: PipelineExecutor,
    stage: int,
    stages: int,
    *,
    first: bool,
    last: bool,
    hidden: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[dict[str, float], int]:
    """Seconds for F, B, Bi and W of one stage on microbatch 0 (median), by `clock`,
    and the bytes one microbatch's forward keeps for backward on it."""
    mb = 0
    shape = (*executor.inputs[mb].shape, hidden)
    samples: dict[str, list[float]] = {"F": [], "B": [], "Bi": [], "W": []}
    held_bytes: list[int] = []  # what one microbatch's forward keeps for backward

    def timed(kind: str, action: Action) -> None:
        start = clock()
        executor(action)
        samples[kind].append(clock() - start)

    for rep in range(CALIBRATION_REPS + 1):  # the first repetition warms up
        for split in (False, True):
            if not first:
                executor.arrived[(stage, mb)] = torch.randn(shape)
            common = dict(id="calibration", rank=0, stage=stage, microbatch=mb)
            timed("F", Action(kind="F", args=(("split", split),), **common))
            held_bytes.append(executor.held[(stage, mb)].bytes())
            if not last:
                executor.grad_arrived[(stage, mb)] = torch.randn(shape)
            timed("Bi" if split else "B", Action(kind="B", args=(("split", split),), **common))
            if split:
                timed("W", Action(kind="W", args=(("split", True),), **common))
            executor.outgoing.clear()
        if rep == 0:
            for values in samples.values():
                values.clear()
    costs = {cost_key(kind, stage, stages): statistics.median(v) for kind, v in samples.items()}
    return costs, max(held_bytes)


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
        costs, activations, one_way_s = prepare(ctx, runs, cfg.hidden, model)
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
    hidden: int,
    model: MiniGPT,
) -> tuple[dict[str, float], list[StageActivations], float | None]:
    """Before the clock: the stage costs, the p2p latency, and an untimed step of each
    schedule (the allocator reaches its peak footprint, every channel carries a message)."""
    params = ctx.params
    # Stage costs, all ranks at once, in CPU seconds: what each op costs a core when
    # the ranks share the cores (caches trashed by the switches included).
    costs: dict[str, float] = {}
    activations: list[StageActivations] = []
    for schedule, (executor, _) in runs.items():
        virtual = params.shape(schedule).virtual_stages
        for stage in executor.stages:
            if cost_key("F", stage, virtual) in costs:
                continue
            sampler, executor.sample = executor.sample, None
            stage_cost, held = stage_costs(
                executor,
                stage,
                virtual,
                first=stage == 0,
                last=stage == virtual - 1,
                hidden=hidden,
                clock=time.process_time,
            )
            costs.update(stage_cost)
            activations.append(StageActivations(stages=virtual, stage=stage, bytes=held))
            executor.sample = sampler
            executor.held.clear()
    dist.barrier()
    one_way_s = p2p_seconds(ctx, params.activation_bytes)
    model.zero_grad(set_to_none=True)
    for executor, actions in runs.values():
        sampler, executor.sample = executor.sample, None
        executor.prepost(actions)
        for action in actions:
            handle(executor, action)
        executor.finish()
        executor.sample = sampler
    model.zero_grad(set_to_none=True)
    return costs, activations, one_way_s


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
