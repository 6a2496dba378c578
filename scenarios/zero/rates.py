"""The zero lesson's own compute rates: what torch's FSDP2 costs beyond its FLOPs and bytes.

The lesson's part of calibration (docs/adding-a-lesson.md, "Calibration probes"):
`ZeroRates`, the record scenarios.zero.program's `estimate` reads (ZeroRates.of the
profile's rates), and `PROBES`, the lesson's Hooks.probes: the rank-side probe
(scenarios.zero.probes.sharded) and `fit`, which turns its samples into the record.
runtime keeps the rates every lesson shares (runtime.sim.compute.ComputeRates).

Imports: runtime's pure part only (no torch: lesson.py imports this).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from runtime.fit.calibration_probes import LessonProbes, Probe, Samples
from runtime.sim.compute import ComputeRates, LessonRates


@dataclass(frozen=True)
class ZeroRates(LessonRates):
    """torch's FSDP2, per parameter tensor per step, beyond the FLOPs: its DTensor
    bookkeeping, the copy into and out of each all-gather/reduce-scatter buffer and the
    latency of those collectives (forward, backward), and Adam over DTensors; and the
    first Adam step of a process over DTensors: DTensor's first-call costs (its
    sharding-propagation caches) and the optimizer's state allocated on the way."""

    lesson = "zero"

    sharded_forward_s: float = 3e-4
    sharded_backward_s: float = 3e-4
    sharded_adam_s: float = 1.5e-4
    sharded_first_adam_s: float = 5e-3

    @classmethod
    def on_datasheet(cls, rates: ComputeRates) -> ZeroRates:
        """On a GPU FSDP2's bookkeeping is host-side dispatch, mostly hidden under the
        kernels it queues: a few launches' worth (an assumption, not a measurement); the
        first step's, once, as on a CPU."""
        launch = rates.op_s
        return cls(4 * launch, 8 * launch, 2 * launch, 5e-3)

    def sharded_seconds(self, tensors: int) -> tuple[float, float, float]:
        """(forward, backward, Adam) seconds FSDP2 adds per step for `tensors` parameter
        tensors, beyond the FLOPs and the bytes its collectives move."""
        return (
            tensors * self.sharded_forward_s,
            tensors * self.sharded_backward_s,
            tensors * self.sharded_adam_s,
        )


def fit(samples: Samples) -> ZeroRates | None:
    """The median over ranks of (FSDP2's forward, backward, Adam) minus the same model's
    plain ones, over its tensors; the first step's Adam beyond a later one's, over its
    tensors. Each rank's row (scenarios.zero.probes.sharded): [tensors, F, B, opt under
    FSDP2, F, B, opt plain, first Adam's extra]. None measured: None (the defaults)."""
    rows = samples.get("sharded") or []
    if not rows:
        return None
    tensors = rows[0][0]
    forward, backward, adam = (
        max(statistics.median(row[1 + i] - row[4 + i] for row in rows), 0.0) / tensors
        for i in range(3)
    )
    first = max(statistics.median(row[7] for row in rows), 0.0) / tensors
    return ZeroRates(forward, backward, adam, first)


PROBES = LessonProbes(ZeroRates, (Probe("sharded", "scenarios.zero.probes:sharded"),), fit)
