"""The 4D planner: every TP × CP × PP × DP layout that fits, timed, ranked by time and by cost.

Lesson 0's second half (issue 17 and 38, docs/references.md "Why distribute, 3D").
For N GPUs in nodes of G, it tries every n = N, N/2, N/4… GPUs, every way to write
n = t·c·p·d with t dividing the heads, c (context parallelism) only for sequences
of CP_MIN_SEQ tokens and more, p at most the layers (and PP_MAX), one or two
model chunks per pipeline rank (interleaving), each recomputation (or the one
asked) and each ZeRO stage (ZeRO-2/3 only without a pipeline, as Megatron and
DeepSpeed allow), with d·b sequences at most the global batch. A layout *fits*
when the busiest GPU's bytes (footprint.training_bytes) are within the GPU's
memory. Each fitting layout's step is costed part by part
(scenarios.why_distribute.costs) and, for a layout's shape (t, c, p, d), its
fastest variant kept: on the same GPUs time and cost rank alike.

`gpus` is the cluster the learner has: the recommended plan is the fastest on all
of it; the cheapest plan on any subset (meeting the deadline, if one is given) is
the alternative. A layout typed in `layout` is costed alone (`pinned`); one that
names `deepspeed` is timed by replaying DeepSpeed's own pipeline schedule
(`deepspeed_seconds`), which the search never tries.

Timing, two ways:
- a closed form for every shape (costs.closed_form_pipeline), to rank them all;
- the project's simulator for the best ones by time and by cost
  (SIMULATE_TOP of each, plus the two the lesson prices): the pipeline's Program
  built by the pipeline lesson's own schedules (1F1B, or interleaved 1F1B) with
  each stage's costs, simulated on the profile's links. A step of m microbatches
  is simulated at m when m ≤ 2p, else at p and 2p and extended linearly (a 1F1B
  pipeline in its steady state adds the same time per microbatch; the lesson's
  tests check it against simulating all m; interleaved: from 3p and 4p, after its
  longer warm-up). The simulations stop at SIMULATED_ACTIONS Actions in all, so
  `predict` answers in well under a second; a plan says whether it was simulated.

Each plan reports its model-FLOPs utilisation (6Ψ + causal attention per token:
MFU) and its hardware-FLOPs utilisation (what the GPUs execute, recomputation
included: HFU), never one for the other. `train_days` = tokens / (tokens per
step / step time). Nothing here says "TP inside a node": that shape comes out of
the link speeds.

Imports: runtime's pure part, the pipeline lesson's schedules, the lesson's modules.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from functools import lru_cache

from runtime.sim import formulas
from runtime.sim.program import Program
from runtime.sim.simulate import simulate
from scenarios.pipeline.schedules import Shape
from scenarios.pipeline.schedules import build as build_schedule
from scenarios.why_distribute import costs, deepspeed
from scenarios.why_distribute.costs import Problem
from scenarios.why_distribute.footprint import RECOMPUTE, Layout, training_bytes
from scenarios.why_distribute.plans import Plan, Planning

PP_MAX = 64
CP_MAX = 32  # ring attention beyond this many ranks: blocks too small to hide a hop
CP_MIN_SEQ = 16384  # below it a sequence split buys nothing attention does not already
SIMULATE_TOP = 8
SIMULATED_ACTIONS = 12_000
PIPELINE_ZERO = ("ddp", "zero1")  # ZeRO-2/3 shard what a pipeline's microbatches reuse


def gpu_counts(total: int) -> list[int]:
    """N, N/2, N/4… while whole: using fewer GPUs is sometimes the cheaper plan."""
    out, n = [], total
    while n >= 1:
        out.append(n)
        if n % 2:
            break
        n //= 2
    return out


def layouts(problem: Problem) -> Iterator[Layout]:
    shape, b = problem.shape, problem.micro
    recomputes = RECOMPUTE if problem.recompute == "auto" else (problem.recompute,)
    for n in gpu_counts(problem.gpus):
        for tp in _divisors(n):
            if shape.heads % tp:
                continue
            for cp in _divisors(n // tp):
                if cp > 1 and (cp > CP_MAX or shape.seq < CP_MIN_SEQ or shape.seq % (2 * cp)):
                    continue
                for pp in _divisors(n // (tp * cp)):
                    dp = n // (tp * cp * pp)
                    if pp > min(shape.layers, PP_MAX) or dp * b > problem.global_batch:
                        continue
                    m = math.ceil(problem.global_batch / (dp * b))
                    chunks = (1, 2) if pp > 1 and m % pp == 0 and shape.layers >= 2 * pp else (1,)
                    for v in chunks:
                        for recompute in recomputes:
                            for zero in PIPELINE_ZERO if pp > 1 else formulas.ZERO_STAGES:
                                yield Layout(tp, pp, dp, zero, recompute, b, m, v, cp)


def evaluate(problem: Problem, layout: Layout, memory: dict[str, float] | None = None) -> Plan:
    """The plan of `layout`, timed by the closed form (`memory`: its bytes, if known)."""
    if memory is None:
        memory = training_bytes(problem.psi, problem.shape, problem.precision, layout,
                                flash=problem.flash)  # fmt: skip
    fits = sum(memory.values()) <= problem.gpu.memory_bytes
    stages = costs.stage_costs(problem, layout)
    if layout.engine == "deepspeed" and layout.pp > 1:
        pipe = deepspeed_seconds(problem, layout, stages)
        return _plan(problem, layout, memory, fits, pipe, stages, simulated=True)
    pipe = costs.closed_form_pipeline(stages, layout, costs.p2p_seconds(problem, layout))
    return _plan(problem, layout, memory, fits, pipe, stages, simulated=False)


def deepspeed_seconds(problem: Problem, layout: Layout, stages: list[tuple[float, float]]) -> float:
    """DeepSpeed's TrainSchedule replayed (scenarios.why_distribute.deepspeed): each
    tensor sent as a 1/t slice over its stage boundary, blocking both streams, then
    all-gathered over the receiver's TP group; at the end the tied embedding's gradient
    all-reduced between the first and the last stage."""
    nbytes = costs.activation_message_bytes(problem, layout)
    model = costs.pipeline_model(problem, layout)
    gather = problem.tp_all_reduce(layout.tp, nbytes * layout.tp) / 2  # half a ring all-reduce
    hops = [model.p2p_time(r, r + 1, nbytes) + gather for r in range(layout.pp - 1)]
    shape, inner = problem.shape, layout.tp * layout.cp
    tied = shape.vocab * shape.hidden / layout.tp * problem.elem if shape.mlp == "gelu" else 0
    ends = range(0, layout.pp * inner, (layout.pp - 1) * inner)
    return deepspeed.makespan(stages, layout.microbatches, hops) + problem.all_reduce(ends, tied)


def _plan(
    problem: Problem,
    layout: Layout,
    memory: dict[str, float],
    fits: bool,
    pipe: float,
    stages: list[tuple[float, float]],
    *,
    simulated: bool,
) -> Plan:
    one = costs.layer_costs(problem, layout)
    m = layout.microbatches
    layers = layout.stage_layers(problem.shape.layers)
    work = m * costs.busiest_rank(stages, layout.pp)
    tp = m * layers * (one.tp_forward + one.tp_backward)
    cp = m * layers * (one.cp_forward + one.cp_backward)
    parts = {
        "compute": work - tp - cp,  # the busiest rank's: its layers, the head if it has it
        "tp": tp,
        "cp": cp,
        "pipeline": max(0.0, pipe - work),
        "dp": costs.exposed_dp_seconds(problem, layout, work - tp - cp),
        "optimizer": costs.optimizer_seconds(problem, layout),
    }
    step = pipe + parts["dp"] + parts["optimizer"]
    tokens_per_step = layout.dp * m * layout.micro * problem.shape.seq
    group = layout.tp * layout.cp  # the GPUs sharing one microbatch of one stage
    head = costs.head_costs(problem, layout)[2]
    executed = (
        layout.dp
        * m
        * group
        * (problem.shape.layers * (one.flops_forward + one.flops_backward) + head)
    )
    return Plan(
        layout,
        memory,
        fits,
        step,
        parts,
        problem.tokens / tokens_per_step,
        problem.price,
        problem.setup_hours,
        problem.margin,
        simulated,
        tokens_per_step * problem.shape.model_flops_per_token(),
        executed,
        problem.gpu.peak_flops,
    )


def simulated(problem: Problem, plan: Plan) -> tuple[Plan, int]:
    """The plan timed by the simulator, and how many Actions that simulated."""
    layout = plan.layout
    stages = costs.stage_costs(problem, layout)
    if layout.pp == 1:
        return replace(plan, simulated=True), 0  # one stage: m·(F + B), nothing to simulate
    v, p, m = layout.chunks, layout.pp, layout.microbatches
    schedule = "interleaved" if v > 1 else "1f1b"
    nbytes = costs.activation_message_bytes(problem, layout)
    model = costs.pipeline_model(problem, layout)
    virtual = p * v
    table = {f"F.s{s}of{virtual}": f for s, (f, _) in enumerate(stages)}
    table |= {f"B.s{s}of{virtual}": b for s, (_, b) in enumerate(stages)}
    model = replace(model, compute=table)
    counted = 0

    def makespan(microbatches: int) -> float:
        nonlocal counted
        program = _program(schedule, p, microbatches, v, nbytes)
        counted += len(program)
        return simulate(program, model).makespan

    low, high = extension_points(layout)
    if m <= high:
        pipe = makespan(m)
    else:
        before, last = makespan(low), makespan(high)
        pipe = last + (m - high) * (last - before) / (high - low)
    return _plan(problem, layout, plan.memory, plan.fits, pipe, stages, simulated=True), counted


def extension_points(layout: Layout) -> tuple[int, int]:
    """The two microbatch counts a long step is extended from: p and 2p under 1F1B,
    whose steady state starts after p; 3p and 4p when interleaved, whose warm-up
    reaches its steady state later (both checked against simulating all m)."""
    p = layout.pp
    return (p, 2 * p) if layout.chunks == 1 else (3 * p, 4 * p)


def simulation_size(layout: Layout) -> int:
    """About how many Actions `simulated` builds for this layout (a receive, a compute
    and a send for each F and B of each chunk)."""
    if layout.pp == 1:
        return 0
    low, high = extension_points(layout)
    m = layout.microbatches
    sims = (m,) if m <= high else (low, high)
    return sum(6 * layout.pp * layout.chunks * x for x in sims)


@lru_cache(maxsize=16)
def _program(schedule: str, stages: int, microbatches: int, chunks: int, nbytes: int) -> Program:
    return build_schedule(schedule, Shape(stages, microbatches, chunks, nbytes))


def plan(problem: Problem, *, keep_top: int = SIMULATE_TOP) -> Planning:
    """Every layout tried; the fitting ones timed, the best simulated, ranked."""
    best: dict[tuple[int, int, int], Plan] = {}
    tried = fitting = 0
    for layout in layouts(problem):
        tried += 1
        memory = training_bytes(problem.psi, problem.shape, problem.precision, layout,
                                flash=problem.flash)  # fmt: skip
        if sum(memory.values()) > problem.gpu.memory_bytes:
            continue  # only a layout that fits is worth costing
        candidate = evaluate(problem, layout, memory)
        fitting += 1
        known = best.get(candidate.shape_key)
        if known is None or candidate.step_s < known.step_s:
            best[candidate.shape_key] = candidate
    plans = list(best.values())
    budget = SIMULATED_ACTIONS
    chosen: set[tuple[int, int, int, int]] = set()
    ranked = _by_time(plans)[:keep_top] + _by_cost(plans)[:keep_top]
    for first in (_cheapest(problem, plans), _recommend(problem, plans)):
        if first is not None:
            ranked.insert(0, first)  # the plans the lesson prices are simulated first
    for candidate in ranked:
        key = candidate.shape_key
        if key in chosen or simulation_size(candidate.layout) > budget:
            continue
        chosen.add(key)
        timed, counted = simulated(problem, candidate)
        budget -= counted
        best[key] = timed
    plans = list(best.values())
    return Planning(
        _by_time(plans),
        _by_cost(plans),
        _recommend(problem, plans),
        tried,
        fitting,
        _dp_only(problem),
        _cheapest(problem, plans),
    )


def pinned(problem: Problem, layout: Layout) -> Planning:
    """Exactly `layout`: costed, simulated, recommended (the learner's params checked
    that it multiplies to the GPUs and fits)."""
    plan = evaluate(problem, layout)
    if layout.engine != "deepspeed" and simulation_size(layout) <= SIMULATED_ACTIONS:
        plan, _ = simulated(problem, plan)
    return Planning([plan], [plan], plan, 1, int(plan.fits), _dp_only(problem), None, True)


def _dp_only(problem: Problem) -> Plan:
    n, b = problem.gpus, problem.micro
    m = max(1, math.ceil(problem.global_batch / (n * b)))
    return evaluate(problem, Layout(1, 1, n, "ddp", "none", b, m))


def _by_time(plans: list[Plan]) -> list[Plan]:
    return sorted(plans, key=lambda p: (p.train_s, -p.gpus, p.name))


def _by_cost(plans: list[Plan]) -> list[Plan]:
    return sorted(plans, key=lambda p: (p.cost_usd, p.train_s, p.name))


def _recommend(problem: Problem, plans: list[Plan]) -> Plan | None:
    """The fastest plan on all the GPUs asked (the cluster the learner has); the fastest
    of any size if none fits on all of them."""
    whole = [p for p in plans if p.gpus == problem.gpus]
    return _by_time(whole or plans)[0] if plans else None


def _cheapest(problem: Problem, plans: list[Plan]) -> Plan | None:
    """The cheapest plan on any subset of the GPUs that meets the deadline (all of them
    without one): the alternative the report shows beside the recommendation."""
    on_time = [p for p in plans if p.train_s <= problem.deadline_s]
    return _by_cost(on_time)[0] if on_time else None


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))
