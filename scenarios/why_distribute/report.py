"""Lesson 0's `predict` side as typed metrics: the diagnosis, the 3D plan, the cost sentence.

The lesson's `metrics` (scenarios.why_distribute.lesson) lists these before the
demonstration's (scenarios.why_distribute.demo). From the learner's params it
poses the Problem (model, training run, GPUs: scenarios.why_distribute.costs),
diagnoses it (.diagnosis), plans it (.planner), and writes the course's cost
sentence for the recommended plan against the budget (.budget) at the price of
the shipped table (.prices) unless `price` is given. Also the DDP scaling curve
on the GPU profile: where DDP stops scaling because communication dominates.

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
from runtime.sim.program import Action
from scenarios.metrics import Curve, Metric, Value
from scenarios.why_distribute import footprint, planner
from scenarios.why_distribute.budget import Estimate, Verdict, sentence
from scenarios.why_distribute.costs import Problem
from scenarios.why_distribute.diagnosis import Diagnosis, diagnose
from scenarios.why_distribute.gpus import gpu_named
from scenarios.why_distribute.params import WhyParams
from scenarios.why_distribute.phrases import phrase
from scenarios.why_distribute.prices import price_table

LANGUAGES = ("en", "es")


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
    )


@lru_cache(maxsize=8)
def diagnosis(params: WhyParams) -> Diagnosis:
    pb = problem(params)
    return diagnose(
        pb.psi,
        pb.shape,
        pb.precision,
        params.recompute,
        pb.micro,
        pb.gpu.memory_bytes,
        pb.achieved_flops,
        pb.tokens,
        pb.deadline_s,
    )


@lru_cache(maxsize=8)
def planning(params: WhyParams) -> planner.Planning:
    return planner.plan(problem(params))


def diagnosis_metrics(params: WhyParams) -> list[Metric]:
    d = diagnosis(params)
    out = [
        Metric("parameters", "count", int(params.psi)),
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
    shown = ranked[: params.top]
    rule = footprint.rule_of_thumb_seconds(
        pb.psi, pb.tokens, best.gpus, pb.achieved_flops, best.layout.recompute
    )
    out += [
        Metric("recommended", "text", best.name),
        Metric("recommended_gpus", "count", best.gpus),
        Metric("step_s", "s", None, best.step_s, "recommended"),
        Metric("train_days", "number", None, best.train_days),
        Metric("train_days_rule_of_thumb", "number", rule / 86400),
        said(
            "plan", {lang: [_row(i, p, lang) for i, p in enumerate(shown, 1)] for lang in LANGUAGES}
        ),
        said(
            "plan_why", {lang: _why(shown, params.rank_by, lang, pb.per_node) for lang in LANGUAGES}
        ),
        Metric("dp_only_fits", "flag", plans.dp_only.fits),
    ]
    for part, seconds in best.parts.items():
        out.append(Metric(f"step_{part}_s", "s", None, seconds, "recommended"))
    return out + budget_metrics(params, best)


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


def ddp_scaling(params: WhyParams) -> Curve:
    """Predicted DDP speed-up of the planned model (the MiniGPT if it does not fit one
    GPU) on the GPU profile, n = 1, 2, 4… GPUs: the global batch's compute shrinks as
    1/n, the gradients' ring all-reduce (4Ψ bytes, fp32 grads) does not."""
    pb = problem(params)
    psi = pb.psi if diagnosis(params).fits else float(params.demo_shape.parameters)
    tokens = params.batch * pb.shape.seq
    compute = 6 * psi * tokens / pb.achieved_flops
    xs, speedups, ideal = [], [], []
    n = 1
    while n <= max(params.gpus, 2) and n <= 4096:
        comm = pb.model.collective_time(
            Action("ar", 0, "all_reduce", bytes=int(4 * psi), group=range(n), algorithm="ring")  # type: ignore[arg-type]
        )
        step = compute / n + comm
        xs.append(float(n))
        speedups.append(compute / step)
        ideal.append(float(n))
        n *= 2
    best = xs[max(range(len(xs)), key=lambda i: speedups[i])]
    return Curve(
        title=f"DDP speed-up on {params.gpu}",
        x_label="GPUs",
        y_label="speed-up over one GPU",
        x=xs,
        lines={"predicted": speedups, "ideal": ideal},
        marks={"fastest": best},
        y_unit="ratio",
        log_x=True,
        x_unit="count",
        es={
            f"DDP speed-up on {params.gpu}": f"Aceleración de DDP en {params.gpu}",
            "GPUs": "GPU",
            "speed-up over one GPU": "aceleración sobre una GPU",
            "predicted": "predicha",
            "ideal": "ideal",
            "fastest": "la más rápida",
        },
    )


def time_vs_cost(params: WhyParams) -> Curve | None:
    """Every plan kept (one per DP × TP × PP shape): its cost against its training days,
    cheapest first at each number of days; the recommended one marked."""
    plans = planning(params)
    if plans.recommended is None:
        return None
    ordered = sorted(plans.by_time, key=lambda p: (p.train_days, p.cost_usd))
    return Curve(
        title=f"Plans on {params.gpu}: cost against training time",
        x_label="training days",
        y_label="cost ($)",
        x=[p.train_days for p in ordered],
        lines={"cost": [p.cost_usd for p in ordered]},
        marks={f"recommended: {plans.recommended.name}": plans.recommended.train_days},
        y_unit="number",
        log_x=True,
        x_unit="number",  # days, not seconds
        es={
            f"Plans on {params.gpu}: cost against training time": f"Planes en {params.gpu}: "
            "coste frente a tiempo de entrenamiento",
            "training days": "días de entrenamiento",
            "cost ($)": "coste ($)",
            "cost": "coste",
            f"recommended: {plans.recommended.name}": f"recomendado: {plans.recommended.name}",
        },
    )
