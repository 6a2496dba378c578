"""The checkpoint-interval study as a figure: overhead against the interval τ.

Part of lesson 3 (scenarios.failure_resume): the lesson's `curves` hook turns an
IntervalStudy (scenarios.failure_resume.interval) into a Curve, which the app's
Curves tab and the HTML export draw generically, in English and Spanish.

Pure: the metric types and the interval study (numpy: the lesson imports this module
only when a curve is asked for).
"""

from __future__ import annotations

from scenarios.failure_resume.interval import IntervalStudy
from scenarios.metrics import Curve


def overhead_curve(study: IntervalStudy, typed: dict[str, str]) -> Curve:
    """The study as a figure: overhead versus τ (log axis), the Monte-Carlo and the
    exact expectation, with Young's, Daly's and the simulated optimum as lines.
    `typed`: the lesson's params as typed (`3h`), for the title."""
    given = f"(M = {typed['mtbf']}, C = {typed['save_cost']}, R = {typed['restart_cost']})"
    return Curve(
        title=f"How often to checkpoint: overhead vs interval {given}",
        x_label="checkpoint interval τ (s, compute between saves)",
        y_label="overhead of the useful work",
        x=list(study.intervals),
        lines={
            "Monte-Carlo (exponential failures)": list(study.overhead_simulated),
            "expected (exact, same model)": list(study.overhead_expected),
        },
        marks={
            "Young √(2CM)": study.young,
            "Daly": study.daly,
            **(
                {"simulated optimum": study.simulated_optimal_interval}
                if study.simulated_optimal_interval is not None
                else {}
            ),
        },
        y_unit="fraction",
        log_x=True,
        es={
            f"How often to checkpoint: overhead vs interval {given}": "Cada cuánto guardar: "
            f"sobrecoste frente a intervalo {given}",
            "checkpoint interval τ (s, compute between saves)": "intervalo de guardado τ (s, "
            "cómputo entre guardados)",
            "overhead of the useful work": "sobrecoste sobre el trabajo útil",
            "Monte-Carlo (exponential failures)": "Monte-Carlo (fallos exponenciales)",
            "expected (exact, same model)": "esperado (exacto, mismo modelo)",
            "simulated optimum": "óptimo simulado",
        },
    )
