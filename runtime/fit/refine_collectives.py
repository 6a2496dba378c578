"""After a run, each collective kind scaled as its instances took: runtime.fit.refine's part
for communication.

Where it sits (docs/design.md): runtime's pure part, between a finished run and the
prediction shown beside it, with runtime.fit.refine (compute, point-to-point). The
hand-made collectives by their kind, torch's own blocking ones apart, each series'
non-blocking DDP buckets from the time they could start, and a collective whose work
a run times inside another span at 0; each scale under its ScaleKey
(runtime.sim.corrections).
Pure: stdlib only.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from runtime.fit.refine import exit_lags
from runtime.sim.corrections import ScaleKey
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action, Program, past_warmup
from runtime.sim.simulate import simulate
from runtime.sim.trace import Span, Timeline


def _took(members: list[tuple[Action, Any]], by_last: bool) -> float:
    """How long one collective instance took. Each member's span is the collective plus
    its wait for the last to arrive; the median over members leaves most of that wait
    out, as the simulator (which adds the skew it predicts itself) wants. `by_last`:
    from the last member's arrival to the last member's end, for a lesson whose step is
    a chain of collectives: the simulator ends every member when the last arrives plus
    the collective's time, and the next link of the chain waits for the last finisher."""
    if by_last:
        return max(span.end for _, span in members) - max(span.start for _, span in members)
    return statistics.median(span.end - span.start for _, span in members)


def refine_collectives(
    model: CostModel,
    program: Program,
    measured: Timeline,
    predicted: Timeline | None = None,
    *,
    chained: bool = False,
    warmup_steps: int = 0,
) -> CostModel:
    """The model after a run, its collectives scaled as the run timed them.

    For every collective instance of the Program (barriers aside: they only wait), the
    run's time is the median over its members of each one's span, arrival to end: on a
    machine whose ranks share cores, a member descheduled mid-collective holds up every
    step of the ring, and that wait belongs to the collective as the ranks pay it (the
    simulator adds only the skew it predicts itself, which is small between ranks that
    compute alike). With `predicted` (the same Program simulated before this refinement),
    the wait the model already predicts for an instance (its predicted span beyond the
    collective's own time, e.g. behind a rank slowed on purpose) is taken off the
    measured span, so it is not counted twice. Each kind is also scaled per message size
    (ScaleKey.size) and per series (ScaleKey.series, and per size again), which a
    prediction of the same Program prefers: zero's stages run one after another, and
    on shared cores one stage's collectives can run slower than the next one's. Torch's
    own blocking collectives (`builtin`: a TP layer's all-reduce) are scaled apart from
    the hand-made ones (ScaleKey.builtin); a series' non-blocking ones (DDP buckets,
    whose spans run from their launch) by their time once they could start
    (`_async_ratios`); one whose work a run times inside another span (the `untimed`
    effect: torch DDP's all-reduce inside B) costs nothing after the run. The scale of
    a kind is the median over its instances of measured / formula, bounded to [0.2, 20];
    the median, as in `refine`: one instance disturbed by the machine does not move it.
    The steps of a collective the Program spells out itself (a ring's sendrecvs) get a
    scale `ScaleKey("sendrecv")`: the mean over every member of every step of its span
    over its formula (`_step_ratios`).
    `chained`: for a lesson whose step is a chain of collectives, each instance from its
    last member's arrival to its last member's end (`_took`; no predicted wait to take
    off, the arrivals' skew is already out), and the mean over instances instead of
    their median (their time on shared cores is heavy-tailed: the median instance
    under-predicts their sum). Steps numbered below `warmup_steps` are left out
    (runtime.sim.program.past_warmup), as the lesson's times leave them out: a first
    step's collectives pay their buffers' first use, which the mean over instances
    would carry into every step.
    """
    forecast = predicted.by_action() if predicted is not None else {}
    spans = measured.by_action()
    instances: dict[tuple, list[tuple[Action, Any]]] = {}
    untimed: set[ScaleKey] = set()
    for action in program.actions():
        if not action.is_collective or action.kind == "barrier" or action.id not in spans:
            continue
        if action.effects.untimed:
            # It stands for work done inside another span, which the run timed: the
            # collective costs nothing of its own after it (CostModel.collective_time).
            untimed.add(ScaleKey(action.kind, series=action.series or None, timing="untimed"))
            continue
        if action.nonblocking or not past_warmup(action.step, warmup_steps):
            continue  # a DDP bucket: _async_ratios; a warm-up step's
        key = (action.kind, action.series, action.step, action.stage, action.chunk,
               action.microbatch, action.label, action.bytes, action.group)  # fmt: skip
        instances.setdefault(key, []).append((action, spans[action.id]))
    ratios: dict[ScaleKey, list[float]] = {}
    for members in instances.values():
        action = members[0][0]
        if len(members) != len(action.group or ()):
            continue  # not every member finished it (a failed attempt)
        formula = model.collective_formula(action)
        took = _took(members, chained)
        foreseen = [forecast[a.id] for a, _ in members if a.id in forecast]
        if not chained and len(foreseen) == len(members):
            own = model.collective_time(action)
            took -= max(0.0, statistics.median(s.end - s.start for s in foreseen) - own)
        if formula > 0 and took > 0:
            kind = ScaleKey.of(action)
            size = (action.bytes, len(action.group or ()))
            # Per kind; per size too: the formula's α and β miss differently at each size
            # (a small all-gather pays wake-ups a large one hides); and both again per
            # series, whose collectives can run slower than the next series' on shared
            # cores (CostModel.collective_time prefers the most particular).
            for key in (kind, kind._replace(series=action.series) if action.series else None):
                if key is not None:
                    ratios.setdefault(key, []).append(took / formula)
                    ratios.setdefault(key._replace(size=size), []).append(took / formula)
    buckets = _async_ratios(model, program, spans, warmup_steps)
    steps = _step_ratios(model, program, spans, warmup_steps)
    if steps:
        ratios[ScaleKey("sendrecv")] = [statistics.fmean(steps)]
    if not ratios and not buckets and not untimed:
        return model
    center = statistics.fmean if chained else statistics.median
    # The buckets' steps by their mean: it is their sum a run's steps pay, and the step
    # a lesson with buckets reports is the mean one (mixed precision's period).
    centered = [(k, center(v)) for k, v in ratios.items()]
    centered += [(k, statistics.fmean(v)) for k, v in buckets.items()]
    scale = {k: min(20.0, max(0.2, value)) for k, value in centered}
    scale |= dict.fromkeys(untimed, 0.0)
    own = {k for k in ratios if k.series}  # each series' own kinds: counted, not listed
    said = ", ".join(
        f"{k.text()} ×{v:.2f}"
        for k, v in sorted(scale.items(), key=lambda kv: kv[0].text())
        if k.size is None and k not in own
    )
    sizes = sum(k.size is not None for k in scale)
    said += f"; {sizes} sizes apart" if sizes else ""
    series = sum(k.size is None for k in own)
    said += f"; {series} series' own" if series else ""
    return replace(
        model,
        collective_scale={**model.collective_scale, **scale},
        source=f"{model.source}; collectives as measured ({said})",
    )


