"""Device figures of a CUDA rank: memory from torch.cuda.memory_stats, utilisation from NVML.

The hook of issue 13's per-rank metrics for GPU ranks, in docs/design.md's engine
part of runtime (torch, rank processes only): runtime.engine.worker calls
`device_counters` after each Action of a CUDA rank (at most every STREAM_INTERVAL_S)
and records each figure as a Counter, which runtime.engine.workers reads back as
`device_memory_bytes` and `device_utilization`. CPU ranks record none of them,
so the Workers tab, `--json` and Prometheus show them as absent, never as 0;
where NVML is missing (no driver library, no pynvml), utilisation alone is absent.
"""

from __future__ import annotations

import contextlib

import torch

# The Counter categories, as runtime.engine.workers reads them.
ALLOCATED, RESERVED, UTILIZATION = "device_allocated", "device_reserved", "device_utilization"


def device_counters(device: torch.device) -> list[tuple[str, float]]:
    """(category, value) of this CUDA device now; empty on other devices."""
    if device.type != "cuda":
        return []
    stats = torch.cuda.memory_stats(device)
    out = [
        (ALLOCATED, float(stats.get("allocated_bytes.all.current", 0))),
        (RESERVED, float(stats.get("reserved_bytes.all.current", 0))),
    ]
    with contextlib.suppress(Exception):  # no NVML here: utilisation stays absent
        out.append((UTILIZATION, float(torch.cuda.utilization(device))))
    return out
