"""Lesson 7: distributed inference — TP and PP decode, the KV cache, batching, routing, SLOs.

The `inference` lesson, top to bottom: its params (.params), its narrative
(texts.toml), its Program (.program), its metrics. A small MiniGPT serves a seeded Poisson trace of
requests with greedy decoding on real ranks, in each `mode` of the list, one
after the other (each a `series`): `tp` (heads split across the ranks, two
all-reduces per layer and an all-gather of the logits per iteration), `pp`
(layers split into stages, several virtual engines in flight) or `replicas`
(a copy per rank behind a router). The scheduler (scenarios.inference
.scheduler: continuous or static batching over a paged KV cache with prefix
caching) plans every iteration on the step model's clock, and the ranks
execute that plan (scenarios.inference.rank), checking their tokens against
torch's own: the model's plain forward, one process, no cache.

`predict` runs the same scheduler on a hardware profile's roofline with any
model shape (Vidur's way, scenarios.inference.predict) and searches TP × PP ×
replicas × max batch for the configurations that meet the SLO, by goodput
per GPU and per dollar (scenarios.inference.search).

Imports: runtime's pure part and the lesson contract (the UI imports this).
"""

from __future__ import annotations

from dataclasses import replace

from runtime.fit.after_run import Refinement
from runtime.sim.costmodel import CostModel
from runtime.sim.trace import Timeline
from scenarios.base import Hooks, Lesson, RunData
from scenarios.inference import predict as predicting
from scenarios.inference import report
from scenarios.inference.goodput import goodput_curve
from scenarios.inference.params import InferenceParams, InferenceResult
from scenarios.inference.program import build, layout
from scenarios.inference.stepmodel import planning_device
from scenarios.metrics import Metric
from scenarios.texts import load_texts

# -- parameters: InferenceParams, and each rank's InferenceResult (scenarios/inference/params.py)

TEXTS = load_texts(__package__)  # scenarios/inference/texts.toml


# -- program: build, and the layout of its series (scenarios/inference/program.py)


def estimate(params: InferenceParams, model: CostModel) -> CostModel:
    """The Program's work is seconds on the planning clock: scale 1 until a run measures."""
    return replace(model, compute={"prefill": 1.0, "decode": 1.0, **model.compute})


# -- metrics --------------------------------------------------------------------------------------
def metrics(
    params: InferenceParams, predicted: Timeline, run: RunData[InferenceResult] | None
) -> list[Metric]:
    shape = params.shape
    out = [
        Metric("kv_bytes_per_token", "bytes", shape.kv_bytes_per_token),
        Metric("parameters", "count", int(shape.parameters)),
    ]
    for index in layout(params)[1]:
        s = index.series
        measured = report.read_timeline(index, run.measured) if run else None
        kv = [r.series[s].kv_peak_bytes for r in run.results if s in r.series] if run else None
        out += report.serving_metrics(
            params, s, index.plan, measured, report.read_timeline(index, predicted), kv
        )
        decode = [
            n
            for it, n in zip(index.plan.iterations, index.collectives, strict=True)
            if not it.prefill
        ]
        per_step = decode[0] if decode else 0
        seen = report.collectives_seen(index, run.measured) if run else None
        out.append(Metric("collectives_per_decode_step", "count", seen, per_step, series=s))
        out += report.layout_metrics(s, index.plan, params.shape, planning_device())
        if run is None:
            continue
        mine = [r.series[s] for r in run.results if s in r.series]
        bad = sorted({rid for r in mine for rid in r.mismatched})
        out += [
            Metric(
                "tokens_equal_reference",
                "flag",
                not bad and sum(r.answered for r in mine) > 0,
                series=s,
            ),
            Metric("requests_answered", "count", sum(r.answered for r in mine), series=s),
            Metric(
                "kv_pool_bytes",
                "bytes",
                [r.kv_pool_bytes for r in mine],
                series=s,
                per="rank",
            ),
            Metric(
                "reference_tokens_s",
                "number",
                sum(r.reference_tokens for r in mine) / max(1e-12, max(r.reference_s for r in mine))
                if mine
                else None,
                series=s,
            ),
        ]
    if run is None:  # predict on this machine's clock: the search on it too
        out += predicting.search_metrics(params, planning_device())
    return out


RANK_ENTRY = "scenarios.inference.rank:run_rank"  # torch: never imported here


HOOKS = Hooks(
    estimate,
    figures=lambda params, model, run: ([], [goodput_curve(params, model, run, layout)]),
    lanes=lambda params, predicted, measured: (
        report.request_lanes(layout(params)[1], predicted, measured)
        # A lumped prediction has no Actions to read requests off: not worth the layout.
        if measured is not None or any(s.action_id for s in predicted.spans[:1])
        else []
    ),
    lump=predicting.lump,
    items=lambda params: ("tokens", float(params.requests * params.output_len)),
    # tiny all-reduces, heavy-tailed (TTFT pays their sum); ten small actions an
    # iteration (the gaps between add up)
    refinement=Refinement(
        collectives="chained", gaps="measured", measures="prefill and decode step scales"
    ),
    headline=("ttft_p50_s", "tpot_p50_s"),
)
LESSON = Lesson(
    "inference", 7, TEXTS, InferenceParams, InferenceResult, build, metrics, RANK_ENTRY, HOOKS
)
