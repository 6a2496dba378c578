"""The ZeRO paper's formulas this lesson teaches (Rajbhandari et al. 2019), and the
activations a layer keeps for backward.

The model-state bytes per device (ZERO_PRECISIONS, ZERO_SHARDED,
zero_model_state_bytes) are shared with lesson 0's footprint, so they live in
runtime.sim.formulas and are read from here under the same names; the bytes each
rank moves per step and the activation formula are this lesson's own.
docs/references.md lists the sources; the lesson's tests check these values exactly.

Pure: stdlib only (and runtime.sim.formulas).
"""

from __future__ import annotations

from runtime.sim.formulas import ZERO_PRECISIONS, ZERO_SHARDED, ZERO_STAGES, zero_model_state_bytes

__all__ = [
    "ZERO_PRECISIONS",
    "ZERO_SHARDED",
    "ZERO_STAGES",
    "transformer_activation_bytes_per_layer",
    "zero_comm_bytes_per_rank",
    "zero_comm_elements",
    "zero_model_state_bytes",
]


def zero_comm_elements(psi: float, stage: str) -> float:
    """Elements each rank moves per step (ZeRO §7): 2Ψ for DDP, ZeRO-1 and ZeRO-2
    (a reduce-scatter and an all-gather, i.e. one all-reduce's worth), 3Ψ for ZeRO-3
    (an extra all-gather of the params in backward)."""
    return 3 * psi if stage in ("zero3", "fsdp2") else 2 * psi


def zero_comm_bytes_per_rank(psi: float, n: int, stage: str, elem_bytes: int) -> float:
    """Bytes each rank sends per step on rings: 2(n−1)/n·Ψ·b (DDP, ZeRO-1, ZeRO-2)
    or 3(n−1)/n·Ψ·b (ZeRO-3), b bytes per element."""
    return zero_comm_elements(psi, stage) * (n - 1) / n * elem_bytes


def transformer_activation_bytes_per_layer(seq: int, micro: int, hidden: int, heads: int) -> float:
    """Ultra-Scale Playbook / Korthikanti et al.: s·b·h·(34 + 5·a·s/h) bytes per layer
    in 16-bit, no recomputation, no tensor parallelism."""
    return seq * micro * hidden * (34 + 5 * heads * seq / hidden)
