"""What a served trace's clients saw: TTFT, TPOT, throughput, goodput, KV occupancy.

Part of lesson 7's mechanism, pure. The same reading serves a measured run, a
simulated Program and the scheduler's own clock (predict, the config search):
it takes a plan (scenarios.inference.plan) and, for each iteration, the moment
its tokens exist and the moment the series' clock started on the rank that
received its requests. docs/references.md, "Distributed inference":

- TTFT: first token − arrival (queueing and the prefill);
- TPOT: (last token − first token) / (output tokens − 1), the time per output
  token once decoding;
- throughput: output tokens / (last token − start);
- SLO attainment: the share of requests with TTFT ≤ ttft_slo and TPOT ≤
  tpot_slo; goodput: those requests per second of the run (DistServe, Zhong et
  al. 2024, rates a system by the rate it serves within the SLO).

Pure: stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from scenarios.inference.plan import Plan


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between order statistics (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class Served:
    """Per request latencies and the run's totals."""

    # Per request: (arrival, first token, last token), on the timeline's clock.
    times: dict[int, tuple[float, float, float]]
    tpot: dict[int, float]
    tokens: int
    duration: float

    @cached_property
    def ttft(self) -> dict[int, float]:
        return {rid: first - arrived for rid, (arrived, first, _) in self.times.items()}

    def p(self, which: str, q: float) -> float | None:
        return percentile(list(getattr(self, which).values()), q)

    @property
    def throughput(self) -> float:
        return self.tokens / self.duration if self.duration > 0 else 0.0

    def meets(self, ttft_slo: float, tpot_slo: float) -> int:
        return sum(
            1
            for rid, t in self.ttft.items()
            if t <= ttft_slo and self.tpot.get(rid, 0.0) <= tpot_slo
        )

    def attainment(self, ttft_slo: float, tpot_slo: float) -> float:
        return self.meets(ttft_slo, tpot_slo) / len(self.ttft) if self.ttft else 0.0

    def goodput(self, ttft_slo: float, tpot_slo: float) -> float:
        """Requests per second that met both SLOs."""
        return self.meets(ttft_slo, tpot_slo) / self.duration if self.duration > 0 else 0.0


def served(plan: Plan, token_time: Sequence[float], origin: Sequence[float]) -> Served:
    """Latencies from each iteration's token time and its arrivals' clock origin."""
    requests = {r.id: r for r in plan.requests}
    arrived: dict[int, float] = {}
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    tokens = 0
    for it, t, t0 in zip(plan.iterations, token_time, origin, strict=True):
        for piece in it.pieces:
            if piece.padding:
                continue
            tokens += 1
            rid = piece.request
            if piece.first:
                arrived[rid] = t0 + requests[rid].arrival
                first[rid] = last[rid] = t
            if piece.done:
                last[rid] = t
    tpot = {
        rid: (last[rid] - first[rid]) / (requests[rid].output_len - 1)
        for rid in first
        if requests[rid].output_len > 1
    }
    start = min(origin, default=0.0)
    end = max(last.values(), default=start)
    times = {rid: (arrived[rid], first[rid], last[rid]) for rid in first}
    return Served(times, tpot, tokens, end - start)


def clocked(plan: Plan) -> Served:
    """What the clients saw on the plan's own clock: `served` with each iteration's end
    as its token time and every arrival counted from 0, read off the plan's records (a
    run's tokens counted at once: none is a first, only its last iteration's are done)."""
    requests = {r.id: r for r in plan.requests}
    arrived: dict[int, float] = {}
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    tokens = 0
    for it in plan.runs:
        t = it.end
        for piece in it.pieces:
            if piece.padding:
                continue
            tokens += it.repeat
            rid = piece.request
            if piece.first:
                arrived[rid] = requests[rid].arrival
                first[rid] = last[rid] = t
            if piece.done:
                last[rid] = t
    tpot = {
        rid: (last[rid] - first[rid]) / (requests[rid].output_len - 1)
        for rid in first
        if requests[rid].output_len > 1
    }
    times = {rid: (arrived[rid], first[rid], last[rid]) for rid in first}
    return Served(times, tpot, tokens, max(last.values(), default=0.0))  # from 0


@dataclass(frozen=True)
class Occupancy:
    """The KV cache over a plan's iterations: peak blocks in use, and the waste of the
    paged layout and of a contiguous max-length slot per sequence (slot-weighted)."""

    peak_slots: int
    paged_waste: float
    contiguous_waste: float


def _floors(low: int, high: int, block: int) -> int:
    """The sum of q // block for q from low to high (0 <= low <= high + 1)."""

    def upto(x: int) -> int:  # q // block summed over 0..x
        k, r = divmod(x + 1, block)
        return block * k * (k - 1) // 2 + k * r

    return upto(high) - upto(low - 1)


def occupancy(plan: Plan) -> Occupancy:
    written = allocated = used = reserved = peak = 0
    block = plan.serving.kv_block
    for it in plan.runs:
        # A run's iterations, summed in closed form: each one writes a position per
        # sequence (`n` slots), and a block opens wherever a position is a block's first.
        m, n = it.repeat, len(it.pieces)
        steps = n * m * (m - 1) // 2  # sum over the iterations before the last of n * back
        opened = sum(
            m * (p.start // block) - _floors(p.start - m + 1, p.start, block) for p in it.pieces
        )
        written += m * it.kv[0] - steps
        allocated += m * it.kv[1] - opened * block
        used += m * it.contiguous[0] - steps
        reserved += m * it.contiguous[1]
        peak = max(peak, it.kv[1])
    return Occupancy(
        peak,
        1.0 - written / allocated if allocated else 0.0,
        1.0 - used / reserved if reserved else 0.0,
    )
