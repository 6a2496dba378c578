"""Lesson 5: pipeline schedules — where the bubble comes from and what each schedule buys.

The `pipeline` lesson, top to bottom: its params (.params), its narrative (with
every text a learner reads, in texts.toml), its Program, its metrics (.report per
schedule). MiniGPT (runtime.engine.models) is cut into p·v contiguous stages; each
schedule of the
`schedule` list (scenarios.pipeline.schedules) runs one training step of m
microbatches on the real ranks, one schedule after the other, each after a
barrier, every Action tagged with its schedule as `series`. The rank side
(scenarios.pipeline.rank) first times every stage's F, B, Bi and W in CPU
seconds and ping-pongs an activation between neighbours; the prediction is
refined with those (runtime.fit.refine.refine) and re-simulates the Program,
sharing the CPU cores among the ranks computing at each instant, which is
what a pipeline's idle ranks need.

Metrics are given per schedule (`series`); under `--hardware unit` (F = 1,
B = 2 per full stage, free communication) they are the textbook numbers:
GPipe and 1F1B with p = 4, m = 8 take 33 units, a bubble of 3/11.

Imports: runtime's pure part and the lesson contract (the UI imports this).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from runtime.fit.after_run import Refinement
from runtime.sim import formulas
from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Program
from runtime.sim.trace import Timeline
from scenarios.base import GRADIENT_MODULES, Hooks, Lesson, RunData
from scenarios.metrics import Metric
from scenarios.pipeline import lumped, schedules
from scenarios.pipeline.params import PipelineParams, PipelineResult
from scenarios.pipeline.rates import PROBES, PipelineRates
from scenarios.pipeline.report import SchedulePrediction, schedule_metrics
from scenarios.pipeline.schedules import cost_key
from scenarios.texts import load_texts

# -- parameters: PipelineParams, and each rank's PipelineResult (scenarios/pipeline/params.py)

# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/pipeline/texts.toml


# -- program --------------------------------------------------------------------------------
@lru_cache(maxsize=4)
def build(params: PipelineParams) -> Program:
    """The Program of every schedule asked, one after another. Kept for the same params:
    `metrics` reads it again after the prediction (a Program is never changed once built),
    and at 256 microbatches building it is most of `predict`'s time."""
    return schedules.build_many([(s, params.shape(s)) for s in params.schedule])


def estimate(params: PipelineParams, model: CostModel) -> CostModel:
    """Stage costs before a run has measured them: the profile's own when it has them
    (unit: F = 1, B = 2 per full stage), else from the compute rates (runtime.sim.compute:
    calibrated on this machine, or a datasheet's): the stage's blocks, with the
    embedding on the first and the head on the last; the split backward's Bi and W as the
    rates' fractions of B (half each in theory; calibrated: on a CPU Bi is nearly B)."""
    if "F" in model.compute:
        return model
    rates = model.rates or TYPICAL_CPU
    costs = params.model.costs(rates, params.microbatch_size * params.model.seq)
    split = PipelineRates.of(model.rates)  # the lesson's own (scenarios.pipeline.rates)
    bi, w = split.split_input_fraction, split.split_weight_fraction
    estimated: dict[str, float] = {}
    for schedule in params.schedule:
        stages = params.shape(schedule).virtual_stages
        for s, count in enumerate(formulas.even_split(params.model.layers, stages)):
            f, b = costs.stage(count, first=s == 0, last=s == stages - 1)
            for kind, cost in (("F", f), ("B", b), ("Bi", b * bi), ("W", b * w)):
                estimated[cost_key(kind, s, stages)] = cost
    gloo = model.details.get("backend", "gloo") == "gloo"
    on_cpu = model.rates is None or model.rates.peak_flops_per_s is None
    corrections = model.corrections
    if gloo and on_cpu and corrections.send_issue is None:
        # On CPU ranks gloo's isend writes its message out on the sender's thread: it
        # holds the sender about one message's wire time (a run then measures it).
        alpha, beta = model.link(0, 1)
        corrections = replace(corrections, send_issue=alpha + params.activation_bytes * beta)
    return replace(model, compute={**model.compute, **estimated}, corrections=corrections)


# -- metrics ----------------------------------------------------------------------------------
def metrics(
    params: PipelineParams, predicted: Timeline, run: RunData[PipelineResult] | None
) -> list[Metric]:
    program = build(params)
    out = [Metric("parameters", "count", params.model.parameters)]
    for schedule in params.schedule:
        per_rank = [[a for a in actions if a.series == schedule] for actions in program.ranks]
        prediction = SchedulePrediction.of(per_rank, predicted.of_series(schedule), params.stages)
        out += schedule_metrics(params, schedule, prediction, run, per_rank)
    return out


def tokens(params: PipelineParams) -> tuple[str, float]:
    """Every stage carries the whole step's microbatches through its layers."""
    return ("tokens", float(params.microbatches * params.microbatch_size * params.model.seq))


def cores_fact(
    params: PipelineParams, model: CostModel, run: RunData | None
) -> tuple[list[Metric], list]:
    """How many CPU cores the prediction shares among the ranks (the machine's, as its
    calibration found them; none on a GPU profile): the narrative's bubble step speaks of
    ranks sharing cores, true only where they outnumber them, so it points here."""
    return [Metric("cpu_cores", "count", model.cores)], []


RANK_ENTRY = "scenarios.pipeline.rank:run_rank"  # what each rank runs (torch: never imported here)
# Large pipelines: `predict` builds each slot once (scenarios.pipeline.lumped).
HOOKS = Hooks(
    estimate,
    lump=lumped.lump,
    items=tokens,
    preload=GRADIENT_MODULES,
    headline=("makespan_s",),
    figures=cores_fact,
    refinement=Refinement(measures="stage costs and p2p latency"),
    probes=PROBES,  # a split backward's halves (scenarios.pipeline.rates)
)
LESSON = Lesson(
    "pipeline", 5, TEXTS, PipelineParams, PipelineResult, build, metrics, RANK_ENTRY, HOOKS
)