def _step_ratios(
    model: CostModel, program: Program, spans: Mapping[str, Span], warmup_steps: int
) -> list[float]:
    """The steps of a collective the Program spells out (a ring's sendrecvs), each
    member's span over its formula (α + bytes·β, and γ per byte it reduces); the caller
    takes their mean. Each member's span holds its wait for a neighbour that was
    descheduled: on shared cores that wait is what a ring pays step after step, where
    the simulator, whose ranks compute alike, predicts almost none. What the simulator
    does predict is taken off: the wait behind the ranks' lags leaving the barrier
    before (runtime.fit.refine.exit_lags, which the prediction after the run adds itself),
    as a simulation with those lags puts it on each step (and a late member's step,
    whose data was already there, is as short as that simulation makes it, not cheaper
    than its formula); counted in the steps too, the same skew would be paid twice. The
    iteration then comes out of the simulated chain of steps, the gaps between them and
    the lags, not fitted to it, so the prediction after a run stays a check of the
    model."""
    steps = [
        a
        for a in program.actions()
        if a.kind == "sendrecv" and a.id in spans and past_warmup(a.step, warmup_steps)
    ]
    if not steps:
        return []
    scale = model.collective_scale.get(ScaleKey("sendrecv"), 1.0)
    lags = exit_lags(program, spans, warmup_steps)
    lagged = model.corrected(exit_lag={**model.corrections.exit_lag, **lags})
    forecast = simulate(program, lagged).by_action() if lags else {}
    ratios = []
    for a in steps:
        alpha, beta = model.link(a.rank, a.dst)  # type: ignore[arg-type]
        formula = alpha + a.bytes * beta + (model.gamma * a.recv_bytes if a.reduce else 0.0)
        if formula <= 0:
            continue
        took = spans[a.id].end - spans[a.id].start
        if a.id in forecast:  # beyond (or short of) what the lags alone make of it
            took -= forecast[a.id].end - forecast[a.id].start - formula * scale
        ratios.append(max(0.0, took) / formula)
    return ratios


def _async_ratios(
    model: CostModel, program: Program, spans: Mapping[str, Any], warmup_steps: int = 0
) -> dict[str, list[float]]:
    """Per series, each non-blocking collective instance (a DDP bucket's all-reduce) as
    the run timed it, over its formula time: from when it could start, as the simulator
    starts it (every member had launched it and each member's previous one had ended:
    they run one after another), to the members' median end. Per series: buckets of the
    same bytes run at different speeds beside different backwards (fp32's and fp16's)."""
    free: dict[int, float] = {}  # each rank's stream: when its last one ended
    instances: dict[tuple, list[tuple[Action, float, float]]] = {}
    for action in program.actions():  # rank by rank, each in program order
        if not action.nonblocking or action.id not in spans:
            continue
        span = spans[action.id]
        key = (action.series, action.step, action.kind, action.chunk, action.bytes, action.group)
        start = max(span.start, free.get(action.rank, span.start))
        instances.setdefault(key, []).append((action, start, span.end))
        free[action.rank] = span.end
    sums: dict[tuple[ScaleKey, int | None], list[float]] = {}
    for members in instances.values():
        action = members[0][0]
        if len(members) != len(action.group or ()):
            continue
        took = statistics.median(end for _, _, end in members) - max(s for _, s, _ in members)
        key = ScaleKey(action.kind, series=action.series or None, timing="async")
        box = sums.setdefault((key, action.step), [0.0, 0.0])
        box[0] += max(0.0, took)
        box[1] += model.collective_formula(action)
    # Per step, the sum over its buckets, not each one's ratio: a rank learns that a
    # bucket ended when it next polls, so the time splits unevenly between a step's
    # buckets, and their sum is what the step pays; refine_collectives takes their mean
    # over steps.
    ratios: dict[ScaleKey, list[float]] = {}
    for (key, step), (took, formula) in sums.items():
        if took > 0 < formula and past_warmup(step, warmup_steps):
            ratios.setdefault(key, []).append(took / formula)
    return ratios
