"""Lesson 2: ZeRO and FSDP — where the memory of training goes, and what each stage removes.

The `zero` lesson, top to bottom: its params, its narrative (with every text a learner reads, in texts.toml), its Program, its
metrics. MiniGPT (runtime.engine.models) is trained for `steps` Adam steps by each
stage of the `stage` list, one after the other on the same ranks, each from
the same initial weights and on the same global batches (`microbatch`
sequences per rank per step):

- ddp: every rank holds everything; gradients all-reduced per unit (DDP's buckets);
- zero1 (P_os): Adam's states sharded; gradients reduce-scattered after backward,
  params all-gathered after the step;
- zero2 (P_os+g): gradients sharded too, reduce-scattered unit by unit as backward
  produces them;
- zero3 (P_os+g+p): params sharded too, all-gathered per unit before its forward
  and again before its backward, freed after each use;
- fsdp2: torch's `fully_shard` on the same units (it runs on gloo on CPU in torch
  2.13), its memory measured the same way.

Every Action carries its stage as `series`. The rank side (scenarios.zero.rank,
with scenarios.zero.executors and .fsdp2) measures, from the live tensors, the
bytes of params, grads, optimizer states, activations and communication buffers
on each rank after every Action, and counts the bytes each rank puts on the
wire. The prediction is the ZeRO paper's arithmetic (scenarios.zero.memory),
exactly for any Ψ, N_d and K; for the real run it is also worked out per rank
with the shards' rounding, so measured and predicted bars stand side by side.
`predict` goes far beyond this machine: `-p params=70B -p dp=1024 -p
precision=mixed -p gpu_memory=80GB`.

Imports: runtime's pure part and the lesson contract (the UI imports this).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from runtime.sim import formulas
from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action, Program, barriers
from runtime.sim.trace import Timeline, makespan
from scenarios.base import OPTIMIZER_MODULES, Hooks, Lesson, RunData
from scenarios.metrics import Metric
from scenarios.params import Mode, ParamError, Params, choice, choices, count, integer, size
from scenarios.shape import FP32, GPTShape
from scenarios.texts import load_texts
from scenarios.zero import lumped, memory
from scenarios.zero.results import ZeroResult

STAGES = ("ddp", "zero1", "zero2", "zero3", "fsdp2")
# The cost key of FSDP2's first Adam step in a process, which pays DTensor's first calls.
FIRST_FSDP2_ADAM = "opt.fsdp2.first"
# What torch's FSDP2 imports (DTensor, the device mesh): half a second per process.
FSDP2_MODULES = ("torch.distributed.fsdp", "torch.distributed.tensor")
MAX_RUN_PARAMETERS = 2_000_000
# Adam's update on CPU, seconds per element (a handful of elementwise passes).
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class ZeroParams(Params):
    aliases = {"dp": "ranks"}  # the ZeRO paper's N_d

    stage: tuple[str, ...] = choices(STAGES, STAGES)
    ranks: int = integer(4, 2, 8, 1 << 20)
    params: int | str = count("auto")
    precision: str = choice("fp32", ("fp32", "mixed"))
    gpu_memory: int = size(0)
    activations: str = choice("auto", ("auto", "on", "off"))
    steps: int = integer(2, 1, 5)
    model: GPTShape = GPTShape(
        layers=2, hidden=32, heads=4, seq=16, vocab=64, run_limit=MAX_RUN_PARAMETERS
    )
    microbatch: int = integer(4, 1, 32, 1 << 16)

    def check(self, mode: Mode) -> None:
        shape_count = self.model.parameters
        if mode == "run":
            if self.precision != "fp32":
                raise ParamError(
                    "precision",
                    f"precision={self.precision}: a real run here trains in fp32; "
                    "mixed (fp16 params and grads, K = 12) is for predict",
                    es=f"precision={self.precision}: una ejecución real aquí entrena en fp32; "
                    "mixed (parámetros y gradientes en fp16, K = 12) es para predict",
                )
            if self.psi != shape_count:
                raise ParamError(
                    "params",
                    f"params={self.psi}: a real run trains the MiniGPT of the shape knobs "
                    f"({shape_count:,} parameters); other sizes are for predict",
                    es=f"params={self.psi}: una ejecución real entrena la MiniGPT que dan "
                    f"layers, hidden, heads, seq y vocab ({shape_count:,} parámetros); otros "
                    "tamaños son para predict",
                )
        if self.ranks > self.psi:
            raise ParamError(
                "ranks",
                f"ranks={self.ranks}: more ranks than the model has parameters "
                f"(Ψ = {self.psi:,}) to shard",
                es=f"ranks={self.ranks}: más rangos que parámetros tiene el modelo "
                f"(Ψ = {self.psi:,}) para repartir",
            )

    @property
    def psi(self) -> int:
        """Ψ, the model's parameters: as given, or the MiniGPT's own (`auto`)."""
        return self.model.parameters if self.params == "auto" else int(self.params)

    @property
    def from_shape(self) -> bool:
        """True when Ψ is the shape's own count, so the Program can follow the units."""
        return self.psi == self.model.parameters

    @property
    def counts_activations(self) -> bool:
        """`auto`: on when the shape describes the model (Ψ from the shape, or a shape
        knob away from its default; the app's form sends every field, changed or not)."""
        if self.activations != "auto":
            return self.activations == "on"
        default = ZeroParams()
        return (
            self.params == "auto"
            or self.model != default.model
            or self.microbatch != default.microbatch
        )


