"""Lesson 2's memory accounting: the MiniGPT's units, and the bytes each stage keeps.

Two predictions of the bytes a rank holds, by category (params, grads,
optimizer, activations, buffers):

- `per_device_bytes`: the ZeRO paper's arithmetic (scenarios.zero.formulas), exact
  for any Ψ, N_d and K, the same on every device: what `predict` scales to a
  7B model on 64 GPUs;
- `predicted_rank_bytes`: for the MiniGPT of the shape knobs in fp32 (what a
  real run trains), worked out per rank with the shards' rounding, Adam's step
  counts and the communication buffers each stage holds at its peak, so that
  the measured bars stand beside their exact twins.

`memory_metrics` turns them into the lesson's memory bars (Metrics with a
`category`, which the app and the HTML export draw). Also the model's shape
without torch: the parameter shapes of the MiniGPT (runtime.engine.models) grouped by
*unit* (embedding, each block, head), the granularity of DDP's buckets and
FSDP's wrapped modules, and the units the Program steps through.

Imports: runtime's pure part, the lesson's params, results and formulas (the UI
imports this module).
"""

from __future__ import annotations

import math
from collections import Counter

from scenarios.metrics import CATEGORIES, Metric
from scenarios.shape import FP32
from scenarios.zero import formulas
from scenarios.zero.params import ZeroParams
from scenarios.zero.results import Peaks

# Above this many ranks the Program lumps the units together (see program_units),
# and the memory prediction is the paper's per device rather than one per rank.
STEPWISE_MAX_RANKS = 64
# Adam keeps a 4-byte step count per tensor it updates.
ADAM_STEP_BYTES = 4


# -- the model's shape, without torch ------------------------------------------------------
def param_shapes(params: ZeroParams) -> list[list[tuple[int, ...]]]:
    """Parameter shapes of MiniGPT (runtime.engine.models), grouped by unit: embedding,
    each block, head, in module order (what FSDP2 shards on dim 0)."""
    h, v, s = params.model.hidden, params.model.vocab, params.model.seq
    block = [
        (h,), (h,),  # ln1
        (3 * h, h), (3 * h,),  # qkv
        (h, h), (h,),  # proj
        (h,), (h,),  # ln2
        (4 * h, h), (4 * h,),  # fc
        (h, 4 * h), (h,),  # out
    ]  # fmt: skip
    return [[(v, h), (s, h)], *[block] * params.model.layers, [(h,), (h,), (v, h)]]


def unit_numels(params: ZeroParams) -> list[int]:
    shapes = param_shapes(params)
    distinct = {id(unit): unit for unit in shapes}  # the blocks share one list: counted once
    numel = {key: sum(math.prod(shape) for shape in unit) for key, unit in distinct.items()}
    return [numel[id(unit)] for unit in shapes]


