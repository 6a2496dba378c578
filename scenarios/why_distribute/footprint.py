"""Where a model's memory goes on one GPU, and how long one GPU takes to train it.

Lesson 0's arithmetic, from docs/references.md ("Why distribute", "Data
parallel and ZeRO", "Tensor parallel", "Distributed inference"), the ZeRO paper's
model-state bytes taken from runtime.sim.formulas (lesson 2 reads them too):

- the model's shape for Ψ parameters, when only Ψ is given (`shape_for`);
- bytes per GPU by category: params, grads and optimizer states (the ZeRO paper's
  16 B/param with Adam, in fp32 or mixed precision, sharded by the ZeRO stage over
  the data-parallel ranks, split by TP and PP), activations (Korthikanti et al.'s
  bytes per layer under TP with sequence parallelism and the chosen recomputation,
  times the layer-microbatches the pipeline schedule has each rank hold, the busiest
  rank's; `chunk_layers` says how the layers fall on the pipeline's chunks);
- inference: the weights and the KV cache of `seq` tokens;
- training time on one GPU: 6·T·Ψ FLOPs (8·T·Ψ with full recomputation) over the
  achieved FLOP/s (Narayanan et al. 2021).

Imports: runtime's pure part and the shared MiniGPT shape type.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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
    engine: str = "megatron"  # whose pipeline runs it: Megatron's schedules or DeepSpeed's

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def stage_layers(self, layers: int) -> int:
        """Layers on the busiest pipeline rank (its chunks summed: `chunk_layers`)."""
        return max(self.rank_layers(layers))

    def rank_layers(self, layers: int) -> tuple[int, ...]:
        """Transformer layers on each pipeline rank, its v chunks summed."""
        return _rank_layers(layers, self.pp, self.chunks)

    def held(self, layers: int) -> tuple[int, ...]:
        """Layer-microbatches whose activations each pipeline rank holds at its peak, from
        the schedule's order of forwards (Narayanan et al. 2021; Megatron-LM's
        schedules.py): without a pipeline one microbatch at a time; under 1F1B, rank r
        runs p − r − 1 warm-up forwards and one more before its first backward, so it
        holds min(p − r, m) microbatches of all its layers; interleaved, rank r's
        warm-up is 2·(p − r − 1) + (v − 1)·p chunk-forwards, plus one, in groups of
        min(m, p) microbatches per chunk (chunk c of rank r is virtual stage c·p + r),
        each holding that chunk's layers."""
        return _held(layers, self.pp, self.chunks, self.microbatches)


@lru_cache(maxsize=4096)  # the planner asks the same pipelines for many DP degrees
def _rank_layers(layers: int, p: int, v: int) -> tuple[int, ...]:
    split = chunk_layers(layers, p * v)
    return tuple(sum(split[c * p + r] for c in range(v)) for r in range(p))


@lru_cache(maxsize=4096)
def _held(layers: int, p: int, v: int, m: int) -> tuple[int, ...]:
    split = chunk_layers(layers, p * v)
    if p == 1:
        return (layers,)
    if v == 1:
        return tuple(min(p - r, m) * split[r] for r in range(p))
    group = min(m, p)  # microbatches a chunk runs before the next chunk's turn
    out = []
    for r in range(p):
        forwards = min(2 * (p - r - 1) + (v - 1) * p + 1, v * m)
        full, rest = divmod(forwards, group)
        held = sum(group * split[(g % v) * p + r] for g in range(full))
        out.append(held + rest * split[(full % v) * p + r])
    return tuple(out)


@lru_cache(maxsize=1024)
def chunk_layers(layers: int, chunks: int) -> tuple[int, ...]:
    """Transformer layers of each of the pipeline's `chunks` virtual stages, in order.
    When layers + 2 divide evenly, the first and the last chunk take one layer fewer,
    to make room for the embedding and for the output layer and its loss: Llama 3's
    balance (Llama Team 2024, §3.3.2: 126 layers on 16 stages of 8 one-layer chunks,
    the first holding only the embedding, the last only the output) and BLOOM's
    (70 layers and 2 embeddings on 12 stages of 6). Else as evenly as they go, the
    first ones one more (runtime.sim.formulas.even_split), as Megatron splits them."""
    if chunks > 1 and (layers + 2) % chunks == 0 and (layers + 2) // chunks >= 1:
        k = (layers + 2) // chunks
        return (k - 1, *[k] * (chunks - 2), k - 1)
    return tuple(formulas.even_split(layers, chunks))


