"""The planned model's shape, and what follows from it: Ψ, FLOPs per token, activation bytes.

Part of lesson 0's planner (scenarios.why_distribute.planner reads it through
.costs and .footprint). A learner names a model three ways: by its shape
(`layers`, `hidden`, `ffn`, `heads`, `kv_heads`, `vocab`, `seq`, `mlp`), by a
`preset` of a published model (PRESETS, each with its source), or by `params`
alone, from which a shape is derived (footprint.shape_for) and the output says so.

Two families, as published:
- `gelu` (GPT-3, Megatron, BLOOM, OPT): biases, LayerNorm, learned positions,
  the head tied to the embedding, an MLP of two matrices h × f. Ψ is Narayanan et
  al. 2021's 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)) at f = 4h;
- `swiglu` (Llama): no biases, RMSNorm, rotary positions, an untied head, an MLP
  of three matrices h × f, and grouped-query attention (K and V of `kv_heads`).

FLOPs: a matmul of an m × k by a k × n costs 2·m·k·n; attention 4·s·h per token
and layer forward over s keys, half that when the kernel skips the causal mask's
zeros (`causal`). Model FLOPs (what MFU counts) are 6 per matmul weight per token
plus causal attention; hardware FLOPs (HFU) what the GPUs execute, recomputation
included.

Imports: runtime's pure part only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from runtime.sim import formulas

MLPS = ("gelu", "swiglu")


@dataclass(frozen=True)
class Model:
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    ffn: int = 0  # 0: 4·hidden
    kv_heads: int = 0  # 0: heads (no GQA)
    mlp: str = "gelu"
    psi_given: float = 0.0  # Ψ as the learner gave it (params=), else derived from the shape

    @cached_property
    def f(self) -> int:
        return self.ffn or 4 * self.hidden

    @cached_property
    def kv(self) -> int:
        return self.kv_heads or self.heads

    @cached_property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @cached_property
    def layer_matmul_weights(self) -> int:
        """Weights of one layer's matmuls: Q and the output projection h², K and V
        h·kv·d each, the MLP 2·h·f (GELU) or 3·h·f (SwiGLU)."""
        h = self.hidden
        attention = 2 * h * h + 2 * h * self.kv * self.head_dim
        return attention + (3 if self.mlp == "swiglu" else 2) * h * self.f

    @cached_property
    def layer_other_weights(self) -> int:
        """Biases and norms of one layer: GELU models carry biases on every matmul and
        two LayerNorms (weight and bias); SwiGLU models two RMSNorm weights."""
        h = self.hidden
        if self.mlp == "swiglu":
            return 2 * h
        return (h + 2 * self.kv * self.head_dim) + h + self.f + h + 4 * h

    @cached_property
    def embedding_weights(self) -> int:
        """Token embedding, learned positions (GELU models), the final norm, and the
        head: tied to the embedding in GELU models, its own matrix in SwiGLU ones."""
        h = self.hidden
        if self.mlp == "swiglu":
            return 2 * self.vocab * h + h
        return self.vocab * h + self.seq * h + 2 * h

    @cached_property
    def shape_parameters(self) -> int:
        per_layer = self.layer_matmul_weights + self.layer_other_weights
        return self.layers * per_layer + self.embedding_weights

    @cached_property
    def psi(self) -> float:
        return self.psi_given or float(self.shape_parameters)

    @cached_property
    def layer_weights(self) -> float:
        """One layer's share of Ψ (params= given: Ψ less the embeddings, over the layers)."""
        if self.psi_given:
            return max(1.0, (self.psi_given - self.embedding_weights) / self.layers)
        return float(self.layer_matmul_weights + self.layer_other_weights)

    @cached_property
    def layer_flops_weights(self) -> float:
        """Weights a token multiplies by in one layer (the matmuls; scaled to Ψ when Ψ
        was given and the shape derived)."""
        if self.psi_given:
            share = self.layer_matmul_weights / (
                self.layer_matmul_weights + self.layer_other_weights
            )
            return self.layer_weights * share
        return float(self.layer_matmul_weights)

    def attention_flops(self, tokens: float, keys: float, causal: bool) -> float:
        """Forward FLOPs of QKᵀ and AV for `tokens` queries over `keys` keys, one layer:
        4·tokens·keys·h, half of it when the kernel skips the masked half."""
        full = 4 * tokens * keys * self.hidden
        return full / 2 if causal else full

    def model_flops_per_token(self) -> float:
        """What MFU counts: 6 per matmul weight (forward 2, backward 4), the head's
        included, plus causal attention, 6·l·s·h (PaLM's 12·l·h·s, halved by the mask)."""
        head = self.vocab * self.hidden
        weights = self.layers * self.layer_flops_weights + head
        return 6 * weights + 3 * self.layers * self.attention_flops(1, self.seq, causal=True)

    def activation_bytes(
        self, micro: int, tp: int, cp: int, recompute: str, *, flash: bool
    ) -> float:
        """Bytes one layer keeps for backward on one GPU (Korthikanti et al. 2022 with
        sequence parallelism, GQA and SwiGLU: runtime.sim.formulas.layer_activation_bytes),
        the sequence split over `cp` context-parallel ranks."""
        return _activation_bytes(self, micro, tp, cp, recompute, flash)

    def one_layer(self) -> Model:
        return replace(self, layers=1, psi_given=self.layer_weights if self.psi_given else 0.0)


