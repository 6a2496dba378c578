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


def pairwise_all_to_all_time(
    n: int, sizes: tuple[float, ...] | list[float], alpha: float, beta: float
) -> float:
    """Pairwise exchange: n-1 rounds, in each every member sends one peer its block (S_i/n
    of the S_i bytes member i sends in all); a round lasts as long as its largest block,
    so (n-1)α + max_i S_i·(n-1)/n·β. Even sizes S: (n-1)α + S(n-1)/n·β."""
    return (n - 1) * alpha + max(sizes) * (n - 1) / n * beta


# -- nccl-tests doc/PERFORMANCE.md -------------------------------------------
def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth S/t, bytes per second (busbw, its kind's factor times this:
    runtime.sim.collective_kinds.busbw)."""
    return nbytes / seconds


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


def gpt_parameter_count(vocab: int, seq: int, hidden: int, layers: int) -> int:
    """Parameters of MiniGPT (runtime.engine.models): embeddings, blocks with biases, final
    LayerNorm and an untied head without bias. Per block: 12h² + 13h."""
    h = hidden
    block = 12 * h * h + 13 * h
    return vocab * h + seq * h + layers * block + 2 * h + h * vocab


# -- ZeRO and FSDP memory (Rajbhandari et al. 2019, "ZeRO", Fig. 1 and §5) ------------
# Shared by lesson 2 (scenarios.zero.formulas, with the per-step communication) and
# lesson 0's footprint (scenarios.why_distribute.footprint, with the activations).
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


# -- activation memory (Korthikanti et al. 2022, Table 2; Megatron's theoretical_memory_usage)
# Shared by lesson 4 (scenarios.tensor_parallel.memory: the paper's six configurations)
# and lesson 0's planner (scenarios.why_distribute.footprint: any shape, GQA, SwiGLU).
ACTIVATION_RECOMPUTE = ("none", "selective", "full")


def layer_activation_bytes(
    s: int,
    b: int,
    h: int,
    a: int,
    t: int = 1,
    *,
    sequence_parallel: bool = True,
    recompute: str = "none",
    ffn: int | None = None,
    kv_heads: int | None = None,
    mlp: str = "gelu",
    scores: bool = True,
) -> float:
    """Bytes one Transformer layer keeps for backward, 16-bit activations with dropout.

    Korthikanti's terms, per s·b·h: 10 never split by TP (two LayerNorm inputs 4, the
    two dropout masks 2, the QKV and first MLP inputs 2 each; split by t too under
    sequence parallelism), 24 split by heads or columns (Q 2, K and V 2 each, the
    output projection's input 2, the GELU's input and output 2·f/h each = 16 at
    f = 4h), and the attention scores 5·a·s²·b (softmax output, its dropout mask and
    output), split by t. With GQA, K and V hold kv_heads/a of Q's size; a SwiGLU MLP
    keeps its gate and up projections and their product, 3·2·f/h, and trains without
    dropout (no masks: 8 rather than 10 unsplit). `scores=False`: a
    fused (flash) attention keeps no s² term. Selective recomputation drops the
    scores; full recomputation keeps only the layer's input, 2·s·b·h, which is not
    divided by t (the paper's Table 2)."""
    sbh = s * b * h
    f = 4 * h if ffn is None else ffn
    kv = a if kv_heads is None else kv_heads
    if recompute == "full":
        return 2 * sbh
    if recompute not in ACTIVATION_RECOMPUTE:
        raise KeyError(recompute)
    mlp_terms = (6 if mlp == "swiglu" else 4) * f / h
    rep = 8 if mlp == "swiglu" else 10  # Llama-family models train without dropout's 2 masks
    par = 2 + 4 * kv / a + 2 + mlp_terms  # 24 exactly at kv = a, f = 4h, GELU
    keep_scores = scores and recompute == "none"
    score = 5 * a * s / h
    if sequence_parallel:
        if not keep_scores:
            return sbh * (rep + par) / t
        return sbh * ((rep + par) / t + score / t)
    if not keep_scores:
        return sbh * (rep + par / t)
    return sbh * (rep + par / t + score / t)
