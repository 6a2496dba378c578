"""Lesson 5: pipeline schedules — where the bubble comes from and what each schedule buys.

The `pipeline` lesson, top to bottom: its params, its narrative (with every
text a learner reads, in texts.toml), its Program, its metrics. MiniGPT
(runtime.engine.models) is cut into p·v contiguous stages; each schedule of the
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

import statistics
from dataclasses import dataclass, replace
from typing import ClassVar

from runtime.sim import formulas
from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import SEND_ISSUE, CostModel
from runtime.sim.program import Action, Program
from runtime.sim.trace import Span, Timeline, makespan
from scenarios.base import GRADIENT_MODULES, Hooks, Lesson, RankResult, RunData
from scenarios.metrics import Metric
from scenarios.params import Mode, ParamError, Params, choices, integer
from scenarios.pipeline import lumped, schedules
from scenarios.pipeline.schedules import SCHEDULES, Shape, cost_key, inflight_profile
from scenarios.shape import FP32, GPTShape
from scenarios.texts import load_texts

MAX_RUN_PARAMETERS = 2_000_000
COMPUTE_KINDS = ("F", "B", "W")
# `predict` simulates every action of a pipeline (its ranks differ): this many compute
# slots, a 64-stage interleaved pipeline of 256 microbatches and 4 chunks, take about
# half a second (scenarios.pipeline.lumped).
MAX_PREDICT_SLOTS = 131_072


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class PipelineParams(Params):
    ranks_field: ClassVar[str] = "stages"

    schedule: tuple[str, ...] = choices(("gpipe", "1f1b"), SCHEDULES)
    stages: int = integer(4, 2, 8, 64)
    microbatches: int = integer(8, 1, schedules.MAX_MICROBATCHES)
    chunks: int = integer(2, 1, 8)
    model: GPTShape = GPTShape(
        layers=8, hidden=64, heads=4, seq=64, vocab=64, run_limit=MAX_RUN_PARAMETERS
    )
    microbatch_size: int = integer(32, 1, 64, 4096)

    def check(self, mode: Mode) -> None:
        for schedule in self.schedule:
            shape = self.shape(schedule)
            schedules.check(schedule, shape)  # a ScheduleError names its field
            if self.model.layers < shape.virtual_stages:
                raise ParamError(
                    "layers",
                    f"layers={self.model.layers}: {schedule} cuts the model into "
                    f"{shape.virtual_stages} stages (stages x chunks), so it needs at least "
                    "that many layers",
                    es=f"layers={self.model.layers}: {schedule} corta el modelo en "
                    f"{shape.virtual_stages} etapas (stages x chunks), así que necesita al "
                    "menos esas capas",
                )
        if mode == "predict" and self.compute_slots > MAX_PREDICT_SLOTS:
            raise ParamError(
                "microbatches",
                f"microbatches={self.microbatches}: {self.compute_slots:,} compute slots "
                f"(stages x microbatches x chunks x 2, x 3 in zb-h1, over the schedules); "
                f"predict simulates every one, at most {MAX_PREDICT_SLOTS:,} (as "
                "interleaved at stages=64, microbatches=256, chunks=4): fewer microbatches "
                "or schedules at once",
                es=f"microbatches={self.microbatches}: {self.compute_slots:,} huecos de "
                f"cómputo (stages x microbatches x chunks x 2, x 3 en zb-h1, sobre las "
                f"planificaciones); predict simula cada uno, a lo sumo {MAX_PREDICT_SLOTS:,} "
                "(como interleaved con stages=64, microbatches=256, chunks=4): menos "
                "microlotes o menos planificaciones a la vez",
            )

    @property
    def compute_slots(self) -> int:
        """Compute actions of the whole Program: F and B (and W) of every microbatch on
        every stage, for each schedule."""
        return sum(
            self.stages * self.microbatches * self.shape(s).chunks * (3 if s == "zb-h1" else 2)
            for s in self.schedule
        )

    @property
    def activation_bytes(self) -> int:
        """Bytes of one microbatch's activation between stages (= its gradient)."""
        return self.microbatch_size * self.model.seq * self.model.hidden * FP32

    def shape(self, schedule: str) -> Shape:
        """The knobs `schedule` takes (only interleaved uses chunks)."""
        chunks = self.chunks if schedule == "interleaved" else 1
        return Shape(self.stages, self.microbatches, chunks, self.activation_bytes)


@dataclass(frozen=True)
class ScheduleRun:
    """What one rank measured while running one schedule."""

    peak_inflight: int  # microbatch-stages whose activations it held at once
    peak_activation_bytes: int  # the bytes autograd kept for them, at the peak
    p2p_bytes: int  # what it sent
    cpu_s: float  # CPU seconds of its process during the step
    max_grad_diff: float  # largest |grad − one process's grad| over its parameters
    losses: list[float]  # per microbatch, on the last stage (empty elsewhere)


@dataclass(frozen=True)
class StageActivations:
    """Bytes one microbatch's forward keeps for backward on a stage, measured alone."""

    stages: int  # how many stages the model is cut into
    stage: int
    bytes: int


@dataclass(frozen=True, kw_only=True)
class PipelineResult(RankResult):
    """Per rank: stage costs in CPU seconds (`compute_costs`, all ranks timing at once),
    one activation's one-way time to a neighbour (`p2p`), each of its stages'
    activation bytes per microbatch, and each schedule's run."""

    activations: list[StageActivations]
    schedules: dict[str, ScheduleRun]


# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/pipeline/texts.toml


