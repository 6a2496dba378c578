"""The inference lesson's metrics of one mode, from a timeline or the scheduler's clock.

Part of lesson 7 (scenarios.inference.lesson's `metrics` and predict's `lump`
read the same figures through it): where a Program's timeline (measured or
simulated) puts each iteration's tokens and each series' start
(scenarios.inference.program.SeriesIndex), what the clients saw
(scenarios.inference.latency), and the KV cache's occupancy.

Imports: runtime's pure part and the lesson's pure modules.
"""

from __future__ import annotations

import statistics

from runtime.sim.trace import Timeline
from scenarios.inference.blocks import blocks_for
from scenarios.inference.latency import Served, occupancy, served
from scenarios.inference.params import InferenceParams
from scenarios.inference.plan import Plan
from scenarios.inference.program import SeriesIndex, kv_bytes_per_block
from scenarios.inference.stepmodel import Device, Shape, Work, tp_comm_seconds
from scenarios.metrics import Lane, Lanes, Metric


def read_timeline(index: SeriesIndex, timeline: Timeline) -> Served:
    ends = {s.action_id: s.end for s in timeline.spans if s.action_id}
    token_time = [ends[m] for m in index.marker]
    origin = [ends[index.anchor[r]] for r in index.arrival_rank]
    return served(index.plan, token_time, origin)


def series_start(index: SeriesIndex, timeline: Timeline) -> float:
    """When the series began on this timeline: its first start barrier's end."""
    ends = {s.action_id: s.end for s in timeline.spans if s.action_id in index.anchor.values()}
    return min(ends.values(), default=0.0)


def drawn(index: SeriesIndex, timeline: Timeline) -> bool:
    """Whether the timeline has the series' Actions (a simulated or measured Program)."""
    ids = {s.action_id for s in timeline.spans if s.series == index.series}
    return all(m in ids for m in index.marker) and all(a in ids for a in index.anchor.values())


