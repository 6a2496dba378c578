"""The config search: which TP × PP × replicas × max batch meets the SLO, at what cost.

Part of lesson 7's prediction, pure. For a number of GPUs, every way to write
it as tp · pp · replicas (tp dividing the heads, pp at most the layers) and a
few batch sizes is served on the hardware profile's clock by the real
scheduler (scenarios.inference.plan); where a plan's batch cap never kept a
waiting request out, a larger cap plans the very same iterations and is read
off that plan. Replicas split the trace round-robin
(each sees a Poisson stream of rate/replicas: the router's choice matters less
than the layout here, and the lesson's run shows routing). A layout whose
weights do not fit a GPU's memory is left out; the rest of the memory holds
the KV pool. The configurations that meet the SLO (attainment ≥ target) are
ranked by goodput per GPU, and per dollar at `price` per GPU-hour.

DistServe's what-if, prefill and decode on separate GPUs, is beside it
(scenarios.inference.disagg).

Pure: stdlib and the lesson's pure modules.
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.inference.blocks import blocks_for
from scenarios.inference.latency import clocked
from scenarios.inference.plan import Plan, Serving, plan
from scenarios.inference.stepmodel import Device, Shape
from scenarios.inference.trace import Request

BATCHES = (8, 32, 128)
# Each configuration serves the first requests of its share up to this many output
# tokens times stages (a sample of its steady state): the search costs the same at any
# trace length (benchmarks/predict_max.py times it).
SEARCH_TOKENS = 1_500
MAX_TP = 8  # TP's all-reduces on every token stay within a node (NVLink)
MAX_PP = 8
MEMORY_FOR_KV = 0.9  # of a GPU's memory, after the weights (vLLM's gpu_memory_utilization)


@dataclass(frozen=True)
class Found:
    serving: Serving
    goodput: float  # requests per second within the SLO
    attainment: float
    ttft_p50: float | None
    tpot_p50: float | None

    @property
    def per_gpu(self) -> float:
        return self.goodput / self.serving.gpus

    def per_dollar(self, price: float) -> float:
        """Requests within the SLO per dollar at `price` per GPU-hour."""
        return self.goodput * 3600 / (self.serving.gpus * price) if price > 0 else 0.0

    def describe(self, price: float, language: str = "en") -> str:
        """One line: the layout, its goodput, per GPU and per dollar (`language`: en, es)."""
        s = self.serving
        if language == "es":
            return (
                f"tp{s.tp}·pp{s.pp}·×{s.replicas} lote {s.max_batch}: "
                f"{self.goodput:.3g} pet/s dentro del SLO ({self.attainment:.0%}), "
                f"{self.per_gpu:.3g}/GPU, {self.per_dollar(price):,.0f}/$"
            )
        return (
            f"tp{s.tp}·pp{s.pp}·×{s.replicas} batch {s.max_batch}: "
            f"{self.goodput:.3g} req/s in SLO ({self.attainment:.0%}), "
            f"{self.per_gpu:.3g}/GPU, {self.per_dollar(price):,.0f}/$"
        )


def layouts(gpus: int, shape: Shape) -> list[tuple[int, int, int]]:
    """(tp, pp, replicas) with tp · pp · replicas = gpus: TP within a node's 8 GPUs and
    dividing the heads, PP at most MAX_PP stages and the layers; replicas the rest."""
    out = []
    for tp in range(1, min(gpus, MAX_TP) + 1):
        if gpus % tp or shape.heads % tp:
            continue
        for pp in range(1, min(gpus // tp, MAX_PP, shape.layers) + 1):
            if (gpus // tp) % pp:
                continue
            out.append((tp, pp, gpus // tp // pp))
    return out


def kv_blocks(
    shape: Shape, device: Device, tp: int, pp: int, block: int, default: int, cap: int
) -> int:
    """Blocks of the pool each engine gets from what is left of a GPU's memory (the
    lesson's `kv_blocks` on a profile that states no memory), at most `cap` (what the
    whole trace would hold at once); 0: the weights do not fit."""
    if device.memory_bytes is None:
        return default
    free = device.memory_bytes * MEMORY_FOR_KV - shape.weight_bytes / (tp * pp)
    per_block = 2 * shape.layers / pp * shape.kv_heads_per_rank(tp) * shape.head_dim
    per_block *= block * shape.dtype_bytes
    return max(0, min(cap, int(free // per_block)))


def trace_blocks(requests: tuple[Request, ...], block: int) -> int:
    """Blocks every request of the trace would hold at once: more is never used."""
    return sum(blocks_for(r.context + 1, block) for r in requests)


def sample(
    requests: tuple[Request, ...], stages: int, tokens: int = SEARCH_TOKENS
) -> tuple[Request, ...]:
    """The first requests up to `tokens` output tokens through `stages` stages (at least
    one request)."""
    total = 0
    for n, request in enumerate(requests):
        total += request.output_len * stages
        if total > tokens and n:
            return requests[:n]
    return requests


def evaluate(
    shape: Shape, device: Device, requests: tuple[Request, ...], serving: Serving
) -> Plan | None:
    """One replica's round-robin share of `requests` (sampled) served on `serving`'s
    layout; None: a request's KV does not fit the pool."""
    share = sample(requests[:: serving.replicas], serving.pp)  # one replica's round-robin share
    one = Serving(
        serving.tp,
        serving.pp,
        1,
        serving.batching,
        "round-robin",
        serving.max_batch,
        serving.kv_block,
        serving.kv_blocks,
    )
    try:
        planned = plan(shape, device, one, share)
    except ValueError:  # a request's KV does not fit the pool
        return None
    return planned


def found(serving: Serving, planned: Plan, slo: tuple[float, float], rate: float) -> Found:
    """What `serving` achieved, as read off a plan of one replica's share."""
    result = clocked(planned)
    return Found(
        serving,
        # within-SLO share of the offered load (rate), as DistServe rates a system
        rate * result.attainment(*slo),
        result.attainment(*slo),
        result.p("ttft", 50),
        result.p("tpot", 50),
    )


def search(
    shape: Shape,
    device: Device,
    requests: tuple[Request, ...],
    gpus: int,
    slo: tuple[float, float],
    *,
    kv_block: int,
    default_blocks: int,
    rate: float,
    batching: str = "continuous",
) -> list[Found]:
    """Every layout and batch size evaluated, best goodput per GPU first (then the
    lowest latency: TTFT + TPOT at the median)."""
    out: list[Found] = []
    cap = trace_blocks(requests, kv_block)
    for tp, pp, replicas in layouts(gpus, shape):
        blocks = kv_blocks(shape, device, tp, pp, kv_block, default_blocks, cap)
        if blocks == 0:
            continue
        unbound: Plan | None = None  # a plan no batch cap changed: the larger ones alike
        for batch in BATCHES:
            serving = Serving(tp, pp, replicas, batching, "round-robin", batch, kv_block, blocks)
            if unbound is not None:
                out.append(found(serving, unbound, slo, rate))
                continue
            planned = evaluate(shape, device, requests, serving)
            if planned is None:
                break  # a request's KV does not fit the pool, whatever the batch
            out.append(found(serving, planned, slo, rate))
            if not planned.batch_bound:
                unbound = planned
    return sorted(out, key=lambda f: (-f.per_gpu, (f.ttft_p50 or 0) + (f.tpot_p50 or 0)))