def fits_chunks(layers: int, chunks: int) -> bool:
    """A pipeline of `chunks` virtual stages can hold `layers`: at most one chunk a
    layer, or exactly two more (the embedding and the output as chunks of their own)."""
    return chunks <= layers or chunks == layers + 2


def training_bytes(
    psi: float, shape: Model, precision: str, layout: Layout, *, flash: bool = False
) -> dict[str, float]:
    """Bytes on the busiest GPU by category (params, grads, optimizer, activations),
    the pipeline rank whose total is largest. Weights: the rank's layers, and the
    embedding on the first and the output layer on the last (both without a
    pipeline). Activations: Korthikanti et al.'s bytes per layer (runtime.sim.formulas
    .layer_activation_bytes, with sequence parallelism, the sequence split over CP)
    times the layer-microbatches the schedule has the rank hold (Layout.held); under
    full recomputation, one layer's whole activations on top while its backward runs."""
    fused = flash or layout.cp > 1
    per_layer = shape.activation_bytes(
        layout.micro, layout.tp, layout.cp, layout.recompute, flash=fused
    )
    working = 0.0
    if layout.recompute == "full":  # the layer being recomputed holds all of its own
        working = shape.activation_bytes(layout.micro, layout.tp, layout.cp, "none", flash=fused)
    scale = 2 if precision == "fp32" else 1  # the formulas count 16-bit activations
    held = layout.held(shape.layers)
    # The model states are linear in the elements a rank holds: their bytes per element
    # once, then each rank's total, and the busiest rank's bytes by category.
    per_element = _state_bytes(layout.dp, layout.zero, precision)
    state = sum(per_element.values())
    ranks = layout.rank_layers(shape.layers)
    busiest, most = 0, -1.0
    for rank in _candidates(shape.layers, layout.pp, layout.chunks, layout.microbatches):
        total = state * _local(shape, layout, rank, ranks[rank]) + scale * per_layer * held[rank]
        if total > most:
            busiest, most = rank, total
    local = _local(shape, layout, busiest, ranks[busiest])
    out = {category: nbytes * local for category, nbytes in per_element.items()}
    out["activations"] = scale * (per_layer * held[busiest] + working)
    return out


@lru_cache(maxsize=256)
def _state_bytes(dp: int, zero: str, precision: str) -> dict[str, float]:
    """Bytes of model state per element a rank holds (runtime.sim.formulas: linear in Ψ)."""
    return formulas.zero_model_state_bytes(1.0, dp, zero, precision)


@lru_cache(maxsize=4096)
def _candidates(layers: int, p: int, v: int, m: int) -> tuple[int, ...]:
    """The pipeline ranks that can be the busiest: the first and the last (they hold the
    embedding and the output layer), and of the others those no other one outdoes in
    both layers and activations held (the planner costs thousands of layouts)."""
    ranks, held = _rank_layers(layers, p, v), _held(layers, p, v, m)
    middle = range(1, p - 1)
    front = [
        r for r in middle
        if not any(ranks[o] >= ranks[r] and held[o] >= held[r]
                   and (ranks[o], held[o]) != (ranks[r], held[r]) for o in middle)
    ]  # fmt: skip
    return tuple(sorted({0, p - 1, *front}))


def _local(shape: Model, layout: Layout, rank: int, layers: int) -> float:
    """Elements pipeline rank `rank` holds before ZeRO shards them, over TP: its layers,
    and the embedding on the first and the output layer on the last (a tied head is a
    copy there), both without a pipeline."""
    if layout.pp == 1:
        ends = shape.embedding_weights
    else:
        ends = shape.vocab * shape.hidden if rank in (0, layout.pp - 1) else 0
    return (layers * shape.layer_weights + ends) / layout.tp


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
