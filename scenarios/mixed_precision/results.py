"""What each rank of lesson 6 reports, typed: sent back as JSON, read back with msgspec.

Per series ("fp16/hand", "fp16/torch", …): its losses; the loss scale after
each step and the steps skipped, by the scaler that drove it and, in a hand
series, by torch's GradScaler run beside it on the same gradients; the bucket
sizes of iteration 0 and after the rebuild (hand-written, or read from torch's
DDP through its comm hook and `_get_ddp_logging_data()`); the memory of each
category at its peak. Per precision, how far the hand-written DDP's reduced
gradients are from torch's DDP's on the same batches. Per run, the share of a
real step's gradients that fp16 flushes to zero with and without loss scaling.

Imports: the lesson contract only (the UI reads these; scenarios.mixed_precision
.rank fills them in).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scenarios.base import RankResult


@dataclass(frozen=True)
class Memory:
    """Bytes of each memory category at its peak on one rank (scenarios.metrics.ALL_CATEGORIES)."""

    params: int
    grads: int
    master: int
    optimizer: int
    buffers: int


@dataclass(frozen=True, kw_only=True)
class SeriesResult:
    losses: list[float]  # this rank's loss on its microbatch, per step
    scale_trace: list[float] = field(default_factory=list)  # after each step (fp16 only)
    skipped: list[int] = field(default_factory=list)  # 1-based steps skipped
    # torch's GradScaler beside the hand-written one, on the same gradients (hand series).
    torch_scale_trace: list[float] = field(default_factory=list)
    torch_skipped: list[int] = field(default_factory=list)
    first_buckets: list[int] = field(default_factory=list)  # bytes, iteration 0
    buckets: list[int] = field(default_factory=list)  # bytes, after the rebuild
    logged_buckets: list[int] = field(default_factory=list)  # torch's rebuilt_bucket_sizes
    memory: Memory | None = None
    # (t, kind, label) on the run's clock: a skipped step ("skip"), a grown scale ("scale")
    events: list[tuple[float, str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Underflow:
    """Of a real step's nonzero fp32 gradients: the share fp16 flushes to zero, and the
    share it keeps only as subnormals (lost precision), unscaled and at the initial scale."""

    zero_unscaled: float
    zero_scaled: float
    subnormal_unscaled: float
    subnormal_scaled: float
    smallest: float  # the smallest nonzero |gradient|


@dataclass(frozen=True, kw_only=True)
class MixedResult(RankResult):
    series: dict[str, SeriesResult]
    # precision -> max |hand − torch| of the all-reduced gradients over the steps
    grad_diff_vs_torch: dict[str, float] = field(default_factory=dict)
    underflow: Underflow | None = None
