"""What each compute segment of the tensor-parallel step costs before a run has timed it.

Part of lesson 4's prediction (docs/design.md: the simulator costs the Program's
compute Actions from the CostModel's table). The hand-written step is cut into
segments between collectives (scenarios.tensor_parallel.program): a rank's
share of the attention (its heads), of the MLP (its columns), of the head (its
vocabulary slice), the LayerNorms (a sequence shard under SP) and the loss's
small reductions. Each is estimated from the compute rates (runtime.sim.compute,
calibrated here or a GPU profile's datasheet): a block's forward and backward
split between attention (8h² + 4sh FLOPs per token of its 24h² + 4sh) and MLP
(16h²), its FLOPs and elements divided by t (each rank still launches every
operator); after a run the measured CPU seconds replace them
(runtime.fit.refine.refine). torch's series is one forward and one backward:
the sum of the same segments, plus DTensor's dispatch for each module its plan
parallelizes (scenarios.tensor_parallel.rates.TPRates.parallel_seconds, calibrated).

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.sim.compute import ComputeRates

FB = tuple[float, float]


def segment_costs(
    rates: ComputeRates, *, tokens: int, hidden: int, seq: int, vocab: int, tp: int, sp: bool
) -> dict[str, FB]:
    """(forward, backward) seconds of each segment on one rank."""
    block_f, block_b = rates.block_seconds(tokens, hidden, seq)
    matmul = 24 * hidden * hidden + 4 * seq * hidden
    attn_share = (8 * hidden * hidden + 4 * seq * hidden) / matmul
    # A rank runs every operator of the block on its 1/t of the columns (or heads): its
    # FLOPs and elements split t ways, its operators' launch overhead does not.
    launch = (rates.forward_overhead_s, rates.backward_overhead_s)
    work = (block_f - launch[0], block_b - launch[1])

    def part(share: float) -> FB:
        return (
            launch[0] * share + work[0] * share / tp,
            launch[1] * share + work[1] * share / tp,
        )

    small = rates.linear_seconds(tokens // tp if sp else tokens, 1, hidden)
    reduction = rates.linear_seconds(tokens, 1, max(1, vocab // tp))
    return {
        "embed": rates.linear_seconds(tokens, 1, hidden),
        "attn": part(attn_share),
        "mlp": part(1 - attn_share),
        "ln1": small,
        "ln2": small,
        "ln_f": small,
        "logits": rates.linear_seconds(tokens, hidden, max(1, vocab // tp)),
        "head": rates.linear_seconds(tokens, hidden, max(1, vocab // tp)),
        "loss-target": reduction,
        "loss-sumexp": reduction,
        "loss": reduction,
    }


def cost_table(costs: dict[str, FB], keys: Iterable[str]) -> dict[str, float]:
    """Seconds of each cost key ("F.attn", "B.mlp+B.attn"; `keys` in step order, repeated
    per layer): merged segments add up; "F.torch" and "B.torch" are the whole forward
    and backward."""
    table: dict[str, float] = {}
    totals = {"F": 0.0, "B": 0.0}
    for key in keys:
        seconds = 0.0
        for part in key.split("+"):
            kind, name = part.split(".", 1)
            seconds += costs[name][0 if kind == "F" else 1]
        totals[key[0]] += seconds  # every occurrence: one per layer
        table[key] = seconds
    table["F.torch"], table["B.torch"] = totals["F"], totals["B"]
    return table


def parallelized_modules(layers: int, sp: bool) -> int:
    """How many modules torch's plan (scenarios.tensor_parallel.torch_tp.build) hands to
    DTensor: per block q/k/v, the attention's projection and the MLP's two Linears (and
    under SP the two LayerNorms and the attention's input), then the embedding and the
    head (and under SP the first block's input and the head's LayerNorm)."""
    return layers * (7 if sp else 4) + (4 if sp else 2)
