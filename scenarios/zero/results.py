"""What each rank of lesson 2 reports, typed: sent back as JSON, read back with msgspec.

Per stage (ddp, zero1, zero2, zero3, fsdp2): the peak bytes of each memory
category, the bytes it sent, how far its parameters are from DDP's, and its
losses; and how far DDP is from one process training on the whole batch.

Imports: the lesson contract only (the UI reads these; scenarios.zero.rank
fills them in).
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.base import RankResult


@dataclass(frozen=True)
class Peaks:
    """Bytes of each memory category at its peak on one rank (scenarios.metrics.CATEGORIES)."""

    params: int
    grads: int
    optimizer: int
    activations: int
    buffers: int


@dataclass(frozen=True, kw_only=True)
class StageResult:
    peak_bytes: Peaks
    bytes_sent: int  # over all steps
    param_diff_vs_ddp: float  # 0 for ddp itself
    losses: list[float]


@dataclass(frozen=True, kw_only=True)
class ZeroResult(RankResult):
    """What each rank reports per stage, and how far DDP is from one process."""

    stages: dict[str, StageResult]
    ddp_diff_vs_single_process: float | None
