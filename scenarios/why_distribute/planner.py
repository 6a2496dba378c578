"""The 3D planner: every DP × TP × PP layout that fits, timed, ranked by time and by cost.

Lesson 0's second half (issue 17, docs/references.md "Why distribute, 3D").
For N GPUs in nodes of G, it tries every n = N, N/2, N/4… GPUs (fewer GPUs can be
the cheaper plan), every way to write n = t·p·d with t dividing the heads and p at
most the layers (and PP_MAX), one or two model chunks per pipeline rank
(interleaving), each recomputation and each ZeRO stage (ZeRO-2/3 only without a
pipeline, as Megatron and DeepSpeed allow), with d·b sequences at most the global
batch. A layout *fits* when the busiest GPU's bytes (footprint.training_bytes)
are within the GPU's memory. Each fitting layout's step is costed part by part
(scenarios.why_distribute.costs) and, for a layout's shape (n, t, p, d), its
fastest variant kept: on the same GPUs time and cost rank alike.

Timing, two ways:
- a closed form for every shape (costs.closed_form_pipeline), to rank them all;
- the project's simulator for the best ones by time and by cost
  (SIMULATE_TOP of each, plus the one recommended): the pipeline's Program built
  by the pipeline lesson's own schedules (1F1B, or interleaved 1F1B) with each
  stage's costs, simulated on the profile's links. A step of m microbatches is
  simulated at m when m ≤ 2p, else at p and 2p and extended linearly (a 1F1B
  pipeline in its steady state adds the same time per microbatch; the lesson's
  tests check it against simulating all m; interleaved: from 3p and 4p, after its
  longer warm-up). The simulations stop at
  SIMULATED_ACTIONS Actions in all, so `predict` answers in well under a second;
  a plan says whether it was simulated.

`train_days` = tokens / (tokens per step / step time). The recommended plan is the
cheapest that meets the deadline, else the fastest. Nothing here says "TP inside
a node": that shape comes out of the link speeds.

Imports: runtime's pure part, the pipeline lesson's schedules, the lesson's modules.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache

from runtime.sim import formulas
from runtime.sim.program import Program
from runtime.sim.simulate import simulate
from scenarios.pipeline.schedules import Shape
from scenarios.pipeline.schedules import build as build_schedule
from scenarios.why_distribute import costs
from scenarios.why_distribute.costs import Problem
from scenarios.why_distribute.footprint import RECOMPUTE, Layout, training_bytes

PP_MAX = 64
SIMULATE_TOP = 8
SIMULATED_ACTIONS = 12_000
PIPELINE_ZERO = ("ddp", "zero1")  # ZeRO-2/3 shard what a pipeline's microbatches reuse


@dataclass(frozen=True)
class Plan:
    layout: Layout
    memory: dict[str, float]  # bytes on the busiest GPU, by category
    fits: bool
    step_s: float
    parts: dict[str, float]  # seconds per step: compute, tp, pipeline, dp, optimizer
    steps: float  # optimizer steps to train on every token
    price: float  # dollars per GPU-hour
    setup_hours: float
    margin: float
    simulated: bool = False

    @property
    def gpus(self) -> int:
        return self.layout.gpus

    @property
    def train_s(self) -> float:
        return self.steps * self.step_s

    @property
    def train_days(self) -> float:
        return self.train_s / 86400

    @property
    def cost_usd(self) -> float:
        return self.gpus * self.price * (self.train_s / 3600 + self.setup_hours) * self.margin

    @property
    def name(self) -> str:
        lay = self.layout
        out = f"tp{lay.tp}·pp{lay.pp}·dp{lay.dp}" + (f"·v{lay.chunks}" if lay.chunks > 1 else "")
        out += f" {lay.zero}"
        return out + (f" rc={lay.recompute}" if lay.recompute != "none" else "")

    @property
    def shape_key(self) -> tuple[int, int, int]:
        return (self.layout.tp, self.layout.pp, self.layout.dp)


@dataclass(frozen=True)
class Planning:
    by_time: list[Plan]  # one per shape, fastest first
    by_cost: list[Plan]  # the same plans, cheapest first
    recommended: Plan | None
    layouts_tried: int
    layouts_fitting: int
    dp_only: Plan  # plain DDP on every GPU: what data parallelism alone would hold


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
    for n in gpu_counts(problem.gpus):
        for tp in _divisors(n):
            if shape.heads % tp:
                continue
            for pp in _divisors(n // tp):
                dp = n // (tp * pp)
                if pp > min(shape.layers, PP_MAX) or dp * b > problem.global_batch:
                    continue
                m = math.ceil(problem.global_batch / (dp * b))
                chunks = (1, 2) if pp > 1 and m % pp == 0 and shape.layers >= 2 * pp else (1,)
                for v in chunks:
                    for recompute in RECOMPUTE:
                        for zero in PIPELINE_ZERO if pp > 1 else formulas.ZERO_STAGES:
                            yield Layout(tp, pp, dp, zero, recompute, b, m, v)


def evaluate(problem: Problem, layout: Layout) -> Plan:
    """The plan of `layout`, timed by the closed form."""
    memory = training_bytes(problem.psi, problem.shape, problem.precision, layout)
    fits = sum(memory.values()) <= problem.gpu.memory_bytes
    stages = costs.stage_costs(problem, layout)
    pipe = costs.closed_form_pipeline(stages, layout, costs.p2p_seconds(problem, layout))
    return _plan(problem, layout, memory, fits, pipe, stages, simulated=False)


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
    parts = {
        "compute": m * layers * (one.forward + one.backward),
        "tp": m * layers * (one.tp_forward + one.tp_backward),
        "pipeline": max(0.0, pipe - work),
        "dp": costs.dp_seconds(problem, layout),
        "optimizer": costs.optimizer_seconds(problem, layout),
    }
    step = pipe + parts["dp"] + parts["optimizer"]
    tokens_per_step = layout.dp * m * layout.micro * problem.shape.seq
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
        memory = training_bytes(problem.psi, problem.shape, problem.precision, layout)
        if sum(memory.values()) > problem.gpu.memory_bytes:
            continue  # only a layout that fits is worth costing
        candidate = evaluate(problem, layout)
        fitting += 1
        known = best.get(candidate.shape_key)
        if known is None or candidate.step_s < known.step_s:
            best[candidate.shape_key] = candidate
    plans = list(best.values())
    budget = SIMULATED_ACTIONS
    chosen: set[tuple[int, int, int]] = set()
    ranked = _by_time(plans)[:keep_top] + _by_cost(plans)[:keep_top]
    recommended = _recommend(problem, plans)
    if recommended is not None:
        ranked.insert(0, recommended)  # the plan the lesson prices is simulated first
    for candidate in ranked:
        key = candidate.shape_key
        if key in chosen or simulation_size(candidate.layout) > budget:
            continue
        chosen.add(key)
        timed, counted = simulated(problem, candidate)
        budget -= counted
        best[key] = timed
    plans = list(best.values())
    n, b = problem.gpus, problem.micro
    m = max(1, math.ceil(problem.global_batch / (n * b)))
    dp_only = evaluate(problem, Layout(1, 1, n, "ddp", "none", b, m))
    return Planning(
        _by_time(plans), _by_cost(plans), _recommend(problem, plans), tried, fitting, dp_only
    )


def _by_time(plans: list[Plan]) -> list[Plan]:
    return sorted(plans, key=lambda p: (p.train_s, p.gpus, p.name))


def _by_cost(plans: list[Plan]) -> list[Plan]:
    return sorted(plans, key=lambda p: (p.cost_usd, p.train_s, p.name))


def _recommend(problem: Problem, plans: list[Plan]) -> Plan | None:
    """The cheapest plan that meets the deadline, else the fastest."""
    on_time = [p for p in plans if p.train_s <= problem.deadline_s]
    if on_time:
        return _by_cost(on_time)[0]
    return _by_time(plans)[0] if plans else None


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))
