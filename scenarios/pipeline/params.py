"""Lesson 5's params and rank result: the schedules to compare, the pipeline's shape.

Read by the lumped prediction (.lumped), the metrics (.report), the rank code
(.rank) and the lesson (.lesson). It reads the schedule library below it
(scenarios.pipeline.schedules: the names, a Shape and its checks), which knows
nothing of these params.

Imports: the lesson contract and the schedule library (the UI imports this).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from scenarios.base import RankResult
from scenarios.params import Mode, ParamError, Params, choices, integer
from scenarios.pipeline import schedules
from scenarios.pipeline.schedules import SCHEDULES, Shape
from scenarios.shape import FP32, GPTShape

MAX_RUN_PARAMETERS = 2_000_000
# `predict` simulates every action of a pipeline (its ranks differ), each slot built once
# (scenarios.pipeline.lumped): at most this many compute slots, a 64-stage interleaved
# pipeline of 256 microbatches and 4 chunks, so that it answers within a second.
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
