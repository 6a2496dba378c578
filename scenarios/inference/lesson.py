"""Lesson 7: distributed inference — TP and PP decode, the KV cache, batching, routing, SLOs.

The `inference` lesson, top to bottom: its params, its narrative (texts.toml),
its Program, its metrics. A small MiniGPT serves a seeded Poisson trace of
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

from dataclasses import dataclass, replace
from functools import lru_cache

from runtime.sim.costmodel import CostModel
from runtime.sim.program import Program
from runtime.sim.trace import Timeline
from scenarios.base import Hooks, Lesson, RankResult, RunData
from scenarios.inference import predict as predicting
from scenarios.inference import report, rules
from scenarios.inference.goodput import goodput_curve
from scenarios.inference.plan import MODES, Clock, Plan, Serving, plan
from scenarios.inference.program import SeriesIndex, write_series
from scenarios.inference.router import ROUTERS
from scenarios.inference.stepmodel import DTYPE_BYTES, Shape, planning_device
from scenarios.inference.trace import LENGTHS, TraceSpec, make_trace
from scenarios.metrics import Metric
from scenarios.params import (
    Mode,
    Params,
    choice,
    choices,
    count,
    duration,
    integer,
    number,
)
from scenarios.shape import GPTShape
from scenarios.texts import load_texts

MAX_RUN_PARAMETERS = 1_000_000


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class InferenceParams(Params):
    mode: tuple[str, ...] = choices(("tp",), MODES)
    ranks: int = integer(2, 1, 4, 4096)
    tp: int = integer(0, 0, 4, 4096)
    pp: int = integer(0, 0, 4, 4096)
    replicas: int = integer(0, 0, 4, 4096)
    router: str = choice("round-robin", ROUTERS)
    batching: str = choice("continuous", ("continuous", "static"))
    max_batch: int = integer(8, 1, 64, 4096)
    rate: float = number(10.0, 0.0, 10_000.0, 1e9)
    requests: int = integer(16, 1, 64, 1000)
    prompt_len: int = integer(12, 1, 256, 1 << 20)
    output_len: int = integer(12, 1, 256, 1 << 20)
    lengths: str = choice("uniform", LENGTHS)
    prefixes: int = integer(0, 0, 16, 1024)
    prefix_len: int = integer(16, 0, 256, 1 << 20)
    ttft_slo: float = duration(0.25, 0.0)
    tpot_slo: float = duration(0.02, 0.0)
    attainment: float = number(0.9, 0.0, 1.0)
    kv_block: int = integer(8, 1, 64, 1024)
    kv_blocks: int = integer(128, 1, 4096, 1 << 20)
    seed: int = integer(0, 0, 2**31 - 1)
    model: GPTShape = GPTShape(
        layers=2, hidden=64, heads=4, seq=64, vocab=64, run_limit=MAX_RUN_PARAMETERS
    )
    kv_heads: int = integer(0, 0, 32, 1024)
    head_dim: int = integer(0, 0, 512, 4096)
    dtype: str = choice("fp32", tuple(DTYPE_BYTES))
    params: int | str = count("auto")
    gpus: int = integer(8, 1, 64, 4096)
    price: float = number(2.0, 0.0, 1000.0)

    def check(self, mode: Mode) -> None:
        rules.check(self, mode)  # scenarios/inference/rules.py

    @property
    def world_size(self) -> int:
        """The most ranks a mode spans (on a real run, every mode spans all of them)."""
        return max(self.degree(m) for m in self.mode)

    def degree(self, mode: str) -> int:
        """Ranks a mode spans: its own knob, or every rank."""
        return int(getattr(self, mode)) or self.ranks

    @property
    def shape(self) -> Shape:
        m = self.model
        return Shape(
            layers=m.layers,
            hidden=m.hidden,
            heads=m.heads,
            kv_heads=self.kv_heads or m.heads,
            head_dim=self.head_dim or m.hidden // m.heads,
            vocab=m.vocab,
            seq=m.seq,
            dtype_bytes=DTYPE_BYTES[self.dtype],
            total_params=None if self.params == "auto" else int(self.params),
        )

    @property
    def trace_spec(self) -> TraceSpec:
        return TraceSpec(
            self.requests,
            self.rate,
            self.prompt_len,
            self.output_len,
            self.lengths,
            self.prefixes,
            self.prefix_len,
            self.model.vocab,
            self.seed,
        )

    def serving(self, mode: str) -> Serving:
        return Serving.of_mode(
            mode,
            self.degree(mode),
            batching=self.batching,
            router=self.router,
            max_batch=self.max_batch,
            kv_block=self.kv_block,
            kv_blocks=self.kv_blocks,
        )


@dataclass(frozen=True)
class SeriesRun:
    """What one rank saw of one mode: the requests it answered and whether their tokens
    are those of torch's own greedy decode (the whole model, one process, no cache)."""

    answered: int
    mismatched: list[int]  # request ids whose tokens differ
    kv_pool_bytes: int  # the KV pool this rank allocated
    kv_peak_bytes: int  # its blocks in use at the peak
    reference_tokens: int  # tokens torch's own decode produced for them, before the clock
    reference_s: float  # and the seconds it took (no cache: the whole sequence every step)


@dataclass(frozen=True, kw_only=True)
class InferenceResult(RankResult):
    """Per rank: `compute_costs` are measured/planned seconds of prefill and decode work
    (the step model's calibration), and each mode's run."""

    series: dict[str, SeriesRun]


TEXTS = load_texts(__package__)  # scenarios/inference/texts.toml


# -- program ----------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def planning_plans(params: InferenceParams) -> list[Plan]:
    """Each mode's plan on the planning clock: what a real run executes."""
    requests = make_trace(params.trace_spec)
    return [plan(params.shape, planning_device(), params.serving(m), requests) for m in params.mode]


@lru_cache(maxsize=8)
def layout(params: InferenceParams) -> tuple[Program, tuple[SeriesIndex, ...]]:
    """The Program and where each series' facts sit in it (cached: metrics read it)."""
    program = Program(world_size=params.world_size, name="inference")
    indexes = []
    for mode, planned in zip(params.mode, planning_plans(params), strict=True):
        clock = Clock(params.shape, planning_device(), planned.serving)
        ranks = tuple(range(planned.serving.gpus))
        indexes.append(write_series(program, mode, clock, planned, ranks))
    return program, tuple(indexes)


def build(params: InferenceParams) -> Program:
    return layout(params)[0]


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
    "prefill and decode step scales",
    figures=lambda params, model, run: ([], [goodput_curve(params, model, run, layout)]),
    lanes=lambda params, predicted, measured: (
        report.request_lanes(layout(params)[1], predicted, measured)
        # A lumped prediction has no Actions to read requests off: not worth the layout.
        if measured is not None or any(s.action_id for s in predicted.spans[:1])
        else []
    ),
    lump=predicting.lump,
    items=lambda params: ("tokens", float(params.requests * params.output_len)),
    chained_collectives=True,  # tiny all-reduces, heavy-tailed: TTFT pays their sum
    dispatch_gaps=True,  # ten small actions an iteration: the gaps between add up
    headline=("ttft_p50_s", "tpot_p50_s"),
)
LESSON = Lesson(
    "inference", 7, TEXTS, InferenceParams, InferenceResult, build, metrics, RANK_ENTRY, HOOKS
)
