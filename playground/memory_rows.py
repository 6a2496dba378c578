"""Memory bars from typed metrics: the rows the app's memory widget and the HTML export draw.

docs/design.md's lesson contract: a lesson marks a byte Metric with the memory
`category` it is part of (params, grads, optimizer, activations, buffers);
this module turns those metrics into bars, per series (a ZeRO stage, a
pipeline schedule) and rank, measured then predicted, without knowing any
lesson. A per-rank list gives a bar per rank; a scalar prediction (the same
bytes on every device, e.g. a 7B model under ZeRO-3 on 64 GPUs) gives one bar.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scenarios.metrics import Metric, Value


@dataclass(frozen=True)
class MemoryRow:
    group: str
    rank: int
    predicted: bool
    bytes_by_category: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.bytes_by_category.values())


def memory_rows(metrics: list[Metric]) -> list[MemoryRow]:
    """Per series, per rank: the measured bar, then the predicted one."""
    bars: dict[tuple[str, int, bool], dict[str, float]] = {}
    for metric in metrics:
        if metric.category is None or metric.unit != "bytes":
            continue
        group = metric.series or ""
        for predicted, value in ((False, metric.value), (True, metric.predicted)):
            for rank, nbytes in _per_rank(value):
                bars.setdefault((group, rank, predicted), {})[metric.category] = nbytes
    order = sorted(bars, key=lambda key: (_first(metrics, key[0]), key[1], key[2]))
    return [
        MemoryRow(group, rank, predicted, bars[group, rank, predicted])
        for group, rank, predicted in order
    ]


def _per_rank(value: Value) -> list[tuple[int, float]]:
    if isinstance(value, list):
        return [(rank, float(v)) for rank, v in enumerate(value) if _is_number(v)]
    return [(0, float(value))] if _is_number(value) else []


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _first(metrics: list[Metric], group: str) -> int:
    """Groups in the order the lesson lists its series."""
    return next(i for i, m in enumerate(metrics) if (m.series or "") == group)
