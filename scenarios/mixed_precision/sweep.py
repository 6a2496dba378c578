"""Lesson 6 at scale: one rank's step in closed form, the bucket-size sweep, the loss curves.

Every data-parallel rank runs the same step (the same actions, costs and
group), so one rank stands for all of them (docs/design.md: predict is cheap at any
scale). `one_step` walks rank 0's Actions of a step (scenarios.mixed_precision
.plan) with the simulator's rules for overlap (runtime.sim.simulate): compute one
after the other; each bucket's all-reduce starts at its launch or when the
previous one ends, whichever is later (one communication stream); the wait
ends with the last of them. From it:

- `lump`: the prediction when the Program has too many Actions to simulate:
  steps 1 (one bucket) and 2 (the rebuilt buckets) of every series, drawn;
- `figures`: the bucket-size sweep (the step with overlap, and with every
  all-reduce after backward, for bucket caps from 1 KiB to past the model's
  size: many small buckets pay α each, few big ones hide little), its best cap as
  a metric, and after a run the loss curves of every series.

Imports: runtime's pure part and the lesson's pure modules.
"""

from __future__ import annotations

from dataclasses import replace

from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action
from runtime.sim.simulate import span_for
from runtime.sim.trace import Span, Timeline
from scenarios.base import LUMP_ABOVE_ACTIONS, Lumped, RunData
from scenarios.metrics import Curve, Metric
from scenarios.mixed_precision import buckets
from scenarios.mixed_precision.params import MixedParams
from scenarios.mixed_precision.plan import ELEMENT_BYTES, Variant, caps, step_actions, variants
from scenarios.mixed_precision.results import MixedResult

KiB = 1024
SWEEP_POINTS = 24  # bucket caps, doubling from 1 KiB


def one_step(
    params: MixedParams, model: CostModel, v: Variant, k: int, t: float, cap: int | None = None
) -> tuple[list[Span], float]:
    """Rank 0's spans of step k of series v from time t (cap: another bucket cap), and the
    seconds its all-reduces take on their own."""
    bucket_cap = cap or params.bucket_cap
    first_cap = min(params.first_bucket_cap, bucket_cap)
    plan = buckets.plan(params.model, ELEMENT_BYTES[v.precision], bucket_cap, first_cap)
    sizes, launch = plan[:2] if k == 1 else plan[2:]
    group = range(params.ranks)  # the cost model reads a range's ends: no million-long tuple
    share = model.core_share(params.ranks)
    spans: list[Span] = []
    stream, comm = t, 0.0
    by_bytes: dict[int | None, float] = {}  # the buckets repeat a few sizes (every block alike)
    for action in step_actions(params, v, k, 0, sizes, launch, group):  # type: ignore[arg-type]
        if action.nonblocking:
            seconds = by_bytes.get(action.bytes)
            if seconds is None:
                seconds = by_bytes[action.bytes] = model.collective_time(action)
            comm += seconds
            stream = max(t, stream) + seconds
            spans.append(span_for(action, t, stream))
            continue
        end = max(t, stream) if action.is_wait else t + model.compute_time(action) / share
        spans.append(span_for(action, t, end))
        t = end
    return spans, comm


def step_seconds(
    params: MixedParams,
    model: CostModel,
    v: Variant,
    cap: int,
    compute: tuple[tuple[float, bool], ...] | None = None,
) -> tuple[float, float]:
    """A steady step with overlap, and with every all-reduce after backward: one_step's
    rules without drawing a span (the sweep asks for some 24 caps × every bucket);
    `compute`: step_compute's, when the caller has it already (one per sweep)."""
    _, _, sizes, launch = buckets.plan(params.model, ELEMENT_BYTES[v.precision], cap,
                                       min(params.first_bucket_cap, cap))  # fmt: skip
    template, steps = compute_template(params, model, v) if compute is None else compute
    seconds: dict[int, float] = {}

    def comm(nbytes: int) -> float:
        if nbytes not in seconds:
            seconds[nbytes] = model.collective_time(replace(template, bytes=nbytes))
        return seconds[nbytes]

    t = stream = busy = total = 0.0
    part = -1
    j = 0
    for seconds_, backward in steps:
        if backward is None:  # the wait
            t = max(t, stream)
            continue
        total += seconds_
        t += seconds_
        if backward:
            part += 1
            while j < len(sizes) and launch[j] == part:
                busy += comm(sizes[j])
                stream = max(t, stream) + comm(sizes[j])
                j += 1
    return t, total + busy


