"""The mixed-precision lesson's own compute rates: a block in fp16 and bf16 over fp32.

The lesson's part of calibration (docs/adding-a-lesson.md, "Calibration probes"):
`MixedRates`, the record the lesson's `estimate` reads (MixedRates.of the profile's
rates), and `PROBES`, its Hooks.probes: the rank-side probe
(scenarios.mixed_precision.probes.low_precision) and `fit`, which turns its samples
into the record. runtime keeps the rates every lesson shares (runtime.sim.compute).

Imports: runtime's pure part only (no torch: lesson.py imports this).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from runtime.fit.calibration_probes import LessonProbes, Probe, Samples
from runtime.sim.compute import LessonRates


@dataclass(frozen=True)
class MixedRates(LessonRates):
    """A block's forward and backward with its weights in fp16 / bf16 under torch's CPU
    autocast, over the same in fp32 (calibrated). None: the lesson's own figure (a CPU
    without fast fp16/bf16 matmuls converts and runs them 2-6 times slower; a GPU's
    tensor cores the other way)."""

    lesson = "mixed-precision"

    fp16_slowdown: float | None = None
    bf16_slowdown: float | None = None


def fit(samples: Samples) -> MixedRates | None:
    """The median over ranks of fp16's and bf16's seconds over fp32's, from each rank's
    [fp32, fp16, bf16] (scenarios.mixed_precision.probes.low_precision); None without
    a row timed (the lesson's guess stands)."""
    rows = [row for row in samples.get("low_precision") or [] if row[0] > 0]
    if not rows:
        return None
    return MixedRates(
        fp16_slowdown=statistics.median(row[1] / row[0] for row in rows),
        bf16_slowdown=statistics.median(row[2] / row[0] for row in rows),
    )


PROBES = LessonProbes(
    MixedRates, (Probe("low_precision", "scenarios.mixed_precision.probes:low_precision"),), fit
)
