"""Rank side of lesson 4: the TP step by hand and by torch, timed, checked against one process.

Called inside each rank process by runtime.engine.worker with a RankContext of TPParams
and this rank's Actions (grouped by `series`: "hand", "torch"):

1. The tied MiniGPT from its seed (the same weights on every rank), the batch,
   and the one-process reference: its loss and every gradient.
2. Memory, untimed: the bytes one block keeps for backward, through autograd's
   saved-tensor hooks (parameters excluded, each storage once), for the whole
   block (no TP), the TP block and the TP+SP block (scenarios.tensor_parallel.memory).
3. The hand-written step (scenarios.tensor_parallel.model): one untimed warm-up,
   then the timed one. Every collective goes through the Tracer; afterwards its
   records are matched one by one with the Program's collective Actions (kind,
   place, layer, direction: a mismatch is an error, so the counts the lesson
   reports are the Program's, checked), and each becomes a Span; each compute
   segment is the time between two collectives (its CPU seconds refine the
   prediction).
4. torch's step (scenarios.tensor_parallel.torch_tp), a warm-up then a timed
   forward and backward, its collectives counted by CommDebugMode.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby

import torch
import torch.distributed as dist
from torch import nn

from runtime.engine.models import GPTConfig, MiniGPT, batch
from runtime.engine.worker import RankContext
from runtime.sim.program import Action
from scenarios.tensor_parallel import torch_tp
from scenarios.tensor_parallel.layers import Event, Tracer
from scenarios.tensor_parallel.model import TPBlock, TPMiniGPT, tie
from scenarios.tensor_parallel.params import SeriesRun, TPParams, TPResult
from scenarios.tensor_parallel.program import LOSS_PLACES, Item, plan_counts

Step = Callable[[], torch.Tensor]


def run_rank(ctx: RankContext[TPParams]) -> TPResult:
    # torch's SequenceParallel hooks warn on every backward where no input needs a grad.
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    params = ctx.params
    cfg = GPTConfig.from_shape(params.model)
    inputs, targets = batch(cfg, params.microbatch_size)
    model = tie(MiniGPT(cfg))
    loss = model(inputs, targets)
    loss.backward()
    grads = {name: p.grad.detach() for name, p in model.named_parameters()}
    ref = Reference(model, loss.item(), grads, inputs, targets)
    activation_bytes = measure_activations(model, params, ctx.rank)
    by_series = {name: list(acts) for name, acts in groupby(ctx.actions, key=lambda a: a.series)}
    costs: dict[str, list[float]] = {}
    # Built and warmed up (allocator, gloo's pairs, DTensor's first dispatch) before the
    # clock starts: the timeline shows the timed steps only.
    timed = {
        name: (prepare_hand if name == "hand" else prepare_torch)(ctx, ref, costs)
        for name in params.implementation
    }
    ctx.start_clock()
    runs = {name: run(by_series[name]) for name, run in timed.items()}
    return TPResult(
        compute_costs={key: statistics.median(v) for key, v in costs.items()},
        series=runs,
        activation_bytes=activation_bytes,
    )


@dataclass(frozen=True)
class Reference:
    """The one-process model and what it computed on the batch."""

    model: MiniGPT
    loss: float
    grads: dict[str, torch.Tensor]
    inputs: torch.Tensor
    targets: torch.Tensor


Timed = Callable[[list[Action]], SeriesRun]


def _barrier(ctx: RankContext[TPParams], actions: list[Action]) -> list[Action]:
    """Run the series' start barrier (a Span like any Action); the rest of its Actions."""
    start = [a for a in actions if a.kind == "barrier"]
    ctx.execute(start, lambda _action: dist.barrier())
    return [a for a in actions if a.kind != "barrier"]


def prepare_hand(
    ctx: RankContext[TPParams], ref: Reference, costs: dict[str, list[float]]
) -> Timed:
    """The hand-written TP model, warmed up; the timed step it runs on its Actions."""
    params = ctx.params
    tracer = Tracer(params.tp, ctx.rank)
    model = TPMiniGPT(ref.model, tracer, sp=params.sequence_parallel, mistake=params.mistake)

    def step() -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        loss = model(ref.inputs, ref.targets)
        loss.backward()
        model.sync_replicated_grads()
        return loss

    tracer.recording = False
    step()
    tracer.recording = True
    return lambda actions: run_hand(ctx, actions, model, step, ref, costs)


def run_hand(
    ctx: RankContext[TPParams],
    actions: list[Action],
    model: TPMiniGPT,
    step: Step,
    ref: Reference,
    costs: dict[str, list[float]],
) -> SeriesRun:
    params, tracer = ctx.params, model.tracer
    steps = _barrier(ctx, actions)
    start, cpu_start = time.perf_counter_ns(), time.thread_time_ns()
    loss = step()
    end, cpu_end = time.perf_counter_ns(), time.thread_time_ns()
    record_hand(ctx, steps, tracer.events, (start, cpu_start), (end, cpu_end), costs)
    items = [Item(e.kind, e.place, e.layer, e.direction) for e in tracer.events]
    counts = plan_counts(items, params.model.layers)
    scoped = {
        scope: {k.split(".", 1)[1]: v for k, v in counts.items() if k.startswith(scope + ".")}
        for scope in ("layer", "loss", "total")
    }
    sizes = {e.bytes for e in tracer.events if e.place not in (*LOSS_PLACES, "grads")}
    diffs = model.grad_diffs(ref.grads)
    worst = max(diffs, key=diffs.__getitem__)
    return SeriesRun(
        loss=loss.item(),
        loss_diff=abs(loss.item() - ref.loss),
        grad_diff=diffs[worst],
        worst_parameter=worst,
        counts={k: int(v) for k, v in scoped["total"].items()},
        layer_counts=scoped["layer"],
        loss_counts={k: int(v) for k, v in scoped["loss"].items()},
        collective_bytes=sorted(sizes),
    )


