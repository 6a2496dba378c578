"""Activation memory of one Transformer layer under tensor and sequence parallelism.

Lesson 4's memory accounting (docs/references.md, "Tensor parallel"), two ways:

- `korthikanti`: the paper's closed forms (Korthikanti et al. 2022, Table 2;
  Megatron's `theoretical_memory_usage.py`), bytes per layer in 16-bit with
  dropout, for any shape: what `predict` shows at scale, six configurations.
- `this_run`: what the MiniGPT block of this lesson really keeps for backward
  on this machine, tensor by tensor, in fp32: no dropout (so no masks), CPU
  attention that keeps its output and a logsumexp per query instead of the
  a·s² scores, and, under sequence parallelism, the all-gathered input of each
  column-parallel linear kept whole (Megatron keeps the shard and gathers it
  again in backward, the extra all-gather that makes the paper's 34/t). The
  rank code measures the same tensors through autograd's saved-tensor hooks;
  the lesson's tests check the two agree to the byte.

Notation: s sequence, b microbatch, h hidden, a heads, t tensor-parallel ranks.

Pure: runtime's formulas only.
"""

from __future__ import annotations

from runtime.sim import formulas

KEYS = ("none", "tp", "tp_sp", "tp_selective", "tp_sp_selective", "full_recompute")
MEASURED = ("none", "tp", "tp_sp")  # what a run measures, fp32
FP32_SERIES = {key: f"fp32:{key}" for key in MEASURED}


def korthikanti(s: int, b: int, h: int, a: int, t: int) -> dict[str, float]:
    """Bytes per layer, 16-bit: none sbh(34 + 5as/h); TP sbh(10 + 24/t + 5as/(ht));
    TP+SP sbh(34/t + 5as/(ht)); TP + selective recompute sbh(10 + 24/t);
    TP+SP + selective 34sbh/t; full recompute 2sbh (the layer's input only). One
    function with lesson 0's planner (runtime.sim.formulas.layer_activation_bytes)."""
    one = formulas.layer_activation_bytes
    return {
        "none": one(s, b, h, a, 1, sequence_parallel=False),
        "tp": one(s, b, h, a, t, sequence_parallel=False),
        "tp_sp": one(s, b, h, a, t),
        "tp_selective": one(s, b, h, a, t, sequence_parallel=False, recompute="selective"),
        "tp_sp_selective": one(s, b, h, a, t, recompute="selective"),
        "full_recompute": one(s, b, h, a, t, recompute="full"),
    }


def saved_items(s: int, b: int, h: int, a: int, t: int, sp: bool) -> list[tuple[str, float]]:
    """Elements each tensor the block keeps for backward holds, on one rank (fp32 or not).
    Sharded by heads or columns: /t; on a sequence shard (sp): /t; replicated: whole."""
    sbh = s * b * h
    shard = t if sp else 1  # what runs on the sequence shard
    return [
        ("ln1 input", sbh / shard),
        ("ln1 and ln2 mean, rstd", 4 * s * b / shard),
        ("qkv input (ln1 output)", sbh),  # replicated, or all-gathered under SP
        ("q, k, v", 3 * sbh / t),
        ("attention output = proj input", sbh / t),
        ("attention logsumexp", a * s * b / t),
        ("ln2 input", sbh / shard),
        ("fc input (ln2 output)", sbh),
        ("fc output = GELU input", 4 * sbh / t),
        ("GELU output = out input", 4 * sbh / t),
    ]


def this_run(s: int, b: int, h: int, a: int, t: int, bytes_per_element: int = 4) -> dict[str, int]:
    """Bytes per layer the lesson's block keeps, fp32 by default: none, tp, tp_sp."""
    configs = {"none": (1, False), "tp": (t, False), "tp_sp": (t, True)}
    return {
        key: round(bytes_per_element * sum(n for _, n in saved_items(s, b, h, a, tt, sp)))
        for key, (tt, sp) in configs.items()
    }
