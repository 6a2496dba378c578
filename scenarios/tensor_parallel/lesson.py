"""Lesson 4: tensor parallelism of a whole Transformer block — f and g, heads, SP, the loss.

The `tensor-parallel` lesson, top to bottom: its params (.params), its narrative
(every text a learner reads is in texts.toml), its Program, its metrics
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

from dataclasses import replace

from runtime.fit.after_run import Refinement
from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action, Program
from scenarios.base import Hooks, Lesson
from scenarios.tensor_parallel import costs, figures
from scenarios.tensor_parallel.params import TPParams, TPResult
from scenarios.tensor_parallel.program import FORWARD, build_program, hand_plan, item_bytes
from scenarios.tensor_parallel.rates import PROBES, TPRates
from scenarios.texts import load_texts

# -- parameters: TPParams, and each rank's TPResult (scenarios/tensor_parallel/params.py)

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
    dispatch = TPRates.of(model.rates).parallel_seconds(  # the lesson's own rates
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
    items=tokens,
    # a step is a chain of its layers' all-reduces
    refinement=Refinement(collectives="chained", measures="segment costs"),
    preload=("torch.distributed.tensor.parallel", "torch.distributed.tensor.debug"),
    headline=("step_measured_s",),
    probes=PROBES,  # DTensor's dispatch per module (scenarios.tensor_parallel.rates)
)
LESSON = Lesson(
    "tensor-parallel", 4, TEXTS, TPParams, TPResult, build, figures.metrics, RANK_ENTRY, HOOKS
)