def record_hand(
    ctx: RankContext[TPParams],
    actions: list[Action],
    events: list[Event],
    start: tuple[int, int],
    end: tuple[int, int],
    costs: dict[str, list[float]],
) -> None:
    """One Span per Action: a collective's from its record, a compute segment's from the
    end of the collective before it to the start of the one after (CPU seconds to `costs`)."""
    collectives = [a for a in actions if a.is_collective]
    ran = [(e.kind, e.place, e.layer, e.direction) for e in events]
    planned = [(a.kind, a.arg("place"), a.arg("layer"), a.arg("direction")) for a in collectives]
    if ran != planned:
        first = next(
            (i for i, (r, p) in enumerate(zip(ran, planned, strict=False)) if r != p), None
        )
        raise RuntimeError(
            f"the hand-written step ran {len(ran)} collectives where the Program has "
            f"{len(planned)}; first difference at #{first}: "
            f"{ran[first] if first is not None and first < len(ran) else '-'} vs "
            f"{planned[first] if first is not None and first < len(planned) else '-'}"
        )
    wall, cpu = start
    index = 0
    for action in actions:
        if action.is_collective:
            event = events[index]
            index += 1
            ctx.record(action, event.start_ns, event.end_ns)
            wall, cpu = event.end_ns, event.cpu_end_ns
            continue
        following = events[index] if index < len(events) else None
        stop = (following.start_ns, following.cpu_start_ns) if following else end
        ctx.record(action, wall, stop[0])
        costs.setdefault(action.cost_key or action.kind, []).append((stop[1] - cpu) / 1e9)


def prepare_torch(
    ctx: RankContext[TPParams], ref: Reference, costs: dict[str, list[float]]
) -> Timed:
    """torch's parallelized model, warmed up; the timed step it runs on its Actions."""
    params = ctx.params
    model, _mesh = torch_tp.build(
        ref.model, params.tp, sp=params.sequence_parallel, mistake=params.mistake
    )
    model.zero_grad(set_to_none=True)
    # The warm-up step counts DTensor's collectives; the timed one runs without counting.
    _, counts = torch_tp.step(model, ref.inputs, ref.targets)
    model.zero_grad(set_to_none=True)
    return lambda actions: run_torch(ctx, actions, model, ref, costs, counts)


def run_torch(
    ctx: RankContext[TPParams],
    actions: list[Action],
    model: nn.Module,
    ref: Reference,
    costs: dict[str, list[float]],
    counts: dict[str, dict[str, int]],
) -> SeriesRun:
    params = ctx.params
    forward, backward = _barrier(ctx, actions)
    timed: dict[str, tuple[int, int, int, int]] = {}
    loss, _ = torch_tp.step(model, ref.inputs, ref.targets, clock=timed, count=False)
    for action, kind in ((forward, "forward"), (backward, "backward")):
        wall0, wall1, cpu0, cpu1 = timed[kind]
        ctx.record(action, wall0, wall1)
        # Wall seconds: torch's collectives run inside this one Action (its CPU clock
        # would leave out the time spent waiting on them), less the sharing of the cores
        # among the ranks, which the simulator adds back itself.
        share = min(1.0, (os.cpu_count() or 1) / ctx.world_size)
        costs.setdefault(action.cost_key or action.kind, []).append((wall1 - wall0) * share / 1e9)
        del cpu0, cpu1
    value = float(loss.full_tensor().item() if hasattr(loss, "full_tensor") else loss.item())
    grads = torch_tp.full_grads(model, params.model.hidden, params.tp, params.mistake)
    diffs: dict[str, float] = {}
    for name, grad in grads.items():
        name = "embedding.tokens.weight" if name == "head.proj.weight" else name  # tied
        diffs[name] = max(diffs.get(name, 0.0), (grad - ref.grads[name]).abs().max().item())
    worst = max(diffs, key=diffs.__getitem__)
    return SeriesRun(
        loss=value,
        loss_diff=abs(value - ref.loss),
        grad_diff=diffs[worst],
        worst_parameter=worst,
        counts={f"{d}.{k}": n for d, by_kind in counts.items() for k, n in by_kind.items()},
        layer_counts={},
        loss_counts={},
        collective_bytes=[],
    )


def measure_activations(reference: MiniGPT, params: TPParams, rank: int) -> dict[str, int]:
    """Bytes block 0 keeps for backward, fp32: whole (none), TP, TP + SP; every rank runs
    the TP blocks' collectives together (untimed, unrecorded)."""
    cfg = reference.cfg
    x = torch.randn(
        params.microbatch_size, cfg.seq, cfg.hidden, generator=torch.Generator().manual_seed(7)
    )
    tracer = Tracer(params.tp, rank)
    tracer.recording = False
    blocks: dict[str, tuple[nn.Module, torch.Tensor]] = {"none": (reference.blocks[0], x)}
    for key, sp in (("tp", False), ("tp_sp", True)):
        if sp and cfg.seq % params.tp:
            continue
        block = TPBlock(reference.blocks[0], 0, tracer, heads=cfg.heads, sp=sp, mistake="none")
        blocks[key] = (block, tracer.seq_shard(x) if sp else x)
    return {key: saved_bytes(block, inp) for key, (block, inp) in blocks.items()}


def saved_bytes(block: nn.Module, x: torch.Tensor) -> int:
    """What autograd keeps for backward of one forward of `block`: parameters excluded,
    each storage once (a view saved twice is one allocation)."""
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = block(x.clone().requires_grad_(True))
    del out
    return sum(storages.values())
