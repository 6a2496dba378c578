"""Lesson 5's metrics of one schedule: makespan, bubble, activations held, bytes sent.

A SchedulePrediction is what the prediction says of one schedule, read off the
simulated Program (.lesson's `metrics`) or worked out without building it
(.lumped); `schedule_metrics` sets it beside what a run measured, and beside the
textbook bubble (scenarios.pipeline.formulas).

Imports: runtime's pure part, the lesson contract and the lesson's params, formulas
and schedules (the UI imports this).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from runtime.sim.program import Action
from runtime.sim.trace import Span, makespan
from scenarios.base import RunData
from scenarios.metrics import Metric
from scenarios.pipeline import formulas
from scenarios.pipeline.params import PipelineParams, PipelineResult, ScheduleRun
from scenarios.pipeline.schedules import inflight_profile

COMPUTE_KINDS = ("F", "B", "W")


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
