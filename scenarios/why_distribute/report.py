"""Lesson 0's `predict` side as typed metrics: the diagnosis, the 4D plan, the cost sentence.

The lesson's `metrics` (scenarios.why_distribute.lesson) lists these before the
demonstration's (scenarios.why_distribute.demo). From the learner's params it
poses the Problem (model, training run, GPUs: scenarios.why_distribute.costs),
diagnoses it (.diagnosis), plans it (.planner), and writes the course's cost
sentence for the recommended plan against the budget (.budget) at the price of
the shipped table (.prices) unless `price` is given. It says where the planned
shape comes from (a preset and its source, the shape typed, or one derived from
`params`), the recommended plan's MFU and HFU apart, and the cheaper subset of
the GPUs when there is one. The curves are .curves'.

Words and sentences (the pressure, the strategy, the reason, the plan and why a
plan loses, the budget sentence) come in both languages as one metric: the English
one as its value, the Spanish one as its twin (Metric.es).

Imports: runtime's pure part, the lesson's own modules (no torch).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

from runtime.sim import formulas
from scenarios.metrics import Metric, Value
from scenarios.why_distribute import footprint, planner
from scenarios.why_distribute.budget import Estimate, Verdict, sentence
from scenarios.why_distribute.costs import Problem
from scenarios.why_distribute.diagnosis import Diagnosis, diagnose
from scenarios.why_distribute.gpus import gpu_named
from scenarios.why_distribute.model import PRESETS
from scenarios.why_distribute.params import WhyParams
from scenarios.why_distribute.phrases import phrase
from scenarios.why_distribute.prices import price_table

LANGUAGES = ("en", "es")
CHEAPER = 0.01  # a subset is shown as the cheaper alternative when it saves this share


def price(params: WhyParams) -> float:
    """$/GPU-hour: as given, or the shipped table's (on-demand or spot)."""
    if params.price:
        return params.price
    listed = price_table().price(params.gpu, params.spot == "yes")
    return listed if listed is not None else 1.0


def problem(params: WhyParams) -> Problem:
    return _problem(params)


@lru_cache(maxsize=8)
def _problem(params: WhyParams) -> Problem:
    return Problem(
        psi=float(params.psi),
        shape=params.shape,
        precision=params.precision,
        micro=params.microbatch_size,
        global_batch=params.batch,
        tokens=params.total_tokens,
        gpu=gpu_named(params.gpu),
        gpus=params.gpus,
        per_node=min(params.gpus_per_node, params.gpus),
        tflops=params.achieved_tflops,
        price=price(params),
        setup_hours=params.setup / 3600,
        margin=params.margin,
        deadline_s=params.deadline_s,
        flash=params.attention == "flash",
        recompute=params.recompute,
    )


@lru_cache(maxsize=8)
def diagnosis(params: WhyParams) -> Diagnosis:
    pb = problem(params)
    return diagnose(
        pb.psi,
        pb.shape,
        pb.precision,
        params.diagnosis_recompute,
        pb.micro,
        pb.gpu.memory_bytes,
        pb.achieved_flops,
        pb.tokens,
        pb.deadline_s,
    )


@lru_cache(maxsize=8)
def planning(params: WhyParams) -> planner.Planning:
    layout = params.pinned
    if layout is not None:
        return planner.pinned(problem(params), layout)
    return planner.plan(problem(params))


def diagnosis_metrics(params: WhyParams) -> list[Metric]:
    d = diagnosis(params)
    out = [
        Metric("parameters", "count", int(params.psi)),
        said("model_shape", {lang: shape_text(params, lang) for lang in LANGUAGES}),
        said("real_run", {lang: real_run_text(params, lang) for lang in LANGUAGES}),
        Metric("training_tokens", "count", int(params.total_tokens)),
        Metric("gpu", "text", params.gpu),
        Metric("gpu_memory_bytes", "bytes", d.gpu_memory),
        Metric("peak_tflops", "number", problem(params).gpu.peak_flops / 1e12),
        Metric("achieved_tflops", "number", problem(params).achieved_flops / 1e12),
    ]
    for category, nbytes in d.memory.items():
        out.append(Metric("memory_per_gpu_bytes", "bytes", nbytes, None, "one_gpu", category))
    out += [
        Metric("state_bytes_per_param", "number", _per_param(params)),
        Metric("fits_one_gpu", "flag", d.fits),
        Metric("one_gpu_days", "number", d.one_gpu_s / 86400),
        Metric("deadline_days", "number", d.deadline_s / 86400 if params.deadline else None),
        said("pressure", d.pressure_text()),
        said("strategy", d.strategy_text),
        said("reason", d.reason),
        Metric("inference_bytes", "bytes", sum(d.inference.values())),
        Metric("inference_fits_one_gpu", "flag", d.inference_fits),
    ]
    return out


