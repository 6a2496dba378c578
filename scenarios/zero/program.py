"""Lesson 2's Program: each stage's steps as Actions, and their compute costs before a run.

`build(params)`: per stage of the `stage` list, a barrier, then on every rank and in
every step the items of `step_plan` (a unit's forward, backward and collectives, in
the order the stage runs them, then Adam), each made an Action by `plan_action`.
Lesson 0's demonstration (scenarios.why_distribute.demo) builds its own series from
the same `step_plan` and `plan_action`, and costs them with `estimate`.

Imports: runtime's pure part and the lesson's params and memory accounting (the UI
imports this).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from runtime.sim.effects import SYNCED
from runtime.sim.program import Action, Program, barriers
from scenarios.shape import FP32
from scenarios.zero import memory
from scenarios.zero.params import STAGES, ZeroParams
from scenarios.zero.rates import ZeroRates

# The cost key of FSDP2's first Adam step in a process, which pays DTensor's first calls.
FIRST_FSDP2_ADAM = "opt.fsdp2.first"
# The kinds of a unit's collectives in a step (its other items are computes).
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


def build(params: ZeroParams) -> Program:
    n = params.ranks
    group = tuple(range(n))  # one shared tuple: the simulator keys collectives by it
    numels = memory.program_units(params)
    program = Program(n, name="zero")
    for stage in params.stage:
        program.extend(barriers(f"{stage}/start", group, series=stage, phase=stage))
        plan = step_plan(stage, len(numels))
        for r in range(n):
            for t in range(params.steps):
                program.extend(plan_action(stage, t, r, item, numels, group) for item in plan)
    return program


def plan_action(
    stage: str,
    t: int,
    rank: int,
    item: tuple[str, int | None, str, str],
    numels: list[int],
    group: Sequence[int],
) -> Action:
    """The Action of one item of `step_plan` in step t on `rank`: a unit's collective over
    `group`, or a compute keyed by its unit (a unit's F and B cost the same in every
    stage; Adam does not)."""
    kind, u, label, name = item
    where = f"u{u}" if u is not None else ""
    action_id = f"{stage}/s{t}/{name}{where}@r{rank}"
    if kind in COLLECTIVES and u is not None:
        return Action(
            action_id,
            rank,
            kind,
            label,
            bytes=numels[u] * FP32,
            group=group,  # a tuple, or a range standing for a million ranks (lumped)
            algorithm="ring",
            series=stage,
            step=t,
            chunk=u,
            phase=stage,
        )
    key = cost_key(stage, t, kind, u)
    # FSDP2's forward and backward gather and scatter unit by unit inside torch: every
    # rank's ends when the slowest rank's does (runtime.sim.simulate's `synced`).
    synced = stage == "fsdp2" and kind in ("F", "B")
    return Action(
        action_id, rank, kind, label, cost_key=key, series=stage, step=t, chunk=u, phase=stage,
        **({"group": group, "effects": SYNCED} if synced else {}),
    )  # fmt: skip


def cost_key(stage: str, t: int, kind: str, u: int | None) -> str | None:
    """The cost key of a compute item of `step_plan` in step t (None for a unit's
    collective, costed by its formula): a unit's F and B cost the same in every stage,
    Adam is keyed by its stage, and FSDP2's first Adam has a key of its own."""
    if kind in COLLECTIVES and u is not None:
        return None
    key = f"{kind}.{stage}" if u is None else f"{kind}.u{u}"
    if key == "opt.fsdp2" and t == 0:
        key = FIRST_FSDP2_ADAM  # DTensor's first calls: a cost of its own
    return key