# -- rank result: ZeroResult (per stage: peak bytes by category, bytes sent, the
#    parameters' distance to DDP's, losses), in scenarios/zero/results.py.
# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/zero/texts.toml


# -- program ------------------------------------------------------------------------------
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
        **({"group": group, "args": (("synced", True),)} if synced else {}),
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
    # link's bandwidth, and its per-tensor overheads (calibrated: runtime.fit.calibration).
    _, beta = model.group_link(range(params.ranks))
    moved = sum(numels) * FP32 * (params.ranks - 1) / params.ranks * beta
    forward, backward, adam = rates.sharded_seconds(shape.parameter_tensors)
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
    first = shape.parameter_tensors * rates.sharded_first_adam_s
    estimated[FIRST_FSDP2_ADAM] = estimated["opt.fsdp2"] + first
    return replace(model, compute={**model.compute, **estimated})


# -- metrics ------------------------------------------------------------------------------
def steps_time(timeline: Timeline, stage: str) -> float:
    """A stage's steps, from the barrier that starts them releasing the ranks to the last
    rank's end. The wait in that barrier is not the stage's: it is the previous stage's
    skew and this one's model being built, and it would pass for the stage's time."""
    return makespan(s for s in timeline.of_series(stage) if s.kind != "barrier")


def metrics(
    params: ZeroParams, predicted: Timeline, run: RunData[ZeroResult] | None
) -> list[Metric]:
    n, psi = params.ranks, params.psi
    elem = formulas.ZERO_PRECISIONS[params.precision][0]
    out = [
        Metric("parameters", "count", psi),
        Metric("ranks", "count", n),
        Metric("precision", "text", params.precision),
    ]
    for stage in params.stage:
        mine = [r.stages[stage] for r in run.results] if run is not None else None
        measured_s = steps_time(run.measured, stage) if run is not None else None
        out.append(Metric("makespan_s", "s", measured_s, steps_time(predicted, stage), stage))
        comm = formulas.zero_comm_bytes_per_rank(psi, n, stage, elem)
        sent = [m.bytes_sent / params.steps for m in mine] if mine else None
        out += [
            Metric("comm_bytes_per_rank", "bytes", sent, comm, stage, per="rank"),
            Metric("comm_elements", "count", formulas.zero_comm_elements(psi, stage), None, stage),
        ]
        if sent:
            ratio = max(sent) / comm if comm else 0.0
            out.append(Metric("comm_measured_vs_predicted", "ratio", ratio, series=stage))
        out += memory.memory_metrics(params, stage, [m.peak_bytes for m in mine or []])
        if mine and stage != "ddp":
            diff = max(m.param_diff_vs_ddp for m in mine)
            out.append(Metric("param_diff_vs_ddp", "diff", diff, series=stage))
        if mine:
            out.append(Metric("losses", "number", list(mine[0].losses), series=stage, per="step"))
    if run is not None:
        diffs = [m.value for m in out if m.name == "param_diff_vs_ddp"]
        out.append(Metric("max_param_diff_vs_ddp", "diff", max(diffs, default=0.0)))
        reference = [r.ddp_diff_vs_single_process for r in run.results]
        known = [d for d in reference if d is not None]
        if known:
            out.append(Metric("ddp_param_diff_vs_single_process", "diff", max(known)))
    return out


def tokens(params: ZeroParams) -> tuple[str, float]:
    """Each rank trains on `microbatch` sequences of `seq` tokens per step."""
    return ("tokens", float(params.microbatch * params.model.seq))


RANK_ENTRY = "scenarios.zero.rank:run_rank"  # what each rank runs (torch: never imported here)
# At many ranks or layers `predict` lumps the ranks, alike, into one (scenarios.zero.lumped).
HOOKS = Hooks(
    estimate,
    "unit costs",
    chained_collectives=True,  # a step is a chain of its units' collectives
    lump=lumped.lump,
    items=tokens,
    preload=(*FSDP2_MODULES, *OPTIMIZER_MODULES),
    headline=("makespan_s",),
    dispatch_gaps=True,  # its stages' steps came out 1-4% short without the gaps
)
LESSON = Lesson("zero", 2, TEXTS, ZeroParams, ZeroResult, build, metrics, RANK_ENTRY, HOOKS)