def chunk_rows(rows: int, n: int, rank: int) -> int:
    """Rows of dim 0 that torch.chunk gives rank `rank` of n (FSDP2's sharding)."""
    size = -(-rows // n)
    return max(0, min(size, rows - rank * size))


def units(params: ZeroParams) -> list[int]:
    """Elements per unit: the shape's, or Ψ spread over them in the same proportions."""
    numels = unit_numels(params)
    if params.from_shape:
        return numels
    total, psi = sum(numels), params.psi
    out = [psi * n // total for n in numels]
    out[1 if len(out) > 2 else 0] += psi - sum(out)
    return out


def program_units(params: ZeroParams) -> list[int]:
    """The units the Program steps through: the model's, or above STEPWISE_MAX_RANKS
    one lump of Ψ (one F, one B, one collective of each kind per step), so that
    `predict` with a thousand ranks stays fast and small."""
    numels = units(params)
    return numels if params.ranks <= STEPWISE_MAX_RANKS else [sum(numels)]


# -- the paper's bytes per device ----------------------------------------------------------
def activation_bytes(params: ZeroParams) -> float:
    """Activations of all layers at the end of forward, the Playbook's 16-bit
    s·b·h·(34 + 5as/h) per layer, doubled for fp32."""
    shape = params.model
    per_layer = formulas.transformer_activation_bytes_per_layer(
        shape.seq, params.microbatch, shape.hidden, shape.heads
    )
    scale = 2 if params.precision == "fp32" else 1
    return scale * shape.layers * per_layer


def per_device_bytes(params: ZeroParams, stage: str) -> dict[str, float]:
    """The paper's bytes per device of `stage` (fsdp2 = ZeRO-3), by category; the
    activations when they are counted."""
    states = formulas.zero_model_state_bytes(params.psi, params.ranks, stage, params.precision)
    if params.counts_activations:
        states["activations"] = activation_bytes(params)
    return states


# -- the real run's bytes per rank ---------------------------------------------------------
def predicted_rank_bytes(params: ZeroParams, stage: str) -> dict[str, list[float]]:
    """For the real run (fp32, Adam): the bytes each rank holds at its peak, per
    category, with the shards' rounding: even_split chunks per unit for the hand
    stages, torch.chunk rows per parameter for FSDP2. Adam's optimizer state also
    holds a 4-byte step count per tensor it updates (one per unit by hand, one per
    parameter in FSDP2). Activations: the Playbook's formula, in fp32. Buffers: a
    unit's gradient bucket (zero2), plus its gathered params (zero3, FSDP2)."""
    n = params.ranks
    numels = units(params)
    shapes = param_shapes(params)
    activations = activation_bytes(params) if params.counts_activations else 0.0
    whole = sum(numels) * FP32
    biggest = max(numels) * FP32
    sharded = formulas.ZERO_SHARDED["zero3" if stage == "fsdp2" else stage]
    out: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    # Units alike (the blocks) are counted once, times how many: a model of thousands
    # of layers costs what one of three does.
    alike = Counter(zip(numels, map(id, shapes), strict=True))
    unit_of = {id(unit): unit for unit in shapes}
    for r in range(n):
        if stage == "fsdp2":
            local = sum(
                count * chunk_rows(shape[0], n, r) * math.prod(shape[1:])
                for (_, unit), count in alike.items()
                for shape in unit_of[unit]
            )
            tensors = sum(len(unit) for unit in shapes)
            buffers = 2 * biggest  # a unit's gathered params and its grads in reduce-scatter
        else:  # formulas.even_split(numel, n)[r], without the list of all n
            local = sum(
                count * (numel // n + (r < numel % n)) for (numel, _), count in alike.items()
            )
            tensors = len(numels)
            buffers = {"ddp": 0, "zero1": 0, "zero2": biggest, "zero3": 2 * biggest}[stage]
        moments = (local if "optimizer" in sharded else sum(numels)) * 2 * FP32
        out["params"].append(local * FP32 if "params" in sharded else whole)
        out["grads"].append(local * FP32 if "grads" in sharded else whole)
        out["optimizer"].append(moments + ADAM_STEP_BYTES * tensors)
        out["activations"].append(activations)
        out["buffers"].append(buffers)
    return out


# -- the memory metrics --------------------------------------------------------------------
def memory_metrics(params: ZeroParams, stage: str, measured: list[Peaks]) -> list[Metric]:
    """The memory bars of `stage`, one `peak_bytes` Metric per category: what each rank
    measured at its peak (after a run) beside the prediction, per rank with the shards'
    rounding when the Program follows the model's units, else the paper's bytes, the
    same on every device. Then the paper's total per device and whether it fits."""
    device = per_device_bytes(params, stage)
    per_rank = params.from_shape and params.ranks <= STEPWISE_MAX_RANKS
    bars = predicted_rank_bytes(params, stage) if per_rank else device
    out = []
    for category in CATEGORIES:
        peaks = [getattr(p, category) for p in measured] or None
        if peaks is not None or category in bars:
            predicted = bars.get(category)
            out.append(Metric("peak_bytes", "bytes", peaks, predicted, stage, category, "rank"))
    total = sum(device.values())
    out.append(Metric("per_device_total_bytes", "bytes", total, series=stage))
    if params.gpu_memory:
        out.append(Metric("fits_gpu_memory", "flag", total <= params.gpu_memory, series=stage))
    return out