def said(name: str, texts: Mapping[str, Value]) -> Metric:
    """A text metric from its texts by language: English the value, Spanish its twin."""
    return Metric(name, "text", texts["en"], es=texts["es"])


def _per_param(params: WhyParams) -> float:
    return float(sum(formulas.ZERO_PRECISIONS[params.precision]))


def plan_metrics(params: WhyParams) -> list[Metric]:
    pb, plans = problem(params), planning(params)
    out = [
        Metric("layouts_tried", "count", plans.layouts_tried),
        Metric("layouts_fitting", "count", plans.layouts_fitting),
    ]
    best = plans.recommended
    if best is None:
        needed = math.ceil(sum(plans.dp_only.memory.values()) / pb.gpu.memory_bytes)
        line = {
            lang: phrase("no_plan", lang, gpus=params.gpus, gpu=params.gpu, needed=needed)
            for lang in LANGUAGES
        }
        return [*out, said("recommended", line), Metric("plan", "text", [], es=[])]
    ranked = plans.by_cost if params.rank_by == "cost" else plans.by_time
    # the cluster asked, all of it (a subset is the alternative below, not a row)
    shown = [p for p in ranked if p.gpus == best.gpus][: params.top]
    recompute = best.layout.recompute if params.recompute == "auto" else params.recompute
    gpus = best.gpus if plans.pinned else params.gpus
    achieved = params.achieved_tflops * 1e12 or best.hfu * best.peak
    rule = footprint.rule_of_thumb_seconds(pb.psi, pb.tokens, gpus, achieved, recompute)
    why = "plan_pinned" if plans.pinned else "plan_all_gpus"
    out += [
        Metric("recommended", "text", best.name),
        said(
            "recommended_why",
            {lang: phrase(why, lang, name=best.name, gpus=best.gpus) for lang in LANGUAGES},
        ),  # fmt: skip
        Metric("recommended_gpus", "count", best.gpus),
        Metric("step_s", "s", None, best.step_s, "recommended"),
        Metric("train_days", "number", None, best.train_days),
        Metric("train_days_rule_of_thumb", "number", rule / 86400),
        Metric("mfu", "fraction", None, best.mfu, "recommended"),
        Metric("hfu", "fraction", None, best.hfu, "recommended"),
        Metric("model_tflops_per_gpu", "number", None, best.mfu * best.peak / 1e12, "recommended"),
        Metric(
            "hardware_tflops_per_gpu", "number", None, best.hfu * best.peak / 1e12, "recommended"
        ),
        said(
            "plan", {lang: [_row(i, p, lang) for i, p in enumerate(shown, 1)] for lang in LANGUAGES}
        ),
        said(
            "plan_why", {lang: _why(shown, params.rank_by, lang, pb.per_node) for lang in LANGUAGES}
        ),
        Metric("dp_only_fits", "flag", plans.dp_only.fits),
    ]
    if not plans.pinned:
        out.append(said("alternative", {lang: _alternative(best, plans.cheapest, lang)
                                         for lang in LANGUAGES}))  # fmt: skip
    for part, seconds in best.parts.items():
        out.append(Metric(f"step_{part}_s", "s", None, seconds, "recommended"))
    return out + budget_metrics(params, best)


def _alternative(best: planner.Plan, cheap: planner.Plan | None, language: str) -> str:
    """The cheapest plan on a subset of the GPUs, when it saves at least CHEAPER of the
    recommended plan's cost (fewer GPUs for longer often cost the same)."""
    if cheap is None or cheap.cost_usd > (1 - CHEAPER) * best.cost_usd:
        return phrase("alternative_none", language)
    return phrase(
        "alternative_cheaper",
        language,
        name=cheap.name,
        gpus=cheap.gpus,
        days=f"{cheap.train_days:,.3g}",
        cost=f"${cheap.cost_usd:,.0f}",
        best_days=f"{best.train_days:,.3g}",
        best_cost=f"${best.cost_usd:,.0f}",
    )


