"""Lesson 0's two curves: DDP's speed-up on the GPU profile, and the plans' cost against time.

Drawn beside the report's metrics (scenarios.why_distribute.lesson's `curves`),
from the same Problem and Planning (scenarios.why_distribute.report). Every label
in both languages (Curve.es).

Imports: runtime's pure part and the lesson's own modules (no torch).
"""

from __future__ import annotations

from runtime.sim.program import Action
from scenarios.metrics import Curve
from scenarios.why_distribute.params import WhyParams
from scenarios.why_distribute.report import diagnosis, planning, problem


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
