"""Predict on a hardware profile: the scheduler on the roofline clock, drawn as a timeline.

Part of lesson 7's prediction, pure (docs/design.md: predict is cheap at any scale
it accepts). Rather than simulate every Action of a Program planned on this
machine's clock, `predict` plans the trace on the profile's own clock
(scenarios.inference.stepmodel's roofline with the profile's rates, links and
memory) and reads the latencies off the plan: Vidur's method (Agrawal et al.
2024), the real scheduler on a modelled clock. The timeline draws one span per
iteration and stage (the first MAX_SPANS), each series after the previous one.

Pure: stdlib and the lesson's pure modules.
"""

from __future__ import annotations

from dataclasses import replace

from runtime.sim.costmodel import CostModel
from runtime.sim.trace import Span, Timeline
from scenarios.base import LUMP_ABOVE_ACTIONS, Lumped
from scenarios.inference.disagg import disaggregated
from scenarios.inference.latency import Served, clocked
from scenarios.inference.params import InferenceParams
from scenarios.inference.plan import Plan, plan
from scenarios.inference.program import requests_label
from scenarios.inference.report import layout_metrics, serving_metrics
from scenarios.inference.search import kv_blocks, search, trace_blocks
from scenarios.inference.stepmodel import Device
from scenarios.inference.trace import make_trace
from scenarios.metrics import Metric

MAX_SPANS = 8_000
FORMULA = (
    "the scheduler's own iterations on the profile's roofline clock (Vidur-style): "
    "per rank max(FLOPs/peak, bytes/bandwidth) per part, TP collectives by alpha-beta; "
    "one span per iteration and stage"
)


def draw(plans: list[tuple[str, Plan]]) -> tuple[Timeline, list[float]]:
    """The spans of each series' plan, one series after another; and each series' start."""
    spans: list[Span] = []
    offsets = []
    offset = 0.0
    for series, planned in plans:
        offsets.append(offset)
        serving = planned.serving
        tp = serving.tp
        record, label = None, ""
        for k, (it, stages) in enumerate(planned.timed()):  # a run: its iterations' times
            if len(spans) >= MAX_SPANS:
                break
            if it is not record:  # a run's iterations serve the same requests
                record, label = it, requests_label(it)
            kind = "prefill" if it.prefill else "decode"
            for s, (start, end) in enumerate(stages):
                first = (it.engine * serving.pp + s) * tp if serving.pp == 1 else s * tp
                for rank in range(first, first + tp):
                    spans.append(
                        Span(
                            rank,
                            kind,
                            label,
                            offset + start,
                            offset + end,
                            series=series,
                            step=k,
                            stage=s,
                        )
                    )
        offset += planned.end
    return Timeline(spans=spans), offsets


def search_metrics(params: InferenceParams, device: Device) -> list[Metric]:
    """The config search for `params.gpus` GPUs of `device` (scenarios.inference.search)."""
    found = search(
        params.shape,
        device,
        make_trace(params.trace_spec),
        params.gpus,
        (params.ttft_slo, params.tpot_slo),
        kv_block=params.kv_block,
        default_blocks=params.kv_blocks,
        rate=params.rate,
        batching=params.batching,
    )
    meeting = [f for f in found if f.attainment >= params.attainment]
    split = disaggregated(
        params.shape,
        device,
        make_trace(params.trace_spec),
        params.gpus,
        (params.ttft_slo, params.tpot_slo),
        rate=params.rate,
        max_batch=max(f.serving.max_batch for f in found) if found else params.max_batch,
        kv_block=params.kv_block,
        default_blocks=params.kv_blocks,
    )
    return [
        Metric("configs_searched", "count", len(found)),
        Metric("configs_meeting_slo", "count", len(meeting)),
        Metric(
            "best_configs",
            "text",
            [f.describe(params.price) for f in meeting[:5]] or None,
            es=[f.describe(params.price, "es") for f in meeting[:5]] or None,
        ),
        Metric(
            "disaggregated",
            "text",
            split.describe() if split else None,
            es=split.describe("es") if split else None,
        ),
    ]


