"""Lesson 4's params and rank result: the TP degree, SP, the mistake to show, the model.

Read by the metrics (.figures), the rank code (.rank) and the lesson (.lesson). It
reads the hand-written step's plan below it (scenarios.tensor_parallel.program: the
mistakes, the sizes, how many Actions a step has), which knows nothing of these
params.

Imports: the lesson contract and the step's plan (the UI imports this).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from scenarios.base import RankResult
from scenarios.params import Mode, ParamError, Params, choice, choices, integer
from scenarios.shape import FP32, GPTShape
from scenarios.tensor_parallel.program import MISTAKES, Sizes, hand_plan

IMPLEMENTATIONS = ("hand", "torch")
MAX_RUN_PARAMETERS = 2_000_000
# `predict` simulates every Action of every rank (tp=64 with SP at this bound simulates
# 22 layers): past this many it would not answer within a second.
MAX_PREDICT_ACTIONS = 24_000


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class TPParams(Params):
    ranks_field: ClassVar[str] = "tp"

    tp: int = integer(2, 1, 8, 64)
    sp: str = choice("off", ("off", "on"))
    mistake: str = choice("none", MISTAKES)
    implementation: tuple[str, ...] = choices(IMPLEMENTATIONS, IMPLEMENTATIONS)
    model: GPTShape = GPTShape(
        layers=2, hidden=64, heads=4, seq=32, vocab=128, run_limit=MAX_RUN_PARAMETERS
    )
    microbatch_size: int = integer(4, 1, 64, 4096)

    def check(self, mode: Mode) -> None:
        shape, tp = self.model, self.tp
        for name, value in (
            ("hidden", shape.hidden),
            ("heads", shape.heads),
            ("vocab", shape.vocab),
        ):
            if value % tp:
                what = {"hidden": "columns", "heads": "heads", "vocab": "vocabulary rows"}[name]
                que = {"hidden": "columnas", "heads": "cabezas", "vocab": "filas del vocabulario"}
                raise ParamError(
                    name,
                    f"{name}={value}: tp={tp} must divide it (each rank holds 1/tp of the {what})",
                    es=f"{name}={value}: tp={tp} debe dividirlo (cada rango tiene 1/tp de las "
                    f"{que[name]})",
                )
        if self.sequence_parallel and shape.seq % tp:
            raise ParamError(
                "seq",
                f"seq={shape.seq}: with sp=on, tp={tp} must divide it (one shard each)",
                es=f"seq={shape.seq}: con sp=on, tp={tp} debe dividirlo (un trozo cada rango)",
            )
        if mode == "predict" and self.predict_actions > MAX_PREDICT_ACTIONS:
            raise ParamError(
                "layers",
                f"layers={shape.layers}: {self.predict_actions:,} actions (tp x actions per rank); "
                f"predict simulates every one, at most {MAX_PREDICT_ACTIONS:,}: fewer layers or a smaller tp",
                es=f"layers={shape.layers}: {self.predict_actions:,} acciones (tp x acciones "
                f"por rango); predict simula cada una, a lo sumo {MAX_PREDICT_ACTIONS:,}: "
                "menos capas o un tp menor",
            )

    @property
    def sequence_parallel(self) -> bool:
        return self.sp == "on"

    @property
    def predict_actions(self) -> int:
        """Actions of the whole Program: the hand-written step's (fixed ones, and so many
        per layer) and torch's two, with a barrier each, on every rank."""
        one, two = (len(hand_plan(n, self.sequence_parallel, self.mistake)) for n in (1, 2))
        per_rank = (
            one + (two - one) * (self.model.layers - 1) if "hand" in self.implementation else 0
        )
        return self.tp * (
            per_rank + 2 * ("torch" in self.implementation) + len(self.implementation)
        )

    @property
    def tokens(self) -> int:
        return self.microbatch_size * self.model.seq

    @property
    def sizes(self) -> Sizes:
        shape = self.model
        replicated = shape.seq * shape.hidden + 2 * shape.hidden + shape.layers * 6 * shape.hidden
        return Sizes(self.tokens * shape.hidden * FP32, self.tokens * FP32, replicated * FP32)


@dataclass(frozen=True)
class SeriesRun:
    """One implementation's step on one rank, checked against one process."""

    loss: float
    loss_diff: float  # |loss − the one-process loss|
    grad_diff: float  # largest |grad − the one-process grad| over this rank's slices
    worst_parameter: str  # the one-process parameter where that largest difference is
    counts: dict[str, int]  # collectives: "forward.all_reduce" -> how many (whole step)
    layer_counts: dict[str, float]  # hand only: per layer, "forward.all_reduce" -> 2
    loss_counts: dict[str, int]  # hand only: the loss's, "forward.all_reduce" -> 3
    collective_bytes: list[int]  # hand only: the distinct sizes of its activation collectives


@dataclass(frozen=True, kw_only=True)
class TPResult(RankResult):
    """Per rank: each implementation's step, and the activation bytes one block keeps
    for backward (fp32, measured by autograd's saved-tensor hooks): none, tp, tp_sp."""

    series: dict[str, SeriesRun]
    activation_bytes: dict[str, int] = field(default_factory=dict)
