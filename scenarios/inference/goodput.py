"""Goodput against the offered request rate: the cost model's curve, and the run's point.

Part of lesson 7 (its `figures` hook, scenarios.inference.lesson). DistServe
(Zhong et al. 2024) rates a serving system by the rate it serves within the
SLO; this curve draws that figure at a few multiples of the lesson's `rate`,
the same trace drawn again at each (the same seed).

Choices, and why:
- Each point is the lesson's own prediction at that rate: the same model the
  metrics panel predicts with (the calibrated profile before a run, the model
  refined and replayed with what the run measured after one), the same path
  (the Program simulated, or on a GPU profile or at a large size the
  scheduler planned on the profile's clock: scenarios.inference.predict), the
  same reading (scenarios.inference.latency's goodput: requests within both
  SLOs per second of the run). So at the lesson's `rate` the curve passes
  through the `goodput_rps` the metrics predict, never a promise of its own.
- After a run, the measured goodput is a point at the run's rate on its own
  line ("tp measured"): the learner sees the run beside the prediction.
- The title names where the curve was predicted (the profile), since it is
  not this machine's measurement.

Imports: runtime's pure part and the lesson's pure modules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from runtime.fit.replay import replay_compute
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Program
from runtime.sim.simulate import simulate
from scenarios.base import RunData
from scenarios.inference import predict as predicting
from scenarios.inference.params import InferenceParams
from scenarios.inference.program import SeriesIndex
from scenarios.inference.report import read_timeline
from scenarios.metrics import Curve

RATE_FACTORS = (0.25, 1.0, 4.0, 16.0, 64.0)
# The points at the other rates replay at most this many requests of the trace (its
# start, same seed): the curve's shape for a few hundredths of a second each, so that
# `predict` stays cheap at the largest trace it accepts. The point at the lesson's own
# rate is always the whole trace's prediction (the one goodput_rps reports).
CURVE_REQUESTS = 128
Layout = Callable[[InferenceParams], tuple[Program, tuple[SeriesIndex, ...]]]


def predicted_goodput(
    params: InferenceParams, model: CostModel, layout: Layout, *, lumpable: bool
) -> dict[str, float]:
    """Per mode, the goodput the lesson's prediction gives for `params` on `model`:
    lumped where `predict` lumps (scenarios.base.Lesson.predict), else simulated."""
    slo = (params.ttft_slo, params.tpot_slo)
    if lumpable and predicting.lumps(params, model):
        plans, _ = predicting.clock_plans(params, model)
        return {m: predicting.read_plan(planned).goodput(*slo) for m, planned in plans}
    program, indexes = layout(params)
    timeline = simulate(program, model)
    return {i.series: read_timeline(i, timeline).goodput(*slo) for i in indexes}


def run_model(params: InferenceParams, model: CostModel, run: RunData, layout: Layout):
    """The model the prediction beside a finished run was simulated with (the session
    replays the refined model on the run's spans: runtime.fit.replay); after a restart the
    spans are no measure of the costs, and the refined model stands."""
    if run.restarts is not None and run.restarts.failures:
        return model
    return replay_compute(model, layout(params)[0], run.measured)


def goodput_curve(
    params: InferenceParams, model: CostModel, run: RunData | None, layout: Layout
) -> Curve:
    """Goodput against the offered rate for each mode, as the lesson predicts it on
    `model`; with a run, the goodput it measured at its rate."""
    rates = [params.rate * f for f in RATE_FACTORS]
    slo = (params.ttft_slo, params.tpot_slo)
    used = run_model(params, model, run, layout) if run is not None else model
    # As Lesson.predict: a slowed rank has no lumped twin; a run's prediction is simulated.
    lumpable = run is None and not model.slow
    sampled = params.requests > CURVE_REQUESTS

    def at(rate: float) -> InferenceParams:  # another rate: the trace's start
        return replace(params, rate=rate, requests=min(params.requests, CURVE_REQUESTS))

    # The lesson's own rate first: predict has just planned it (scenarios.inference.predict
    # keeps that one plan), and the other rates would push it out.
    own = predicted_goodput(params, used, layout, lumpable=lumpable)
    points = [
        own if rate == params.rate else predicted_goodput(at(rate), used, layout, lumpable=lumpable)
        for rate in rates
    ]
    lines: dict[str, list[float | None]] = {}
    es: dict[str, str] = {}
    for m in params.mode:
        if all(m in p for p in points):  # a mode whose weights do not fit has no point
            lines[f"{m} predicted"] = [p[m] for p in points]
            es[f"{m} predicted"] = f"{m} predicho"
    if run is not None:
        own_index = RATE_FACTORS.index(1.0)
        for index in layout(params)[1]:
            measured = read_timeline(index, run.measured).goodput(*slo)
            name = f"{index.series} measured (this run)"
            lines[name] = [measured if k == own_index else None for k in range(len(rates))]
            es[name] = f"{index.series} medido (esta ejecución)"
    lines["offered"] = rates
    slos = f"(TTFT ≤ {params.ttft_slo:g} s, TPOT ≤ {params.tpot_slo:g} s)"
    where = model.name + (", refined by this run" if run is not None else "")
    where_es = model.name + (", refinado con esta ejecución" if run is not None else "")
    if sampled:
        where += f"; other rates from the trace's first {CURVE_REQUESTS} requests"
        where_es += f"; las otras tasas con sus primeras {CURVE_REQUESTS} peticiones"
    title = f"Goodput vs request rate {slos}, predicted on {where}"
    return Curve(
        title=title,
        x_label="requests per second offered",
        y_label="requests per second within the SLO",
        x=rates,
        lines=lines,  # type: ignore[arg-type]  # None: no point at that rate
        marks={"rate": params.rate},
        y_unit="number",
        log_x=True,
        x_unit="number",  # requests per second
        es={
            title: f"Goodput frente a tasa de peticiones {slos}, predicho en {where_es}",
            "requests per second offered": "peticiones por segundo ofrecidas",
            "requests per second within the SLO": "peticiones por segundo dentro del SLO",
            "offered": "ofrecidas",
            "rate": "tasa",
            **es,
        },
    )
