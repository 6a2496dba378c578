"""The model the prediction beside a finished run is simulated with: the run replayed.

Where it sits (docs/design.md): runtime's pure part, after runtime.fit.refine has folded
the run's figures into the CostModel (that model, with the cores shared as the
simulator shares them, stays the one to predict other configurations from). For
the timeline drawn beside the run, `replay_compute` gives each compute cost the
wall time its spans took, the cores no longer shared, and each series (a zero
stage, a pipeline schedule) its own compute costs (runtime.sim.costmodel.series_key),
as runtime.fit.refine_collectives gives each its own collective scales.
Pure: stdlib only.
"""

from __future__ import annotations

from dataclasses import replace

from runtime.fit.refine import by_key, compute_scales, scale_compute
from runtime.sim.costmodel import CostModel, series_key
from runtime.sim.program import Program
from runtime.sim.simulate import simulate
from runtime.sim.trace import Timeline


def replay_compute(
    model: CostModel, program: Program, measured: Timeline, warmup_steps: int = 0
) -> CostModel:
    """The model the prediction beside a finished run is simulated with: each compute
    cost what its spans took on the wall, the cores no longer shared (`cores` None).

    Processor sharing spreads the cores evenly over whoever computes at each moment;
    the kernel does not. With four ranks on two cores a rank that computes on through
    a pipeline's fill keeps its core while the ranks it wakes queue on the other, so
    the first stage's forwards take about as long alone as with all four computing,
    where the fluid model halves them. The measured spans already hold the sharing
    the run had; shared again, a pipeline's prediction after a run would come out
    short (lessons whose ranks compute in step, zero's and failure-resume's, come out
    the same either way). The model with sharing stays the
    one to predict other configurations from. Each series (a zero stage, a pipeline
    schedule) gets its own compute costs on top (_own_series). A slowed run keeps its
    model (its costs are CPU seconds: refine_compute). The spans of steps numbered below
    `warmup_steps` are left out, as the lesson's times leave them out."""
    if model.slow or not model.cores:
        return model
    # Start from the costs at the share of a core every rank would have (ranks/cores
    # times the CPU seconds), so what refine_compute still scales stays within its bounds.
    factor = max(1.0, program.world_size / model.cores)
    keys = {by_key(a) for a in program.actions() if a.is_compute}
    compute = {k: v * factor if k in keys else v for k, v in model.compute.items()}
    unshared = replace(model, cores=None, compute=compute)
    replayed, spread = scale_compute(
        unshared, program, measured, simulate(program, unshared), warmup_steps
    )
    replayed = _own_series(replayed, program, measured, simulate(program, replayed), warmup_steps)
    # Said once: `model.source` already says "compute as its spans measured" (the
    # refinement this replays); this scaling is the replay's own.
    said = f" ({spread})" if spread else ""
    return replace(replayed, source=f"{model.source}; replayed on unshared cores{said}")


def _own_series(
    model: CostModel,
    program: Program,
    measured: Timeline,
    predicted: Timeline,
    warmup_steps: int,
) -> CostModel:
    """Each series' own compute costs (`<series>:<key>`, runtime.sim.costmodel.series_key):
    its spans' sum over its simulated ones, on top of the cost every series shares. The
    series of one lesson repeat the same work (zero's stages, the pipeline's schedules),
    but on shared cores one of them can run slower than the next: replayed
    together, that one's prediction would carry the others' costs."""
    scales = compute_scales(
        program,
        measured,
        predicted,
        lambda action: (action.series, by_key(action)) if action.series else None,
        warmup_steps,
    )
    own = {
        series_key(series, key): model.compute[key] * ratio
        for (series, key), ratio in scales.items()
        if key in model.compute
    }
    return replace(model, compute={**model.compute, **own}) if own else model
