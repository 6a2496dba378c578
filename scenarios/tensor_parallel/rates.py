"""The tensor-parallel lesson's own compute rates: DTensor's dispatch per parallelized module.

The lesson's part of calibration (docs/adding-a-lesson.md, "Calibration probes"):
`TPRates`, the record the lesson's `estimate` reads (TPRates.of the profile's rates),
and `PROBES`, its Hooks.probes: the rank-side probe
(scenarios.tensor_parallel.probes.parallelized) and `fit`, which turns its samples into
the record. runtime keeps the rates every lesson shares (runtime.sim.compute).

Imports: runtime's pure part only (no torch: lesson.py imports this).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from runtime.fit.calibration_probes import LessonProbes, Probe, Samples
from runtime.sim.compute import ComputeRates, LessonRates

# The modules of the MLP the probe times under tensor parallelism (column, then row).
PROBED_MODULES = 2


@dataclass(frozen=True)
class TPRates(LessonRates):
    """torch's tensor parallelism (DTensor), per parallelized module per step beyond
    its FLOPs and collectives: dispatch, sharding propagation, redistribution
    bookkeeping (forward, backward)."""

    lesson = "tensor-parallel"

    parallel_forward_s: float = 3e-4
    parallel_backward_s: float = 3e-4

    @classmethod
    def on_datasheet(cls, rates: ComputeRates) -> TPRates:
        """On a GPU DTensor's dispatch is host-side, mostly hidden under the kernels it
        queues: a few launches' worth (an assumption, not a measurement)."""
        return cls(4 * rates.op_s, 8 * rates.op_s)

    def parallel_seconds(self, modules: int) -> tuple[float, float]:
        """(forward, backward) seconds torch's tensor parallelism adds for `modules`
        parallelized modules, beyond their FLOPs and collectives."""
        return modules * self.parallel_forward_s, modules * self.parallel_backward_s


def fit(samples: Samples) -> TPRates | None:
    """The median over ranks of (forward, backward under tensor parallelism) minus the
    same shard as plain Linears, over the MLP's modules, never below zero. Each rank's
    row (scenarios.tensor_parallel.probes.parallelized): [F, B parallel, F, B plain].
    None measured (one rank): None (the defaults)."""
    rows = samples.get("parallelized") or []
    if not rows:
        return None
    forward, backward = (
        max(statistics.median(row[i] - row[2 + i] for row in rows), 0.0) / PROBED_MODULES
        for i in range(2)
    )
    return TPRates(forward, backward)


PROBES = LessonProbes(
    TPRates, (Probe("parallelized", "scenarios.tensor_parallel.probes:parallelized"),), fit
)