def step_plan(stage: str, units: int) -> list[tuple[str, int | None, str, str]]:
    """One step of `stage` on a rank: (kind, unit, label, name in the id) in order.
    ZeRO-3 gathers a unit twice per step: the second one's name says so."""
    forward, backward = range(units), range(units - 1, -1, -1)

    def on(kind: str, u: int, label: str = "", name: str = "") -> tuple[str, int, str, str]:
        return (kind, u, label or f"{kind} u{u}", name or kind)

    if stage == "fsdp2":
        plan = [("F", None, "F (fully_shard)", "F"), ("B", None, "B (fully_shard)", "B")]
    elif stage == "zero3":
        plan = [x for u in forward for x in (on("all_gather", u, f"AG u{u}"), on("F", u))]
        for u in backward:
            plan += [on("all_gather", u, f"AG u{u} (again)", "all_gather_bw"), on("B", u)]
            plan.append(on("reduce_scatter", u, f"RS u{u}"))
    else:
        plan = [on("F", u) for u in forward]
        for u in backward:
            plan.append(on("B", u))
            if stage == "ddp":
                plan.append(on("all_reduce", u, f"AR u{u}"))
            elif stage == "zero2":
                plan.append(on("reduce_scatter", u, f"RS u{u}"))
        if stage == "zero1":
            plan += [on("reduce_scatter", u, f"RS u{u}") for u in backward]
    plan.append(("opt", None, "Adam", "opt"))
    if stage in ("zero1", "zero2"):
        plan += [on("all_gather", u, f"AG u{u}") for u in forward]
    return plan


def estimate(params: ZeroParams, model: CostModel) -> CostModel:
    """Compute costs before a run has timed them, from the compute rates (runtime.sim.compute:
    calibrated on this machine, or a datasheet's): a unit's forward is its operators'
    overhead plus 2·elements·tokens FLOPs (+ attention in a block) plus its activations
    through the elementwise operators, its backward twice the FLOPs; Adam per element
    each rank updates and per tensor it steps. Elements follow Ψ, so a 7B model costs a 7B model's FLOPs
    whatever the shape knobs."""
    rates = model.rates or TYPICAL_CPU
    shape = params.model
    tokens = params.microbatch * shape.seq
    numels = memory.program_units(params)
    estimated: dict[str, float] = {}
    for u, numel in enumerate(numels):
        blocks = 1 if 0 < u < len(numels) - 1 else (shape.layers if len(numels) == 1 else 0)
        flops = 2 * numel * tokens + 4 * shape.seq * shape.hidden * tokens * blocks
        calls = max(blocks, 1)  # a lumped unit launches every block's operators
        # Activation elements through the elementwise operators: tokens·h per block; the
        # embedding's and the head's outputs, a third as much (as ComputeRates.linear_seconds).
        width = shape.hidden if u == 0 else shape.vocab
        elements = tokens * shape.hidden * blocks if blocks else tokens * width / 3
        estimated[f"F.u{u}"] = (
            calls * rates.forward_overhead_s
            + flops / rates.forward_flops_per_s
            + elements * rates.forward_s_per_element
        )
        estimated[f"B.u{u}"] = (
            calls * rates.backward_overhead_s
            + 2 * flops / rates.backward_flops_per_s
            + elements * rates.backward_s_per_element
        )
    # FSDP2 runs its collectives inside its forward and backward (one span each here):
    # the same FLOPs, the bytes of ZeRO-3's all-gathers (and reduce-scatters) at the
    # link's bandwidth, and its per-tensor overheads (the lesson's own rates: calibrated
    # by its probe, scenarios.zero.rates).
    _, beta = model.group_link(range(params.ranks))
    moved = sum(numels) * FP32 * (params.ranks - 1) / params.ranks * beta
    sharded = ZeroRates.of(model.rates)
    forward, backward, adam = sharded.sharded_seconds(shape.parameter_tensors)
    estimated["F.fsdp2"] = sum(estimated[f"F.u{u}"] for u in range(len(numels))) + forward + moved
    estimated["B.fsdp2"] = (
        sum(estimated[f"B.u{u}"] for u in range(len(numels))) + backward + 2 * moved
    )
    for stage in STAGES:
        local = params.psi if stage == "ddp" else params.psi / params.ranks
        # The hand-made stages step one flat tensor per unit; FSDP2 one fused Adam over
        # its DTensors, its per-tensor cost calibrated apart (`adam`).
        tensors = 1 if stage == "fsdp2" else len(numels)
        estimated[f"opt.{stage}"] = rates.adam_seconds(local, tensors) + adam * (stage == "fsdp2")
    first = shape.parameter_tensors * sharded.sharded_first_adam_s
    estimated[FIRST_FSDP2_ADAM] = estimated["opt.fsdp2"] + first
    return replace(model, compute={**model.compute, **estimated})
