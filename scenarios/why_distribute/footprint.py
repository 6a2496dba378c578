"""Where a model's memory goes on one GPU, and how long one GPU takes to train it.

Lesson 0's arithmetic, from docs/references.md ("Why distribute", "Data
parallel and ZeRO", "Tensor parallel", "Distributed inference"), the ZeRO paper's
model-state bytes taken from runtime.sim.formulas (lesson 2 reads them too):

- the model's shape for Ψ parameters, when only Ψ is given (`shape_for`);
- bytes per GPU by category: params, grads and optimizer states (the ZeRO paper's
  16 B/param with Adam, in fp32 or mixed precision, sharded by the ZeRO stage over
  the data-parallel ranks, split by TP and PP), activations (Korthikanti et al.'s
  bytes per layer under TP with sequence parallelism and the chosen recomputation,
  times the layers a stage holds and the microbatches in flight);
- inference: the weights and the KV cache of `seq` tokens;
- training time on one GPU: 6·T·Ψ FLOPs (8·T·Ψ with full recomputation) over the
  achieved FLOP/s (Narayanan et al. 2021).

Imports: runtime's pure part and the shared MiniGPT shape type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runtime.sim import formulas
from scenarios.why_distribute.model import Model

# Below this many parameters a derived shape keeps the MiniGPT's vocabulary (64); at
# and above it, Llama's 32,000 (a tiny model with a 32k vocabulary would be all embedding).
LARGE_MODEL = 100_000_000
LARGE_VOCAB = 32_000
SMALL_VOCAB = 64
# Recomputation choices of Korthikanti et al. 2022: none, selective (the attention
# scores and softmax are recomputed in backward), full (only each layer's input is kept).
RECOMPUTE = ("none", "selective", "full")


# Published shapes (layers, hidden, heads) a learner means by "7B" or "70B": Llama 2
# (Touvron et al. 2023, Table 1 and its model card), GPT-3 175B (Brown et al. 2020,
# Table 2.1) and Megatron's 1T (Narayanan et al. 2021, Table 1).
KNOWN_SHAPES: dict[float, tuple[int, int, int]] = {
    7e9: (32, 4096, 32),
    13e9: (40, 5120, 40),
    70e9: (80, 8192, 64),
    175e9: (96, 12288, 96),
    1e12: (128, 25600, 160),
}
# Ψ within this share of a published model's takes its shape.
KNOWN_WITHIN = 0.1


def shape_for(psi: int, seq: int) -> Model:
    """A published shape when Ψ is within 10% of one (KNOWN_SHAPES), else one derived:
    GPT-3's aspect, hidden ≈ 128 × layers, so
    12·L·h² ≈ Ψ gives h ≈ (128Ψ/12)^⅓; heads of 128 dimensions (64 below h = 2048),
    their count a multiple of 8 from 8 on (so TP up to 8 divides them); then the
    layers that make Ψ with the embedding and head (Ψ = Vh + sh + L(12h² + 13h) + 3h
    + hV, runtime.sim.formulas.gpt_parameter_count)."""
    vocab = LARGE_VOCAB if psi >= LARGE_MODEL else SMALL_VOCAB
    for known, (layers, hidden, heads) in KNOWN_SHAPES.items():
        if abs(psi / known - 1) <= KNOWN_WITHIN:
            return Model(layers, hidden, heads, seq, vocab, psi_given=float(psi))
    raw = (128 * psi / 12) ** (1 / 3)
    head_dim = 128 if raw >= 2048 else 64
    heads = max(1, round(raw / head_dim))
    if heads >= 8:
        heads = 8 * max(1, round(heads / 8))
    hidden = heads * head_dim
    rest = psi - (2 * vocab + seq + 2) * hidden
    layers = max(1, round(rest / (12 * hidden * hidden + 13 * hidden)))
    return Model(layers, hidden, heads, seq, vocab, psi_given=float(psi))


@dataclass(frozen=True)
class Layout:
    """How the model is split on one GPU's share: TP degree, PP stages (v chunks each),
    DP degree, ZeRO stage, recomputation, microbatch size and microbatches per step."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: str = "ddp"
    recompute: str = "none"
    micro: int = 1
    microbatches: int = 1
    chunks: int = 1
    cp: int = 1  # context parallelism: the sequence split over cp ranks (ring attention)

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def stage_layers(self, layers: int) -> int:
        """Layers on the busiest stage (an uneven split puts one more on the first)."""
        return math.ceil(layers / self.pp)

    def in_flight(self) -> float:
        """Microbatches whose activations the first stage holds at its peak: 1 without a
        pipeline (microbatches run one after the other); min(m, p) under 1F1B (Narayanan
        et al. 2021); interleaving adds Megatron's (1 + (p − 1)/(p·v))."""
        if self.pp == 1:
            return 1.0
        held = float(min(self.microbatches, self.pp))
        if self.chunks > 1:
            held *= 1 + (self.pp - 1) / (self.pp * self.chunks)
        return held