@lru_cache(maxsize=256)  # the planner asks the same few thousands of times
def _activation_bytes(
    self: Model, micro: int, tp: int, cp: int, recompute: str, flash: bool
) -> float:
    return formulas.layer_activation_bytes(
        max(1, self.seq // cp),
        micro,
        self.hidden,
        self.heads,
        tp,
        recompute=recompute,
        ffn=self.f,
        kv_heads=self.kv,
        mlp=self.mlp,
        scores=not flash,
    )


@dataclass(frozen=True)
class Preset:
    model: Model
    source: str


# Published dense models, each with where its shape is printed.
PRESETS: dict[str, Preset] = {
    "gpt3-175b": Preset(
        Model(96, 12288, 96, 2048, 50257, 4 * 12288),
        "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1",
    ),
    "megatron-1t": Preset(
        Model(128, 25600, 160, 2048, 51200),
        "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU "
        "Clusters Using Megatron-LM, Table 1",
    ),
    # Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat Models", Table 1
    # (7B: 4k context, no GQA); its widths as Meta released them (params.json). The source
    # names no English words: it is printed inside Spanish sentences too.
    "llama2-7b": Preset(
        Model(32, 4096, 32, 4096, 32000, 11008, 32, "swiglu"),
        "Touvron et al. 2023, Llama 2, Table 1; params.json (Meta)",
    ),
    "llama3-8b": Preset(
        Model(32, 4096, 32, 8192, 128256, 14336, 8, "swiglu"),
        "Llama Team, Meta 2024, The Llama 3 Herd of Models, Table 3",
    ),
    "llama3-70b": Preset(
        Model(80, 8192, 64, 8192, 128256, 28672, 8, "swiglu"),
        "Llama Team, Meta 2024, The Llama 3 Herd of Models, Table 3",
    ),
    "llama3-405b": Preset(
        Model(126, 16384, 128, 8192, 128256, 53248, 8, "swiglu"),
        "Llama Team, Meta 2024, The Llama 3 Herd of Models, Table 3",
    ),
    "mt-nlg-530b": Preset(
        Model(105, 20480, 128, 2048, 51200),
        "Smith et al. 2022, Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B",
    ),
    "bloom-176b": Preset(
        Model(70, 14336, 112, 2048, 250880),
        "BigScience 2022, BLOOM: A 176B-Parameter Open-Access Multilingual Language Model, Table 3",
    ),
    "opt-175b": Preset(
        Model(96, 12288, 96, 2048, 50272),
        "Zhang et al. 2022, OPT: Open Pre-trained Transformer Language Models, Table 1",
    ),
}