def compute_template(params: MixedParams, model: CostModel, v: Variant) -> tuple[Action, tuple]:
    """What step_seconds reads of a steady step whatever the cap: a bucket's all-reduce
    (its bytes replaced), and each non-communication action's seconds in order, with
    whether it is a backward part (None: the wait)."""
    group = range(params.ranks)  # the cost model reads a range's ends: no million-long tuple
    share = model.core_share(params.ranks)
    template = next(a for a in step_actions(params, v, 2, 0, [0], [0], group)  # type: ignore[arg-type]
                    if a.nonblocking)  # fmt: skip
    steps = tuple(
        (0.0, None) if a.is_wait else (model.compute_time(a) / share, a.kind == "B")
        for a in step_actions(params, v, 2, 0, [], [], group)  # type: ignore[arg-type]
    )
    return template, steps


def action_count(params: MixedParams) -> int:
    per_step = len(buckets.parts(params.model.layers)) + 5
    later = len(buckets.plan(params.model, 2, *caps(params))[2])
    return len(variants(params)) * params.ranks * params.steps * (per_step + later)


def lump(params: MixedParams, model: CostModel) -> Lumped | None:
    if action_count(params) <= LUMP_ABOVE_ACTIONS:
        return None
    spans: list[Span] = []
    t = 0.0
    for v in variants(params):
        for k in (1, 2) if params.steps > 1 else (1,):
            step, _ = one_step(params, model, v, k, t)
            spans += step
            t = max(s.end for s in step)
    formula = (
        "rank 0 stands for every rank (data parallelism: all alike); steps 1 (one bucket) "
        f"and 2 (rebuilt buckets) of each series drawn, step 2 repeats {params.steps - 1}×"
    )
    return Lumped(Timeline(spans=spans), formula)


def sweep_caps(params: MixedParams, v: Variant) -> list[int]:
    total = params.psi * ELEMENT_BYTES[v.precision]
    out, cap = [], KiB
    while len(out) < SWEEP_POINTS and cap <= 4 * total:
        out.append(cap)
        cap *= 2
    return out


def figures(
    params: MixedParams, model: CostModel, run: RunData[MixedResult] | None
) -> tuple[list[Metric], list[Curve]]:
    """The bucket-size sweep for the first low-precision series (else the first one), the
    best cap, and after a run the loss curves."""
    vs = variants(params)
    v = next((x for x in vs if x.precision != "fp32"), vs[0])
    caps_ = sweep_caps(params, v)
    compute = compute_template(params, model, v)
    steps = [step_seconds(params, model, v, cap, compute) for cap in caps_]
    with_overlap = [s for s, _ in steps]
    best = caps_[min(range(len(caps_)), key=with_overlap.__getitem__)]
    one_bucket = params.psi * ELEMENT_BYTES[v.precision]
    metrics = [
        Metric("best_bucket_cap", "bytes", None, best, v.series),
        Metric("step_s_at_best_cap", "s", None, min(with_overlap), v.series),
        Metric("one_bucket_above_bytes", "bytes", one_bucket, series=v.series),
    ]
    curves = [
        Curve(
            f"{v.series}: step time vs bucket cap",
            "bucket cap",
            "step (s)",
            [float(c) for c in caps_],
            {"overlapped": with_overlap, "all-reduce after backward": [s for _, s in steps]},
            {
                "best": float(best),
                "one bucket": float(one_bucket),
                "this run": float(params.bucket_cap),
            },
            y_unit="s",
            log_x=True,
            x_unit="bytes",
            es={
                f"{v.series}: step time vs bucket cap": f"{v.series}: paso frente a tope de bucket",
                "bucket cap": "tope de bucket",
                "step (s)": "paso (s)",
                "overlapped": "solapado",
                "all-reduce after backward": "all-reduce tras el backward",
                "best": "mejor",
                "one bucket": "un bucket",
                "this run": "esta ejecución",
            },
        )
    ]
    if run is not None and run.results:
        first = run.results[0].series
        n = params.steps
        lines = {s: [sum(r.series[s].losses[k] for r in run.results) / len(run.results)
                     for k in range(n)] for s in first}  # fmt: skip
        curves.append(
            Curve(
                "loss per step",
                "step",
                "loss",
                [float(k) for k in range(1, n + 1)],
                lines,
                {},
                y_unit="number",
                x_unit="count",
                es={"loss per step": "pérdida por paso", "step": "paso", "loss": "pérdida"},
            )  # fmt: skip
        )
    return metrics, curves
