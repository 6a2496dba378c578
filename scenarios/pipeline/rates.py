"""The pipeline lesson's own compute rates: a split backward's halves against the full one.

The lesson's part of calibration (docs/adding-a-lesson.md, "Calibration probes"):
`PipelineRates`, the record the lesson's `estimate` reads (PipelineRates.of the
profile's rates), and `PROBES`, its Hooks.probes: the rank-side probe
(scenarios.pipeline.probes.split_backward) and `fit`, which turns its samples into
the record. runtime keeps the rates every lesson shares (runtime.sim.compute).

Imports: runtime's pure part only (no torch: lesson.py imports this).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from runtime.fit.calibration_probes import LessonProbes, Probe, Samples
from runtime.sim.compute import LessonRates


@dataclass(frozen=True)
class PipelineRates(LessonRates):
    """A split backward (zero-bubble's Bi, then W: runtime.engine.split_backward) as
    fractions of the full one: half each in theory and on a GPU (the zero-bubble paper's
    B = Bi + W); on a CPU autograd still walks the whole graph for Bi (calibrated)."""

    lesson = "pipeline"

    split_input_fraction: float = 0.5
    split_weight_fraction: float = 0.5


def fit(samples: Samples) -> PipelineRates | None:
    """The median over ranks of Bi/B and W/B from each rank's [full backward, Bi, W]
    seconds (scenarios.pipeline.probes.split_backward); None without a row timed."""
    rows = [row for row in samples.get("split") or [] if row[0] > 0]
    if not rows:
        return None
    return PipelineRates(
        split_input_fraction=statistics.median(bi / full for full, bi, _ in rows),
        split_weight_fraction=statistics.median(w / full for full, _, w in rows),
    )


PROBES = LessonProbes(
    PipelineRates, (Probe("split", "scenarios.pipeline.probes:split_backward"),), fit
)
