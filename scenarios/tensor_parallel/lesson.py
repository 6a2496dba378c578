"""Lesson 4: tensor parallelism of a whole Transformer block — f and g, heads, SP, the loss.

The `tensor-parallel` lesson, top to bottom: its params, its narrative (every
text a learner reads is in texts.toml), its Program, its metrics
(scenarios.tensor_parallel.figures). The MiniGPT (runtime.engine.models), its token
embedding tied to its head, is split Megatron-style across `tp` ranks: by hand
(scenarios.tensor_parallel.model: f and g as autograd functions, column- and
row-parallel linears, attention by heads, vocab-parallel embedding and loss,
sequence parallelism with `sp=on`) and by torch's own `parallelize_module`
(scenarios.tensor_parallel.torch_tp), one after the other on the same batch;
each is checked against the one-process model (loss and every gradient).

The hand-written step is a Program of compute segments and the collectives
between them, in the order autograd runs them (scenarios.tensor_parallel
.program): the simulator predicts it, the ranks run it and record one Span per
collective, labelled with its layer and place. torch's series is one forward
and one backward Action; CommDebugMode counts its collectives.

Imports: runtime's pure part and the lesson contract (the UI imports this).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action, Program
from scenarios.base import Hooks, Lesson, RankResult
from scenarios.params import Mode, ParamError, Params, choice, choices, integer
from scenarios.shape import FP32, GPTShape
from scenarios.tensor_parallel import costs, figures
from scenarios.tensor_parallel.program import (
    FORWARD,
    MISTAKES,
    Sizes,
    build_program,
    hand_plan,
    item_bytes,
)
from scenarios.texts import load_texts

IMPLEMENTATIONS = ("hand", "torch")
MAX_RUN_PARAMETERS = 2_000_000
# `predict` simulates every Action of every rank (some 20 µs each with the metrics, on a
# loaded machine): past this many it would not answer within a second (tp=64 with SP
# simulates 22 layers).
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


# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/tensor_parallel/texts.toml


# -- program --------------------------------------------------------------------------------
def build(params: TPParams) -> Program:
    plan = hand_plan(params.model.layers, params.sequence_parallel, params.mistake)
    return build_program(
        params.tp,
        params.implementation,
        plan,
        params.sizes,
        sp=params.sequence_parallel,
        mistake=params.mistake,
    )


def estimate(params: TPParams, model: CostModel) -> CostModel:
    """Segment costs before a run: the profile's own when it has them (unit: F = 1, B = 2
    per segment), else from its compute rates (scenarios.tensor_parallel.costs)."""
    if "F" in model.compute:
        return model
    shape = params.model
    segments = costs.segment_costs(
        model.rates or TYPICAL_CPU,
        tokens=params.tokens,
        hidden=shape.hidden,
        seq=shape.seq,
        vocab=shape.vocab,
        tp=params.tp,
        sp=params.sequence_parallel,
    )
    plan = hand_plan(shape.layers, params.sequence_parallel, params.mistake)
    table = costs.cost_table(segments, [item.cost_key for item in plan if item.is_compute])
    # torch's step is one forward and one backward Action: its collectives (DTensor's,
    # the same as the hand-written ones) are costed inside them.
    group = tuple(range(params.tp))
    for item in plan:
        if not item.is_compute:
            action = Action(
                "torch-collective",
                0,
                item.kind,
                bytes=item_bytes(item, params.sizes),
                group=group,
                algorithm="builtin",
            )
            table[f"{'F' if item.direction == FORWARD else 'B'}.torch"] += model.collective_time(
                action
            )
    dispatch = (model.rates or TYPICAL_CPU).parallel_seconds(
        costs.parallelized_modules(shape.layers, params.sequence_parallel)
    )
    table["F.torch"] += dispatch[0]
    table["B.torch"] += dispatch[1]
    return replace(model, compute={**model.compute, **table})


def tokens(params: TPParams) -> tuple[str, float]:
    """Every rank of the group processes the whole batch (its part of each layer)."""
    return ("tokens", float(params.tokens))


RANK_ENTRY = "scenarios.tensor_parallel.rank:run_rank"  # torch: never imported here
HOOKS = Hooks(
    estimate,
    "segment costs",
    items=tokens,
    chained_collectives=True,  # a step is a chain of its layers' all-reduces
    preload=("torch.distributed.tensor.parallel", "torch.distributed.tensor.debug"),
    headline=("step_measured_s",),
)
LESSON = Lesson(
    "tensor-parallel", 4, TEXTS, TPParams, TPResult, build, figures.metrics, RANK_ENTRY, HOOKS
)
