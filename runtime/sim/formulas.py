"""The formulas the playground teaches, each named after its source.

Pure functions of plain numbers, used by the cost model (runtime.sim.costmodel),
by scenario metrics and by the narrative panels. docs/references.md lists
the sources; the unit tests check these values exactly.

Notation: n ranks, S message bytes, alpha seconds per message, beta seconds per
byte on the wire, gamma seconds per byte reduced.

Pure: stdlib only.
"""

from __future__ import annotations

import math


# -- collectives, alpha-beta model (Thakur, Rabenseifner & Gropp 2005) ---------
def ring_all_gather_time(n: int, nbytes: float, alpha: float, beta: float) -> float:
    """(n-1)α + S(n-1)/n·β, S the total gathered bytes."""
    return (n - 1) * alpha + nbytes * (n - 1) / n * beta


def ring_reduce_scatter_time(
    n: int, nbytes: float, alpha: float, beta: float, gamma: float
) -> float:
    """(n-1)α + S(n-1)/n·(β+γ)."""
    return (n - 1) * alpha + nbytes * (n - 1) / n * (beta + gamma)


def ring_all_reduce_time(n: int, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
    """Reduce-scatter then all-gather: 2(n-1)α + 2S(n-1)/n·β + S(n-1)/n·γ."""
    return ring_reduce_scatter_time(n, nbytes, alpha, beta, gamma) + ring_all_gather_time(
        n, nbytes, alpha, beta
    )


def rabenseifner_all_reduce_time(
    n: int, nbytes: float, alpha: float, beta: float, gamma: float
) -> float:
    """Halving-doubling: 2·log2(n)·α + 2S(n-1)/n·β + S(n-1)/n·γ."""
    return 2 * math.log2(n) * alpha + 2 * nbytes * (n - 1) / n * beta + nbytes * (n - 1) / n * gamma


def tree_broadcast_time(n: int, nbytes: float, alpha: float, beta: float) -> float:
    """Binomial tree: ceil(log2 n) rounds of one whole message, log2(n)·(α + Sβ)."""
    return tree_rounds(n) * (alpha + nbytes * beta)


def tree_reduce_time(n: int, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
    """Binomial tree reduce, the mirror of broadcast with a reduction per round."""
    return tree_rounds(n) * (alpha + nbytes * (beta + gamma))


def tree_all_reduce_time(n: int, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
    """Reduce to the root on a binomial tree, then broadcast back down it."""
    return tree_reduce_time(n, nbytes, alpha, beta, gamma) + tree_broadcast_time(
        n, nbytes, alpha, beta
    )


def tree_rounds(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def ring_all_reduce_bytes_per_rank(n: int, nbytes: float) -> float:
    """Bytes each rank sends in a ring all-reduce: 2S(n-1)/n."""
    return 2 * nbytes * (n - 1) / n


# -- nccl-tests doc/PERFORMANCE.md -------------------------------------------
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth S/t, bytes per second."""
    return nbytes / seconds


def busbw(collective: str, n: int, nbytes: float, seconds: float) -> float:
    """Bus bandwidth: algbw times the collective's factor, comparable with the link's peak."""
    return algbw(nbytes, seconds) * BUSBW_FACTORS[collective](n)


def relative_error(predicted: float, measured: float) -> float:
    """|pred - meas| / meas."""
    if measured == 0:
        return 0.0 if predicted == 0 else math.inf
    return abs(predicted - measured) / measured


def even_split(total: int, parts: int) -> list[int]:
    """Split `total` items into `parts` near-equal chunks, larger ones first.

    The hand-made ring uses it for sizes not divisible by n; so does the simulator,
    so both agree on every step's bytes.
    """
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# -- pipeline schedules (docs/references.md, "Pipeline schedules") ---------------------
def pipeline_makespan(
    schedule: str, p: int, m: int, v: int = 1, f: float = 1.0, b: float = 2.0, w: float = 0.0
) -> float:
    """Textbook makespan with per-full-stage costs F, B (= input + weight grad) and,
    for zb-h1, the weight-grad part W of B. Communication is free."""
    if schedule in ("gpipe", "1f1b"):
        return (m + p - 1) * (f + b)
    if schedule == "interleaved":
        return m * (f + b) + (p - 1) * (f + b) / v
    if schedule == "zb-h1":
        bi = b - w
        return m * (f + b) + (p - 1) * (f + bi - w)
    raise KeyError(schedule)


def pipeline_bubble_fraction(
    schedule: str, p: int, m: int, v: int = 1, f: float = 1.0, b: float = 2.0, w: float = 0.0
) -> float:
    """Idle share of the makespan on each rank: 1 - m(F + B) / makespan.

    GPipe and 1F1B: (p - 1)/(m + p - 1); interleaved: the bubble (p - 1)(F + B)
    shrinks v times; zb-h1 with F = Bi = W: (p - 1)/(3m + p - 1)."""
    makespan = pipeline_makespan(schedule, p, m, v, f, b, w)
    return 1.0 - m * (f + b) / makespan


def gpt_parameter_count(vocab: int, seq: int, hidden: int, layers: int) -> int:
    """Parameters of MiniGPT (runtime.engine.models): embeddings, blocks with biases, final
    LayerNorm and an untied head without bias. Per block: 12h² + 13h."""
    h = hidden
    block = 12 * h * h + 13 * h
    return vocab * h + seq * h + layers * block + 2 * h + h * vocab


# -- ZeRO and FSDP memory (Rajbhandari et al. 2019, "ZeRO", Fig. 1 and §5) ------------
# Per-element bytes of the model states: mixed-precision Adam keeps fp16 params and
# grads (2 + 2) and K = 12 bytes of optimizer states (fp32 master params, momentum,
# variance); plain fp32 Adam keeps fp32 params and grads (4 + 4) and K = 8 (two
# fp32 moments, no master copy). The stage decides which of the three is divided by N_d.
ZERO_STAGES = ("ddp", "zero1", "zero2", "zero3")
ZERO_PRECISIONS: dict[str, tuple[int, int, int]] = {
    "mixed": (2, 2, 12),  # (param bytes, grad bytes, K)
    "fp32": (4, 4, 8),
}
# Which model states each stage partitions across the N_d data-parallel ranks.
ZERO_SHARDED: dict[str, frozenset[str]] = {
    "ddp": frozenset(),
    "zero1": frozenset({"optimizer"}),
    "zero2": frozenset({"optimizer", "grads"}),
    "zero3": frozenset({"optimizer", "grads", "params"}),
}


def zero_model_state_bytes(
    psi: float, nd: int, stage: str, precision: str = "mixed"
) -> dict[str, float]:
    """Bytes per device of params, grads and optimizer states, the paper's formulas:
    DDP (2 + 2 + K)Ψ; ZeRO-1 2Ψ + 2Ψ + KΨ/N_d; ZeRO-2 2Ψ + (2 + K)Ψ/N_d;
    ZeRO-3 (2 + 2 + K)Ψ/N_d (with 4, 4, 8 for fp32). Exact, unrounded."""
    param_bytes, grad_bytes, k = ZERO_PRECISIONS[precision]
    sharded = ZERO_SHARDED["zero3" if stage == "fsdp2" else stage]
    full = {"params": param_bytes * psi, "grads": grad_bytes * psi, "optimizer": k * psi}
    return {name: value / nd if name in sharded else value for name, value in full.items()}


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


# Recomputation choices of Korthikanti et al. 2022: none, selective (the attention
# scores and softmax are recomputed in backward), full (only each layer's input is kept).
RECOMPUTE = ("none", "selective", "full")


def transformer_activation_bytes_per_layer_tp(
    seq: int, micro: int, hidden: int, heads: int, tp: int = 1, recompute: str = "none"
) -> float:
    """Bytes one layer keeps for backward, 16-bit, under tensor parallelism of degree t
    with sequence parallelism (Korthikanti et al. 2022, Table 2; Megatron's
    `theoretical_memory_usage.py`): none s·b·h·(34/t + 5as/(ht)); selective 34·s·b·h/t;
    full 2·s·b·h/t (the layer's input, sharded along the sequence). At t = 1 "none" is
    `transformer_activation_bytes_per_layer`."""
    sbh = seq * micro * hidden
    if recompute == "none":
        return sbh * (34 / tp + 5 * heads * seq / (hidden * tp))
    if recompute == "selective":
        return sbh * 34 / tp
    if recompute == "full":
        return sbh * 2 / tp
    raise KeyError(recompute)