def serving_metrics(
    params: InferenceParams,
    series: str,
    plan: Plan,
    measured: Served | None,
    predicted: Served,
    kv_measured: list[int] | None = None,
) -> list[Metric]:
    """The latency, throughput, SLO and KV metrics of one mode, measured beside predicted
    (`kv_measured`: the peak KV bytes each rank held, after a run)."""
    slo = (params.ttft_slo, params.tpot_slo)
    out = []
    for which in ("ttft", "tpot"):
        for q in (50, 99):
            value = measured.p(which, q) if measured else None
            out.append(Metric(f"{which}_p{q}_s", "s", value, predicted.p(which, q), series=series))
    pairs = (
        ("throughput_tokens_s", "number", lambda s: s.throughput),
        ("goodput_rps", "number", lambda s: s.goodput(*slo)),
        ("slo_attainment", "fraction", lambda s: s.attainment(*slo)),
    )
    for name, unit, read in pairs:
        out.append(
            Metric(name, unit, read(measured) if measured else None, read(predicted), series=series)
        )
    occ = occupancy(plan)
    shape, serving = params.shape, plan.serving
    per_block = kv_bytes_per_block(shape, serving.tp, shape.layers // serving.pp, serving.kv_block)
    out += [
        # Whether the share of requests within the SLO reaches `attainment`: the run's
        # (its value) beside the prediction's, each read off its own timeline.
        Metric(
            "meets_slo",
            "flag",
            measured.attainment(*slo) >= params.attainment if measured else None,
            predicted.attainment(*slo) >= params.attainment,
            series=series,
        ),
        Metric(
            "kv_bytes_per_rank",
            "bytes",
            kv_measured,
            occ.peak_slots // serving.kv_block * per_block,
            series=series,
            category="buffers",
            per="rank" if kv_measured is not None else None,
        ),
        Metric("kv_waste_fraction", "fraction", occ.paged_waste, series=series),
        Metric("kv_waste_fraction_contiguous", "fraction", occ.contiguous_waste, series=series),
        Metric("prefix_hit_tokens", "count", sum(it.hits for it in plan.runs), series=series),
    ]
    return out


def collectives_seen(index: SeriesIndex, timeline: Timeline) -> float | None:
    """Collectives per decode iteration on the first rank, counted off the spans."""
    decode = {k for k, it in enumerate(index.plan.iterations) if not it.prefill}
    if not decode:
        return None
    first = min(index.anchor)
    seen = sum(
        1
        for sp in timeline.spans
        if sp.series == index.series
        and sp.rank == first
        and sp.step in decode
        and sp.kind in ("all_reduce", "all_gather")
    )
    return seen / len(decode)


def peak_concurrency(plan: Plan) -> int:
    """The most sequences in flight at once in the plan (over its engines): each from the
    start of the first iteration it is in to the end of the one that finishes it. At most
    the requests, and max_batch per engine."""
    held: dict[int, list[float]] = {}
    for it in plan.runs:  # a run: its sequences from its first start to its last end
        for piece in it.pieces:
            if piece.padding:
                continue
            start_end = held.setdefault(piece.request, [it.start, it.end])
            start_end[1] = max(start_end[1], it.end)
    # At a tie an ending sequence leaves before a starting one is counted (-1 < +1).
    events = sorted((t, d) for a, b in held.values() for t, d in ((a, 1), (b, -1)))
    peak = now = 0
    for _, d in events:
        now += d
        peak = max(peak, now)
    return peak


def layout_metrics(series: str, plan: Plan, shape: Shape, device: Device) -> list[Metric]:
    """What the layout costs by the step model on `device`: TP's collectives in one decode
    step of one sequence at the trace's mean context, PP's idle share of the stages (the
    bubble, large at low load); how many of the longest requests the KV pool could hold
    (its capacity, as vLLM's "maximum concurrency" says it: more than the trace's
    requests when the pool is large) and how many sequences the plan runs at once (at
    most the requests, and max_batch per engine)."""
    serving = plan.serving
    out = []
    if serving.tp > 1:
        context = round(statistics.fmean(r.context for r in plan.requests))
        step = Work.of([(context, 1, True)])
        comm = tp_comm_seconds(shape, device, step, shape.layers, serving.tp, True)
        out.append(Metric("tp_comm_per_decode_step_s", "s", None, comm, series=series))
    if serving.pp > 1 and plan.runs:
        busy = sum(end - start for _, stages in plan.timed() for start, end in stages)
        span = plan.end - min(it.start for it in plan.runs)
        bubble = 1.0 - busy / (serving.pp * span) if span > 0 else 0.0
        out.append(Metric("pp_bubble_fraction", "fraction", None, bubble, series=series))
    longest = max((r.context + 1 for r in plan.requests), default=1)
    fits = serving.kv_blocks // blocks_for(longest, serving.kv_block)
    out.append(Metric("kv_capacity_sequences", "count", fits, series=series))
    out.append(Metric("max_concurrent_sequences", "count", peak_concurrency(plan), series=series))
    return out


# At most this many requests per mode in the lanes figure: past it the rows are too
# thin to read, and the first ones already show the pattern.
LANE_REQUESTS = 48


def request_lanes(
    indexes: tuple[SeriesIndex, ...], predicted: Timeline, measured: Timeline | None
) -> list[Lanes]:
    """Per mode, one lane per request: from its arrival to its first token (TTFT: the
    wait for a slot and the prefill), then to its last token (decode), measured above
    predicted (the HTML export draws them: scenarios.metrics.Lanes). A lumped prediction
    (one span per iteration on a profile's clock: scenarios.inference.predict) has no
    Actions to read the requests off: only the measured lanes then, or none."""
    out = []
    for index in indexes:
        views = [
            (source, read_timeline(index, timeline), series_start(index, timeline))
            for source, timeline in (("measured", measured), ("predicted", predicted))
            if timeline is not None and drawn(index, timeline)
        ]
        if not views:
            continue
        requests = sorted(views[-1][1].times)
        rows = []
        for rid in requests[:LANE_REQUESTS]:
            for source, view, zero in views:
                if rid in view.times:
                    # Seconds since the mode began: its series starts at a different
                    # moment on each timeline (the modes before it took their own time).
                    arrived, first, last = (t - zero for t in view.times[rid])
                    phases = (("TTFT: wait + prefill", arrived, first), ("decode", first, last))
                    # "req 3", never "r3": that is how the timeline names rank 3.
                    rows.append(Lane(f"req {rid}", source, phases))
        title = f"{index.series}: each request, arrival → first token → last token"
        out.append(Lanes(title, tuple(rows), omitted=max(0, len(requests) - LANE_REQUESTS)))
    return out