# -- program --------------------------------------------------------------------------------
def build(params: PipelineParams) -> Program:
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
    bi, w = rates.split_input_fraction, rates.split_weight_fraction
    estimated: dict[str, float] = {}
    for schedule in params.schedule:
        stages = params.shape(schedule).virtual_stages
        for s, count in enumerate(formulas.even_split(params.model.layers, stages)):
            f, b = costs.stage(count, first=s == 0, last=s == stages - 1)
            for kind, cost in (("F", f), ("B", b), ("Bi", b * bi), ("W", b * w)):
                estimated[cost_key(kind, s, stages)] = cost
    gloo = model.details.get("backend", "gloo") == "gloo"
    on_cpu = model.rates is None or model.rates.peak_flops_per_s is None
    if gloo and on_cpu and SEND_ISSUE not in model.compute:
        # On CPU ranks gloo's isend writes its message out on the sender's thread: it
        # holds the sender about one message's wire time (a run then measures it).
        alpha, beta = model.link(0, 1)
        estimated[SEND_ISSUE] = alpha + params.activation_bytes * beta
    return replace(model, compute={**model.compute, **estimated})


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


@dataclass(frozen=True)
class SchedulePrediction:
    """What the prediction says of one schedule: read off the simulated Program, or worked
    out without building it (scenarios.pipeline.lumped)."""

    makespan: float
    bubble: float
    peak_inflight: list[int]  # per rank
    p2p_bytes: list[int]  # per rank
    p2p_messages: int

    @classmethod
    def of(cls, per_rank: list[list[Action]], spans: list[Span], ranks: int) -> SchedulePrediction:
        """From each rank's Actions of the schedule and their predicted spans."""
        return cls(
            makespan(spans),
            _bubble(spans, ranks),
            [max(inflight_profile(actions), default=0) for actions in per_rank],
            [sum(nbytes for a in actions for _, nbytes in a.sends()) for actions in per_rank],
            sum(a.kind == "send" for actions in per_rank for a in actions),
        )


def schedule_metrics(
    params: PipelineParams,
    schedule: str,
    prediction: SchedulePrediction,
    run: RunData[PipelineResult] | None,
    per_rank: list[list[Action]],
) -> list[Metric]:
    """One schedule's metrics; `per_rank`, its Actions on each rank, is read after a run."""
    shape, s, p = params.shape(schedule), schedule, params.stages
    unit = formulas.pipeline_bubble_fraction(
        s, p, shape.microbatches, shape.chunks, 1.0, 2.0, 1.0 if s == "zb-h1" else 0.0
    )
    mine: list[ScheduleRun] = []
    measured_s = measured_bubble = None
    if run is not None:
        mine = [r.schedules[s] for r in run.results]
        meas = run.measured.of_series(s)
        measured_s, measured_bubble = makespan(meas), _bubble(meas, p)
    out = [
        Metric("makespan_s", "s", measured_s, prediction.makespan, series=s),
        Metric("bubble_fraction", "fraction", measured_bubble, prediction.bubble, series=s),
        Metric("bubble_fraction_formula", "fraction", unit, series=s),
        Metric(
            "peak_inflight_microbatches",
            "count",
            [r.peak_inflight for r in mine] if mine else None,
            prediction.peak_inflight,
            series=s,
            per="rank",
        ),
        Metric(
            "p2p_bytes",
            "bytes",
            [r.p2p_bytes for r in mine] if mine else None,
            prediction.p2p_bytes,
            series=s,
            per="rank",
        ),
        Metric("p2p_messages", "count", prediction.p2p_messages, series=s),
    ]
    if run is None:
        return out
    held = {(a.stages, a.stage): a.bytes for r in run.results for a in r.activations}
    per_stage = {
        stage: held[key]
        for stage in range(shape.virtual_stages)
        if (key := (shape.virtual_stages, stage)) in held
    }
    losses = [loss for r in mine for loss in r.losses]
    return [
        *out,
        Metric(
            "peak_bytes",
            "bytes",
            [r.peak_activation_bytes for r in mine],
            _activation_peaks(per_rank, per_stage) if per_stage else None,
            series=s,
            category="activations",
            per="rank",
        ),
        Metric("max_grad_diff_vs_reference", "diff", max(r.max_grad_diff for r in mine), series=s),
        Metric("loss", "number", statistics.fmean(losses) if losses else None, series=s),
        Metric("cpu_s", "s", [r.cpu_s for r in mine], series=s, per="rank"),
    ]


def _activation_peaks(per_rank: list[list[Action]], per_stage: dict[int, int]) -> list[int]:
    """Per rank, the largest sum over held (stage, microbatch) of one microbatch's
    activation bytes on that stage, walking the rank's actions in order."""
    peaks = []
    for actions in per_rank:
        release = "W" if any(a.kind == "W" for a in actions) else "B"
        held = peak = 0
        for action in actions:
            stage_bytes = per_stage.get(action.stage or 0, 0)
            if action.kind == "F":
                held += stage_bytes
                peak = max(peak, held)
            elif action.kind == release:
                held -= stage_bytes
        peaks.append(peak)
    return peaks


def _bubble(spans: list[Span], ranks: int) -> float:
    """Idle share of the makespan, averaged over ranks: 1 - (time computing)/makespan."""
    total = makespan(spans)
    if total <= 0:
        return 0.0
    busy = [0.0] * ranks
    for span in spans:
        if span.kind in COMPUTE_KINDS:
            busy[span.rank] += span.duration
    return 1.0 - statistics.fmean(busy) / total


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
    "stage costs and p2p latency",
    lump=lumped.lump,
    items=tokens,
    preload=GRADIENT_MODULES,
    headline=("makespan_s",),
    figures=cores_fact,
)
LESSON = Lesson(
    "pipeline", 5, TEXTS, PipelineParams, PipelineResult, build, metrics, RANK_ENTRY, HOOKS
)
