"""Lesson 6's metrics and marks: what a run measured beside what was predicted.

The lesson's `metrics` and `marks` hooks (scenarios.mixed_precision.lesson). Per
series: the step time and the share of communication hidden under backward
(scenarios.mixed_precision.timing, measured and predicted alike), the bucket
sizes (measured beside scenarios.mixed_precision.buckets' plan), the losses
and their largest gap to fp32, the loss scale after each step and the skipped
steps, the memory per category (measured beside the accounting below) and per
parameter. Per run: whether the hand-written scaler and buckets equal torch's,
how far the hand-written DDP's gradients are from torch's, how many of a real
step's gradients fp16 flushes to zero with and without scaling, and the
number-format explorer (the `value` a learner types, as fp16 and bf16 store it).

Memory per parameter with Adam (docs/references.md "Mixed precision"): fp32 4 + 4 + 8
= 16 B; mixed 2 (fp16/bf16 weights) + 2 (their gradients) + 4 (fp32 master) + 8
(Adam's moments) = 16 B (ZeRO's 2 + 2 + 12), 18 B when the gradients are kept in
fp32 (Megatron's main grads); here the fp32 copy of the gradients exists only
around the optimizer step, so it is drawn with the buckets as `buffers`.

Imports: runtime's pure part, the lesson contract and the lesson's params, Program
and pure modules (the UI imports this).
"""

from __future__ import annotations

from runtime.sim.trace import Mark, Timeline
from scenarios.base import RunData
from scenarios.metrics import Metric
from scenarios.mixed_precision import buckets, formats, timing
from scenarios.mixed_precision.params import MixedParams
from scenarios.mixed_precision.plan import ELEMENT_BYTES, Variant, caps, variants
from scenarios.mixed_precision.results import MixedResult, SeriesResult

LISTED_BUCKETS = 64  # past this many buckets, only their count is reported
STATE = ("params", "grads", "master", "optimizer")  # the model states, per parameter


def memory_plan(precision: str, psi: int, bucket_bytes: int) -> dict[str, int]:
    """Bytes per category on each rank: the accounting above, plus DDP's bucket buffers."""
    if precision == "fp32":
        return {"params": 4 * psi, "grads": 4 * psi, "master": 0, "optimizer": 8 * psi,
                "buffers": bucket_bytes}  # fmt: skip
    return {"params": 2 * psi, "grads": 2 * psi, "master": 4 * psi, "optimizer": 8 * psi,
            "buffers": bucket_bytes + 4 * psi}  # fmt: skip


def metrics(
    params: MixedParams, predicted: Timeline, run: RunData[MixedResult] | None
) -> list[Metric]:
    psi = params.psi
    out = [
        Metric("parameters", "count", psi),
        Metric("ranks", "count", params.ranks),
        *explorer(params.value),
    ]
    results = run.results if run is not None else None
    by_series = {v.series: v for v in variants(params)}
    for v in by_series.values():
        mine = [r.series[v.series] for r in results] if results else None
        out += series_metrics(params, v, predicted, run.measured if run else None, mine)
    if results:
        out += run_metrics(params, results, by_series)
    return out


def series_metrics(
    params: MixedParams,
    v: Variant,
    predicted: Timeline,
    measured: Timeline | None,
    mine: list[SeriesResult] | None,
) -> list[Metric]:
    s, psi = v.series, params.psi
    plan = buckets.plan(params.model, ELEMENT_BYTES[v.precision], *caps(params))[2]
    listed = len(plan) <= LISTED_BUCKETS
    out = [
        Metric("step_s", "s", timing.step_s(measured, s) if measured else None,
               timing.step_s(predicted, s), s),
        Metric("comm_overlap_fraction", "fraction",
               timing.overlap_fraction(measured, s) if measured else None,
               timing.overlap_fraction(predicted, s), s),
        Metric("step_s_no_overlap", "s",
               timing.no_overlap_s(measured, s) if measured else None,
               timing.no_overlap_s(predicted, s), s),
        *step_pair(timing.step_s(measured, s) if measured else None, timing.step_s(predicted, s), s),
        Metric("bucket_count", "count", len(mine[0].buckets) if mine else None, len(plan), s),
    ]  # fmt: skip
    if listed:
        got = list(mine[0].buckets) if mine else None
        out.append(Metric("bucket_sizes_bytes", "bytes", got, plan, s))
    plan_memory = memory_plan(v.precision, psi, sum(plan))
    for category, nbytes in plan_memory.items():
        got = [getattr(m.memory, category) for m in mine if m.memory] if mine else None
        out.append(Metric("memory_bytes", "bytes", got or None, nbytes, s, category, "rank"))
    state = sum(plan_memory[c] for c in STATE) / psi
    got_state = None
    if mine and all(m.memory for m in mine):
        got_state = max(sum(getattr(m.memory, c) for c in STATE) for m in mine) / psi  # type: ignore[misc]
    out.append(Metric("memory_bytes_per_param", "number", got_state, state, s))
    if v.precision != "fp32":
        out.append(Metric("memory_bytes_per_param_fp32_main_grads", "number", state + 2, series=s))
    if mine:
        losses = [sum(col) / len(col) for col in zip(*(m.losses for m in mine), strict=True)]
        out.append(Metric("loss", "number", losses, series=s, per="step"))
    if mine and v.scaled:
        out += scale_metrics(s, mine, hand=v.implementation == "hand")
    return out