def training_bytes(
    psi: float, shape: Model, precision: str, layout: Layout, *, flash: bool = False
) -> dict[str, float]:
    """Bytes on the busiest GPU by category (params, grads, optimizer, activations).
    Activations: Korthikanti et al.'s bytes per layer (runtime.sim.formulas
    .layer_activation_bytes, with sequence parallelism, the sequence split over CP)
    times the layers a stage holds and the microbatches in flight; under full
    recomputation, one layer's whole activations on top while its backward runs."""
    layers = layout.stage_layers(shape.layers)
    ends = shape.embedding_weights if layout.pp == 1 else shape.vocab * shape.hidden
    local = (layers * shape.layer_weights + ends) / layout.tp  # before ZeRO
    out = formulas.zero_model_state_bytes(local, layout.dp, layout.zero, precision)
    fused = flash or layout.cp > 1
    per_layer = shape.activation_bytes(
        layout.micro, layout.tp, layout.cp, layout.recompute, flash=fused
    )
    working = 0.0
    if layout.recompute == "full":  # the layer being recomputed holds all of its own
        working = shape.activation_bytes(layout.micro, layout.tp, layout.cp, "none", flash=fused)
    scale = 2 if precision == "fp32" else 1  # the formulas count 16-bit activations
    out["activations"] = scale * (per_layer * layers * layout.in_flight() + working)
    return out


def element_bytes(precision: str) -> int:
    """Bytes of one weight (and one activation) as the model computes: 2 in mixed
    precision (fp16/bf16), 4 in fp32."""
    return formulas.ZERO_PRECISIONS[precision][0]


def inference_bytes(psi: float, shape: Model, precision: str, batch: int) -> dict[str, float]:
    """Serving on one GPU: the weights, and the KV cache of `batch` sequences of
    `seq` tokens, 2·L·kv·d·bytes per token (every KV head keeps its keys and values;
    docs/references.md, "Distributed inference")."""
    elem = element_bytes(precision)
    kv = 2 * shape.layers * shape.kv * shape.head_dim * elem * shape.seq * batch
    return {"params": psi * elem, "activations": float(kv)}


def flops_factor(recompute: str) -> int:
    """FLOPs per token per parameter: 6 (forward 2, backward 4), 8 when the forward is
    computed again in backward (full recomputation; selective recomputes only the
    attention scores, a few percent, counted as 6)."""
    return 8 if recompute == "full" else 6


def one_gpu_seconds(psi: float, tokens: float, achieved_flops: float, recompute: str) -> float:
    """Narayanan et al. 2021's rule on one GPU: k·T·Ψ / X."""
    return flops_factor(recompute) * tokens * psi / achieved_flops


def rule_of_thumb_seconds(
    psi: float, tokens: float, gpus: int, achieved_flops: float, recompute: str
) -> float:
    """k·T·Ψ / (n·X): the same rule on n GPUs, as if nothing but FLOPs took time."""
    return one_gpu_seconds(psi, tokens, achieved_flops, recompute) / gpus
