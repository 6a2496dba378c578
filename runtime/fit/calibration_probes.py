"""A lesson's calibration probes: what it asks `playground calibrate` to measure for it.

Where it sits (docs/design.md, docs/adding-a-lesson.md): runtime.fit, beside the
calibration that runs them. Runtime keeps the generic compute rates
(runtime.sim.compute.ComputeRates); a lesson that needs more (FSDP2's overheads, a
checkpoint's cost) declares a `LessonProbes` in its own package (its Hooks.probes):
each `Probe` names a rank-side function by its entry ("package.module:function", so
runtime imports no lesson: the caller hands the probes in), and `fit` turns what
every rank measured into the lesson's rates record (a runtime.sim.compute.LessonRates),
kept in ComputeRates.lessons under the lesson's name.

A probe function takes (rank, world_size) and returns JSON-able samples, or None (or
an empty list) where that rank measured nothing (rank 0 alone writes to disk; a world
size the measurement does not fit). Every rank calls the same probes in the same
order, so a probe may use collectives.

Pure: stdlib only (the probe functions themselves run in rank processes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.sim.compute import LessonRates

# What a lesson's fit gets: its probes' samples by probe name, one per rank that
# measured something, in rank order.
Samples = Mapping[str, list[Any]]


@dataclass(frozen=True)
class Probe:
    """One rank-side measurement: `name` keys its samples; `entry` is the function."""

    name: str
    entry: str  # "package.module:function" taking (rank, world_size)


@dataclass(frozen=True)
class LessonProbes:
    """A lesson's probes and how its rates come out of them.

    `rates`: the lesson's record (its `lesson` names the entry in ComputeRates.lessons);
    `fit`: the record fitted from the samples, or None where nothing was measured (the
    record's defaults stand)."""

    rates: type[LessonRates]
    probes: tuple[Probe, ...]
    fit: Callable[[Samples], LessonRates | None]

    @property
    def lesson(self) -> str:
        return self.rates.lesson


# A probe as the calibrate job's ranks are handed it: (lesson, probe name, entry).
ProbeJob = tuple[str, str, str]


def job(probes: Iterable[LessonProbes]) -> tuple[ProbeJob, ...]:
    """The probes as plain data for the ranks (runtime.fit.calibration_rank runs them)."""
    return tuple((p.lesson, probe.name, probe.entry) for p in probes for probe in p.probes)


def measured(value: Any) -> bool:
    """Whether a probe's result holds samples: None or an empty list says it measured
    nothing on that rank."""
    return value is not None and value != []


def fit_lessons(
    probes: Sequence[LessonProbes], rank_results: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, float | None]]:
    """Each lesson's rates fitted from every rank's results (their "probes": lesson ->
    probe name -> samples), as ComputeRates.lessons holds them; a lesson whose fit found
    nothing measured is left out (its defaults stand)."""
    out: dict[str, dict[str, float | None]] = {}
    for lesson in probes:
        samples = {
            probe.name: [
                value
                for r in rank_results
                if measured(value := (r.get("probes") or {}).get(lesson.lesson, {}).get(probe.name))
            ]
            for probe in lesson.probes
        }
        fitted = lesson.fit(samples)
        if fitted is not None:
            out[lesson.lesson] = fitted.to_dict()
    return out