def step_pair(measured: float | None, predicted: float | None, s: str) -> list[Metric]:
    """The issue's names for the step-time pair: measured, predicted, relative error."""
    error = abs(predicted - measured) / measured if measured and predicted is not None else None
    return [
        Metric("step_measured_s", "s", measured, series=s),
        Metric("step_predicted_s", "s", None, predicted, s),
        Metric("prediction_error", "fraction", error, series=s),
    ]


def scale_metrics(series: str, mine: list[SeriesResult], *, hand: bool) -> list[Metric]:
    first = mine[0]
    same = all(m.scale_trace == first.scale_trace and m.skipped == first.skipped for m in mine)
    out = [
        Metric("scale_trace", "number", list(first.scale_trace), series=series, per="step"),
        Metric("skipped_steps", "count", list(first.skipped), series=series),
        Metric("skips_same_on_every_rank", "flag", same, series=series),
    ]
    if hand:
        equal = all(m.scale_trace == m.torch_scale_trace and m.skipped == m.torch_skipped
                    for m in mine)  # fmt: skip
        out.append(Metric("scaler_equals_torch", "flag", equal, series=series))
    return out


def run_metrics(
    params: MixedParams, results: list[MixedResult], by_series: dict[str, Variant]
) -> list[Metric]:
    out: list[Metric] = []
    first = results[0]
    fp32 = {v.implementation: s for s, v in by_series.items() if v.precision == "fp32"}
    for s, v in by_series.items():
        if v.precision != "fp32" and v.implementation in fp32:
            mine, base = first.series[s].losses, first.series[fp32[v.implementation]].losses
            gap = max((abs(a - b) for a, b in zip(mine, base, strict=True)), default=0.0)
            out.append(Metric("max_loss_gap_vs_fp32", "number", gap, series=s))
    # The scalers: torch's GradScaler beside the hand-written one on the same gradients,
    # and the hand series' trace against the torch series' (GradScaler driving).
    equal = _agreements(results, by_series)
    if equal:
        out.append(Metric("scaler_equals_torch", "flag", all(equal)))
    hands = {v.precision: s for s, v in by_series.items() if v.implementation == "hand"}
    same_buckets = []
    for s, v in by_series.items():
        if v.implementation == "torch" and v.precision in hands:
            hand = hands[v.precision]
            same_buckets.append(all(
                r.series[s].buckets == r.series[hand].buckets == r.series[s].logged_buckets
                and r.series[s].first_buckets == r.series[hand].first_buckets
                for r in results
            ))  # fmt: skip
    if same_buckets:
        out.append(Metric("buckets_equal_torch", "flag", all(same_buckets)))
    diffs = {p: max(r.grad_diff_vs_torch[p] for r in results) for p in first.grad_diff_vs_torch}
    for precision, diff in diffs.items():
        out.append(Metric("grad_diff_vs_torch", "diff", diff, series=f"{precision}/torch"))
    if diffs:
        out.append(Metric("max_grad_diff_vs_torch", "diff", max(diffs.values())))
    if first.underflow is not None:
        u = first.underflow
        out += [
            Metric("underflow_fraction_unscaled", "fraction", u.zero_unscaled),
            Metric("underflow_fraction_scaled", "fraction", u.zero_scaled),
            Metric("subnormal_fraction_unscaled", "fraction", u.subnormal_unscaled),
            Metric("subnormal_fraction_scaled", "fraction", u.subnormal_scaled),
            Metric("smallest_gradient", "number", u.smallest),
        ]
    return out


def _agreements(results: list[MixedResult], by_series: dict[str, Variant]) -> list[bool]:
    """Per fp16 hand series: GradScaler beside it agreed on every rank, and so did the
    torch series' GradScaler when it ran."""
    flags = []
    for s, v in by_series.items():
        if not (v.scaled and v.implementation == "hand"):
            continue
        twin = f"{v.precision}/torch" if f"{v.precision}/torch" in by_series else None
        ok = all(
            r.series[s].scale_trace == r.series[s].torch_scale_trace
            and r.series[s].skipped == r.series[s].torch_skipped
            and (twin is None or r.series[twin].scale_trace == r.series[s].scale_trace)
            for r in results
        )
        flags.append(ok)
    return flags


# What formats.classify says, in Spanish (overflow and underflow are the course's terms).
CLASSES_ES = {
    "exact": "exacto",
    "normal": "normal",
    "subnormal": "subnormal",
    "underflow": "underflow",
    "overflow": "overflow",
}


def explorer(value: float) -> list[Metric]:
    """What fp16 and bf16 store for the learner's `value`, and what became of it."""
    out = [Metric("value", "number", value)]
    for fmt in ("fp16", "bf16"):
        kind = formats.classify(value, fmt)
        out += [
            Metric(f"value_{fmt}", "number", formats.stored(value, fmt)),
            Metric(f"value_{fmt}_is", "text", kind, es=CLASSES_ES[kind]),
        ]
    return out


def marks(params: MixedParams, results: list[MixedResult]) -> list[Mark]:
    """Rank 0's skipped steps and scale changes (every rank's are the same: the all-reduce
    spreads the inf), on every rank's row."""
    if not results:
        return []
    return [
        Mark(t, kind, label)
        for series in results[0].series.values()
        for t, kind, label in series.events
    ]
