"""The diagnosis: does it fit one GPU, how long would one GPU take, and so which pressure.

Lesson 0's first claim (docs/references.md, "Why distribute"): there are two
reasons to distribute, the model's training state does not fit one GPU (memory)
or one GPU takes too long (time), and each calls for its own cure:

- time only: data parallelism (DDP): replicas of the whole model, the batch split;
- memory: split what is too big, by the axis that is too big: the optimizer states
  (ZeRO-1), the gradients too (ZeRO-2), the weights themselves (ZeRO-3/FSDP, or TP
  inside a node when a layer is too wide, PP across nodes when there are too many
  layers), the activations (recomputation, or TP with sequence parallelism);
- both: the two at once, 3D (TP × PP × DP), as the planner lays it out.

The verdict and its reason are written in both languages (scenarios.why_distribute
.phrases), every word of them: the pressure, the axis and the strategy are names
here (PRESSURES, the axes, STRATEGIES' keys) and words in texts.toml [phrases]
(`pressure_*`, `axis_*`, `strategy_*`). Inference is diagnosed beside training: its
weights and KV cache only.

Imports: the lesson's own modules (no torch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runtime.sim import formulas
from scenarios.texts import LANGUAGES
from scenarios.why_distribute.footprint import (
    Layout,
    inference_bytes,
    one_gpu_seconds,
    training_bytes,
)
from scenarios.why_distribute.model import Model
from scenarios.why_distribute.phrases import both, phrase

PRESSURES = ("none", "time", "memory", "both")


@dataclass(frozen=True)
class Diagnosis:
    memory: dict[str, float]  # one GPU, by category
    gpu_memory: float
    one_gpu_s: float
    deadline_s: float
    inference: dict[str, float]
    axis: str  # what is too big for one GPU: none, activations, optimizer, grads, weights
    wide: bool  # one layer alone does not fit: its weights must be split across GPUs
    strategy: str  # in English: "ZeRO-1", "3D: TP inside a node, …"
    reason: dict[str, str]  # one sentence per language
    strategy_text: dict[str, str]  # the strategy in every language

    def pressure_text(self) -> dict[str, str]:
        """The pressure in every language (none, time, memory, both as words)."""
        return both(f"pressure_{self.pressure}")

    @property
    def fits(self) -> bool:
        return sum(self.memory.values()) <= self.gpu_memory

    @property
    def too_slow(self) -> bool:
        return self.one_gpu_s > self.deadline_s

    @property
    def pressure(self) -> str:
        return PRESSURES[(2 if not self.fits else 0) + (1 if self.too_slow else 0)]

    @property
    def inference_fits(self) -> bool:
        return sum(self.inference.values()) <= self.gpu_memory

    @property
    def gpus_for_memory(self) -> int:
        """GPUs whose memory adds up to the training state (a lower bound)."""
        return max(1, math.ceil(sum(self.memory.values()) / self.gpu_memory))

    @property
    def gpus_for_time(self) -> int:
        """GPUs that would meet the deadline if they scaled perfectly (a lower bound)."""
        if self.deadline_s <= 0 or not math.isfinite(self.one_gpu_s):
            return 1
        return max(1, math.ceil(self.one_gpu_s / self.deadline_s))


def what_is_too_big(memory: dict[str, float], gpu_memory: float) -> str:
    """The first state, in the order ZeRO shards them, whose addition breaks the fit:
    weights alone, then + grads, then + optimizer states, then + activations."""
    total = 0.0
    for category, axis in (
        ("params", "weights"),
        ("grads", "grads"),
        ("optimizer", "optimizer"),
        ("activations", "activations"),
    ):
        total += memory.get(category, 0.0)
        if total > gpu_memory:
            return axis
    return "none"


# (pressure, what is too big) -> the strategy, a key of texts.toml [phrases] `strategy_*`.
STRATEGIES = {
    ("none", "none"): "one_gpu",  # one GPU
    ("time", "none"): "ddp",  # DDP
    ("memory", "activations"): "recompute",  # recompute activations, or TP with SP
    ("memory", "optimizer"): "zero1",  # ZeRO-1
    ("memory", "grads"): "zero2",  # ZeRO-2
    ("memory", "weights"): "zero3",  # ZeRO-3/FSDP, or PP across nodes
    ("memory", "wide"): "wide",  # TP inside a node, then PP across nodes
}


def diagnose(
    psi: float,
    shape: Model,
    precision: str,
    recompute: str,
    micro: int,
    gpu_memory: float,
    achieved_flops: float,
    tokens: float,
    deadline_s: float,
) -> Diagnosis:
    memory = training_bytes(psi, shape, precision, Layout(recompute=recompute, micro=micro))
    one_gpu_s = one_gpu_seconds(psi, tokens, achieved_flops, recompute)
    axis = what_is_too_big(memory, gpu_memory)
    # One layer: its weights with their grads and Adam states, and its activations.
    states = formulas.zero_model_state_bytes(shape.layer_weights, 1, "ddp", precision)
    scale = 2 if precision == "fp32" else 1  # the formulas count 16-bit activations
    kept = scale * shape.activation_bytes(micro, 1, 1, recompute, flash=False)
    per_layer = sum(states.values()) + kept
    wide = per_layer > gpu_memory
    fits = axis == "none"
    too_slow = one_gpu_s > deadline_s
    pressure = PRESSURES[(2 if not fits else 0) + (1 if too_slow else 0)]
    if pressure == "both":
        strategy = "3d"  # 3D: TP inside a node, PP across nodes, DP outermost
    elif pressure == "memory":
        strategy = STRATEGIES[("memory", "wide" if wide else axis)]
    else:
        strategy = STRATEGIES[(pressure, "none")]
    strategy_text = both(f"strategy_{strategy}")
    total = sum(memory.values())
    values = dict(
        states=_gb(sum(v for k, v in memory.items() if k != "activations")),
        per_param=f"{sum(formulas.ZERO_PRECISIONS[precision]):g}",
        activations=_gb(memory["activations"]),
        total=_gb(total),
        gpu=_gb(gpu_memory),
        days=f"{one_gpu_s / 86400:.3g}",
        deadline=f"{deadline_s / 86400:.3g}",
        gpus=max(1, math.ceil(total / gpu_memory)),
        # A deadline of a nanosecond asks for more GPUs than a float counts.
        faster=max(1, math.ceil(min(one_gpu_s / deadline_s, 1e18))) if deadline_s > 0 else 1,
    )
    key = f"reason_{pressure}" + ("_wide" if pressure == "memory" and wide else "")
    if pressure == "none" and not math.isfinite(deadline_s):
        key = "reason_none_open"  # no deadline given: nothing to be late for
    # The strategy and the axis in the sentence's own language (a Spanish reason once
    # said "lo que sobra es weights: ZeRO-3/FSDP, or PP across nodes").
    reason = {
        language: phrase(
            key,
            language,
            **values,
            strategy=strategy_text[language],
            axis=phrase(f"axis_{axis}", language),
        )
        for language in LANGUAGES
    }
    inference = inference_bytes(psi, shape, precision, micro)
    return Diagnosis(
        memory,
        gpu_memory,
        one_gpu_s,
        deadline_s,
        inference,
        axis,
        wide,
        strategy_text["en"],
        reason,
        strategy_text,
    )


def _gb(nbytes: float) -> str:
    """Binary gigabytes (GiB), as the device's memory is counted: an "80 GB" A100 holds
    80 GiB, and one unit in the sentence keeps 108 GB of state from looking smaller than
    it is beside "85.9 GB" (100 GiB against 80 GiB)."""
    value = nbytes / 2**30
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