def shape_text(params: WhyParams, language: str) -> str:
    """Where the planned shape comes from, and the shape, in `language`."""
    m = params.shape
    values = dict(
        layers=m.layers, hidden=m.hidden, ffn=m.f, heads=m.heads, kv=m.kv, vocab=m.vocab,
        mlp=m.mlp, psi=f"{m.psi:,.0f}",
    )  # fmt: skip
    if params.shape_source == "preset":
        source = PRESETS[params.preset].source
        return phrase("shape_preset", language, name=params.preset, source=source, **values)
    return phrase(f"shape_{params.shape_source}", language, **values)


def real_run_text(params: WhyParams, language: str) -> str:
    """What the real run trains: always the demonstration's MiniGPT (a 7B or 70B model is
    predicted here, never run), said so beside the planned model."""
    mini = params.demo_shape.parameters
    key = "real_run_same" if params.shape_source == "demo" else "real_run_other"
    name = params.preset if params.shape_source == "preset" else f"{params.psi:,}"
    count = f"{mini:,}".replace(",", "." if language == "es" else ",")
    return phrase(key, language, ranks=params.ranks, mini=count, name=name)


def _row(i: int, plan: planner.Plan, language: str) -> str:
    how = phrase("plan_simulated" if plan.simulated else "plan_closed_form", language)
    return phrase(
        "plan_row",
        language,
        i=i,
        name=plan.name,
        gpus=plan.gpus,
        step=f"{plan.step_s:.3g}",
        days=f"{plan.train_days:,.3g}",
        cost=f"${plan.cost_usd:,.0f}",
        how=how,
    )


def _why(shown: list[planner.Plan], rank_by: str, language: str, per_node: int) -> list[str]:
    """Why each plan below the first loses, by the part of its step that grew most."""
    if not shown:
        return []
    first = shown[0]
    out = [phrase(f"why_first_{rank_by}", language)]
    for plan in shown[1:]:
        if rank_by == "time":
            pct = plan.train_s / first.train_s - 1 if first.train_s else 0.0
        else:
            pct = plan.cost_usd / first.cost_usd - 1 if first.cost_usd else 0.0
        grew = {k: plan.parts[k] - first.parts.get(k, 0.0) for k in plan.parts}
        part = max(grew, key=lambda k: grew[k])
        if rank_by == "cost" and plan.gpus > first.gpus and plan.train_s < first.train_s:
            part = "gpus"
        elif part == "tp" and plan.layout.tp > per_node:
            part = "tp_across"
        text = phrase(
            f"why_{rank_by}", language, pct=f"{pct:.0%}", part=phrase(f"part_{part}", language)
        )
        out.append(f"{plan.name}: {text}")
    return out


def budget_metrics(params: WhyParams, best: planner.Plan) -> list[Metric]:
    gpu = gpu_named(params.gpu)
    estimate = Estimate(
        gpu=gpu.label,
        count=best.gpus,
        price=price(params),
        spot=params.spot == "yes",
        hours=best.train_s / 3600,
        setup_hours=params.setup / 3600,
        margin=params.margin,
    )
    verdict = Verdict(estimate, params.budget)
    table = price_table()
    date = table.as_of.isoformat()
    sources = {"en": table.source, "es": table.source_es}
    source = {
        lang: phrase("price_given", lang)
        if params.price
        else phrase("price_source", lang, source=sources[lang], date=date)
        for lang in LANGUAGES
    }
    return [
        Metric("price_per_gpu_hour_usd", "number", estimate.price),
        said("price_source", source),
        Metric("cost_estimate_usd", "number", estimate.cost),
        Metric("budget_usd", "number", params.budget),
        Metric("budget_left_usd", "number", verdict.left),
        Metric("budget_accepted", "flag", verdict.accepted),
        said("budget_sentence", {lang: sentence(verdict, lang) for lang in LANGUAGES}),
    ]
