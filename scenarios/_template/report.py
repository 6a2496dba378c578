"""The template lesson's metrics, from a prediction alone or from a run beside it.

`metrics(params, predicted, run)` returns typed Metrics (scenarios.metrics): a quantity
the lesson predicts carries its `predicted` twin, and after a run its measured `value`
beside it (the CLI, the app, the JSON and the HTML export all show "measured |
predicted | error" without knowing the lesson). `predicted` is a simulated Timeline;
`run` is None before a run, else the measured Timeline and the ranks' typed results.

Imports: runtime's pure part, the contract and this package's params.
"""

from __future__ import annotations

import statistics

from runtime.sim import formulas
from runtime.sim.trace import Timeline
from scenarios.base import RunData
from scenarios.metrics import Metric

from .params import TemplateParams, TemplateResult


def step_times(timeline: Timeline) -> list[float]:
    """Per step: from the first rank starting its compute to the last one leaving the
    all-reduce."""
    bounds: dict[int, list[float]] = {}
    for span in timeline.spans:
        if span.step is None:
            continue
        lo_hi = bounds.setdefault(span.step, [span.start, span.end])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], span.start), max(lo_hi[1], span.end)
    return [hi - lo for _, (lo, hi) in sorted(bounds.items())] or [0.0]


def median_span(timeline: Timeline, kind: str) -> float:
    """The median duration of the spans of one kind of action (every rank, every step)."""
    spans = [s.end - s.start for s in timeline.spans if s.kind == kind]
    return statistics.median(spans) if spans else 0.0


def metrics(
    params: TemplateParams, predicted: Timeline, run: RunData[TemplateResult] | None
) -> list[Metric]:
    measured = run.measured if run is not None else None

    def both(read) -> tuple[float | None, float]:  # (measured, predicted)
        return (read(measured) if measured is not None else None), read(predicted)

    step = both(lambda t: statistics.median(step_times(t)))
    compute = both(lambda t: median_span(t, "compute"))
    reduce = both(lambda t: median_span(t, "all_reduce"))
    out = [
        Metric("step_s", "s", *step),
        Metric("compute_s", "s", *compute),
        Metric("all_reduce_s", "s", *reduce),
        Metric("buffer_bytes", "bytes", params.buffer_bytes),
        # What a ring all-reduce sends per rank: 2·S·(n−1)/n (nccl-tests' busbw counts it).
        Metric(
            "ring_bytes_per_rank",
            "bytes",
            formulas.ring_all_reduce_bytes_per_rank(params.ranks, params.buffer_bytes),
        ),
    ]
    if run is None:
        return out
    diff = max(r.max_abs_diff_vs_reference for r in run.results)
    return [
        *out,
        Metric("checksum", "number", [r.checksum for r in run.results], per="rank"),
        Metric("max_abs_diff_vs_reference", "diff", diff),
        Metric("equals_reference", "flag", diff <= 1e-4),
    ]