def actions_bound(params: InferenceParams) -> int:
    """At most how many Actions the Program has (scenarios.inference.program: per
    iteration and rank, a wait, 2 computes and 2 collectives per layer, the head and its
    gather; a stage's receive, compute and sends), each iteration emitting a token at
    least, each request's prefill one of them."""
    iterations = params.requests * params.output_len * 4  # the longest output: 4x the mean
    per_rank = 4 * params.model.layers + 4
    return sum(iterations * params.degree(m) * per_rank for m in params.mode)


def lumps(params: InferenceParams, model: CostModel) -> bool:
    """Whether `predict` plans on the profile's clock: on a GPU profile, or where the
    Program would be long."""
    on_gpu = model.rates is not None and model.rates.peak_flops_per_s is not None
    return on_gpu or actions_bound(params) > LUMP_ABOVE_ACTIONS


def lump(params: InferenceParams, model: CostModel) -> Lumped | None:
    """`predict` on a GPU profile, or where the Program would be long: each mode's trace
    planned on the profile's clock, and the config search. None (simulate the Program)
    on this machine's clock at a size where that is quick."""
    return on_clock(params, model) if lumps(params, model) else None


# The last clock_plans asked for: the goodput curve's point at the lesson's own rate
# (scenarios.inference.goodput) is the prediction `lump` just planned, for the same params
# and the same model object (kept here, so its id is not reused), and is not planned again.
_LAST: list[tuple[InferenceParams, CostModel, tuple]] = []


def clock_plans(
    params: InferenceParams, model: CostModel
) -> tuple[list[tuple[str, Plan]], list[Metric]]:
    """Each mode's trace planned on `model`'s clock (a KV pool as large as the device's
    memory holds), and whether its weights fit at all (`weights_fit`, per mode)."""
    for known, seen, (plans, fits) in _LAST:
        if seen is model and known == params:
            return list(plans), list(fits)
    plans, fits = _clock_plans(params, model)
    _LAST[:] = [(params, model, (tuple(plans), tuple(fits)))]
    return plans, fits


def _clock_plans(
    params: InferenceParams, model: CostModel
) -> tuple[list[tuple[str, Plan]], list[Metric]]:
    device = Device.of(model)
    requests = make_trace(params.trace_spec)
    shape = params.shape
    fits, plans = [], []
    for m in params.mode:
        serving = params.serving(m)
        blocks = kv_blocks(
            shape,
            device,
            serving.tp,
            serving.pp,
            serving.kv_block,
            params.kv_blocks,
            trace_blocks(requests, serving.kv_block),
        )
        fits.append(Metric("weights_fit", "flag", blocks > 0, series=m))
        if blocks > 0:
            serving = replace(serving, kv_blocks=blocks)
            plans.append((m, plan(shape, device, serving, requests)))
    return plans, fits


def on_clock(params: InferenceParams, model: CostModel) -> Lumped:
    """Each mode's trace planned on `model`'s clock, read off the plan; the search."""
    device = Device.of(model)
    shape = params.shape
    out = [
        Metric("kv_bytes_per_token", "bytes", shape.kv_bytes_per_token),
        Metric("parameters", "count", int(shape.parameters)),
    ]
    plans, fits = clock_plans(params, model)
    out += fits
    timeline, _ = draw(plans)
    for series, planned in plans:
        out += serving_metrics(params, series, planned, None, read_plan(planned))
        tp = planned.serving.tp
        per_step = 2 * shape.layers + 1 if tp > 1 else 0
        out.append(Metric("collectives_per_decode_step", "count", None, per_step, series=series))
        out += layout_metrics(series, planned, shape, device)
    out += search_metrics(params, device)
    return Lumped(timeline, FORMULA, out)


def read_plan(planned: Plan) -> Served:
    """What the clients saw on the plan's own clock."""
    return clocked(planned)
