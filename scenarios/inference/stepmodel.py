"""How long one serving iteration takes: the roofline of a decode or prefill step.

Part of lesson 7's mechanism, pure. The same formulas plan the Program's
schedule (the planning clock), estimate its compute costs before a run, and
predict at scale on a GPU profile (the config search), so a number means the
same thing everywhere. docs/references.md, "Distributed inference".

An iteration asks a slice of the model (some layers, maybe the embedding and
the head, 1/t of each matrix under TP) to process a `Work`: T new positions in
S sequences, each attending to its context (A = Σ query·key pairs, K = Σ
context read from the KV cache), O of them emitting a token. Per part of the
model, one rank spends

    max(FLOPs / peak, bytes / bandwidth) + operators · launch

(JAX scaling book, inference: decode step ≈ B·KV_bytes/BW + max(2·B·P/FLOPs,
P_bytes/BW)): the weights are read once per iteration whatever the batch, so a
decode step is bandwidth-bound until the batch is large; a prefill of many
tokens is compute-bound. The KV read grows with every sequence's context.

- FLOPs: 2 per weight per token, and 4·q_dim per query·key pair (QKᵀ and AV).
- Bytes: the slice's weights, the KV read, the new KV written.
- Operators: each part is a few eager operators (`launch` seconds each: the
  calibrated ComputeRates.op_seconds); on a CPU this is most of a small model's
  time, and the MiniGPT's attention is a loop over sequences there (47
  operators each, `seq_ops`), where a GPU's paged-attention kernel takes the
  batch at once (seq_ops 0).
- Under TP each rank holds heads/t query heads and max(1, kv_heads/t) KV heads
  (beyond t = kv_heads the KV heads are replicated, as vLLM does); the layer
  then all-reduces T·h activations twice and the head all-gathers O·V logits.
- Memory bandwidth: runtime.sim.compute's rates state Adam as 28 bytes per element
  streamed through memory (`gpu()`), so bandwidth = 28 / adam_s_per_element:
  the datasheet's HBM figure on a GPU profile, about 9 GB/s on a typical CPU
  core.

Pure: stdlib and runtime's pure part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from runtime.sim import formulas
from runtime.sim.compute import TYPICAL_CPU, ComputeRates
from runtime.sim.costmodel import CostModel
from runtime.sim.profiles import PROFILES

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
ADAM_BYTES_PER_ELEMENT = 28  # runtime.sim.compute.gpu: what Adam streams per parameter
TOKEN_BYTES = 8  # a sampled token id (int64) sent back to the first stage
# Eager operators per part of a layer, and per sequence in attention, as the rank code
# (scenarios.inference.decode) dispatches them (counted in tests/test_inference_ops.py):
# norm, projections, views, residual add; per sequence its positions, block table, the
# K/V writes and gathers, the mask and scaled_dot_product_attention's own operators.
OPS = {"embed": 4, "attn": 10, "mlp": 6, "head": 7}
SEQ_OPS_CPU = 47
EMBED_SEQ_OPS_CPU = 1  # each sequence's positions


@dataclass(frozen=True)
class Shape:
    """The served model: the MiniGPT on a real run, any transformer in predict."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    seq: int
    dtype_bytes: int = 4
    total_params: int | None = None  # the `params` knob: weights counted from it instead

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def kv_bytes_per_token(self) -> int:
        """2 (K and V) · layers · kv_heads · head_dim · bytes per element."""
        return 2 * self.layers * self.kv_dim * self.dtype_bytes

    def _layer_parts(self) -> tuple[float, float]:
        attn = 2 * self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim
        mlp = 8 * self.hidden * self.hidden  # the MiniGPT's 4h MLP: two h x 4h matrices
        if self.total_params is not None:
            per_layer = max(0.0, self.total_params - self.edge_params) / self.layers
            scale = per_layer / (attn + mlp)
            return attn * scale, mlp * scale
        return float(attn), float(mlp)

    @cached_property
    def attn_params(self) -> float:
        return self._layer_parts()[0]

    @cached_property
    def mlp_params(self) -> float:
        return self._layer_parts()[1]

    @property
    def edge_params(self) -> int:
        """Embeddings (tokens, positions) and the head."""
        return 2 * self.vocab * self.hidden + self.seq * self.hidden

    @property
    def parameters(self) -> float:
        if self.total_params is not None:
            return float(self.total_params)
        return self.layers * (self.attn_params + self.mlp_params) + self.edge_params

    @property
    def weight_bytes(self) -> float:
        return self.parameters * self.dtype_bytes

    def kv_heads_per_rank(self, tp: int) -> int:
        return max(1, self.kv_heads // tp)


class Work(NamedTuple):  # one per iteration: a NamedTuple, quick to build
    """What one iteration asks of the model: T positions in S sequences, A query·key
    pairs, K context positions read from the cache, O tokens emitted."""

    tokens: int = 0
    seqs: int = 0
    attn: int = 0
    kv: int = 0
    outs: int = 0

    @classmethod
    def of(cls, pieces: Iterable[tuple[int, int, bool]]) -> Work:
        """From (first position, positions, emits) of each sequence's share."""
        tokens = seqs = attn = kv = outs = 0
        for start, count, emits in pieces:
            tokens += count
            seqs += 1
            # query j (at position start + j) sees start + j + 1 keys
            attn += count * start + count * (count + 1) // 2
            kv += start + count
            outs += int(emits)
        return cls(tokens, seqs, attn, kv, outs)


@dataclass(frozen=True)
class Device:
    """One rank's speed: compute, memory, operator launch, links (alpha-beta)."""

    flops_per_s: float
    bytes_per_s: float
    launch_s: float
    seq_ops: int
    alpha: float
    beta: float
    gamma: float
    inter_alpha: float | None = None
    inter_beta: float | None = None
    per_node: int | None = None
    memory_bytes: float | None = None

    @classmethod
    def of(cls, model: CostModel, *, gpu: bool | None = None) -> Device:
        rates: ComputeRates = model.rates or TYPICAL_CPU
        on_gpu = rates.peak_flops_per_s is not None if gpu is None else gpu
        return cls(
            flops_per_s=rates.forward_flops_per_s,
            bytes_per_s=ADAM_BYTES_PER_ELEMENT / max(rates.adam_s_per_element, 1e-15),
            launch_s=rates.op_seconds(),
            seq_ops=0 if on_gpu else SEQ_OPS_CPU,
            alpha=model.alpha,
            beta=model.beta,
            gamma=model.gamma,
            inter_alpha=model.inter_alpha,
            inter_beta=model.inter_beta,
            per_node=model.ranks_per_node,
            memory_bytes=rates.memory_bytes,
        )

    def link(self, ranks: int) -> tuple[float, float]:
        """(alpha, beta) of a group of `ranks` consecutive ranks: inter-node once it
        spans two nodes."""
        if self.per_node is None or ranks <= self.per_node or self.inter_alpha is None:
            return self.alpha, self.beta
        return max(self.alpha, self.inter_alpha), max(self.beta, self.inter_beta or 0.0)


# What a real run's schedule is planned with (the Program must follow from the params
# alone: every rank and torchrun build the same one): a typical CPU core's rates and
# loopback links (runtime.sim.profiles' cpu-default), the course machine's two cores.
PLANNING_CORES = 2


def planning_device() -> Device:
    return Device.of(PROFILES["cpu-default"], gpu=False)


# -- one rank's compute --------------------------------------------------------------------
def part_seconds(shape: Shape, device: Device, part: str, work: Work, tp: int = 1) -> float:
    """One rank's seconds for one part ("embed", "attn", "mlp", "head") of one layer."""
    wb = shape.dtype_bytes
    ops = OPS[part]
    if part == "embed":
        flops, nbytes = 0.0, work.tokens * shape.hidden * wb
        ops += EMBED_SEQ_OPS_CPU * work.seqs if device.seq_ops else 0
    elif part == "attn":
        weights = shape.attn_params / tp
        kv_width = 2 * shape.kv_heads_per_rank(tp) * shape.head_dim * wb
        flops = 2 * weights * work.tokens + 4 * (shape.q_dim / tp) * work.attn
        nbytes = weights * wb + kv_width * (work.kv + work.tokens)
        ops += device.seq_ops * work.seqs
    elif part == "mlp":
        weights = shape.mlp_params / tp
        flops, nbytes = 2 * weights * work.tokens, weights * wb
    else:
        weights = shape.hidden * shape.vocab / tp
        flops, nbytes = 2 * weights * work.outs, weights * wb
    return max(flops / device.flops_per_s, nbytes / device.bytes_per_s) + ops * device.launch_s


def slice_seconds(
    shape: Shape, device: Device, work: Work, layers: int, *, embed: bool, head: bool, tp: int = 1
) -> float:
    """One rank's compute for `layers` layers (and the embedding, the head) of a slice."""
    total = layers * (
        part_seconds(shape, device, "attn", work, tp) + part_seconds(shape, device, "mlp", work, tp)
    )
    if embed:
        total += part_seconds(shape, device, "embed", work, tp)
    if head:
        total += part_seconds(shape, device, "head", work, tp)
    return total


# -- communication ---------------------------------------------------------------------------
def all_reduce_seconds(device: Device, nbytes: float, ranks: int) -> float:
    if ranks <= 1:
        return 0.0
    alpha, beta = device.link(ranks)
    return formulas.ring_all_reduce_time(ranks, nbytes, alpha, beta, device.gamma)


def all_gather_seconds(device: Device, nbytes: float, ranks: int) -> float:
    if ranks <= 1:
        return 0.0
    alpha, beta = device.link(ranks)
    return formulas.ring_all_gather_time(ranks, nbytes, alpha, beta)


def tp_comm_seconds(shape: Shape, device: Device, work: Work, layers: int, tp: int, head: bool):
    """TP's collectives in one iteration of a slice: 2 all-reduces of T·h per layer
    (after attention's and the MLP's row-parallel matrices), the head's all-gather."""
    per_layer = 2 * all_reduce_seconds(device, work.tokens * shape.hidden * shape.dtype_bytes, tp)
    gather = all_gather_seconds(device, work.outs * shape.vocab * shape.dtype_bytes, tp)
    return layers * per_layer + (gather if head else 0.0)


def hop_seconds(shape: Shape, device: Device, work: Work, *, across_nodes: bool) -> float:
    """PP: one stage's activations (T·h) to the next."""
    alpha, beta = (device.inter_alpha or device.alpha, device.inter_beta or device.beta)
    if not across_nodes:
        alpha, beta = device.alpha, device.beta
    return alpha + work.tokens * shape.hidden * shape.dtype_bytes * beta


def back_seconds(device: Device, work: Work, *, across_nodes: bool) -> float:
    """PP: the sampled tokens from the last stage back to the first."""
    alpha, beta = (device.inter_alpha or device.alpha, device.inter_beta or device.beta)
    if not across_nodes:
        alpha, beta = device.alpha, device.beta
    return alpha + work.outs * TOKEN_BYTES * beta
