"""The textbook pipeline formulas this lesson quotes beside its simulation.

docs/references.md, "Pipeline schedules": the makespan of GPipe, 1F1B, interleaved
1F1B and ZB-H1 with per-stage costs F, B (and W) and free communication, and the
bubble that follows from it. The lesson's metrics give `bubble_fraction_formula`
(scenarios.pipeline.report); its tests check these values exactly.

Pure: stdlib only.
"""

from __future__ import annotations


def pipeline_makespan(
    schedule: str, p: int, m: int, v: int = 1, f: float = 1.0, b: float = 2.0, w: float = 0.0
) -> float:
    """Textbook makespan with per-full-stage costs F, B (= input + weight grad) and,
    for zb-h1, the weight-grad part W of B. Communication is free."""
    if schedule in ("gpipe", "1f1b"):
        return (m + p - 1) * (f + b)
    if schedule == "interleaved":
        return m * (f + b) + (p - 1) * (f + b) / v
    if schedule == "zb-h1":
        bi = b - w
        return m * (f + b) + (p - 1) * (f + bi - w)
    raise KeyError(schedule)


def pipeline_bubble_fraction(
    schedule: str, p: int, m: int, v: int = 1, f: float = 1.0, b: float = 2.0, w: float = 0.0
) -> float:
    """Idle share of the makespan on each rank: 1 - m(F + B) / makespan.

    GPipe and 1F1B: (p - 1)/(m + p - 1); interleaved: the bubble (p - 1)(F + B)
    shrinks v times; zb-h1 with F = Bi = W: (p - 1)/(3m + p - 1)."""
    makespan = pipeline_makespan(schedule, p, m, v, f, b, w)
    return 1.0 - m * (f + b) / makespan
