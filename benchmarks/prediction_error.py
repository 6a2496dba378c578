"""How far the prediction is from the run, per lesson: before any run and after one.

    python benchmarks/prediction_error.py [--runs 5] [--lessons ring-allreduce zero ...]

For every lesson at its defaults (the pipeline with every schedule; zero also with
5 steps, "zero×5"), on this
machine's calibration (`playground calibrate` first, or the first run does it):

- before: `predict` alone (compute from the calibrated rates, runtime.sim.compute),
  against the median of the runs' measurements;
- after: each run's own prediction, refined with what its ranks measured, against
  that run's measurement; the median of the errors over the runs.

The quantity is each lesson's headline time (its Hooks.headline, the one a run's
`prediction_error` holds to the budget, playground.prediction_error): the
all-reduce's `time_s`, each ZeRO stage's and pipeline schedule's `makespan_s`,
failure-resume's median `step_s`, tensor-parallel's `step_measured_s` per
implementation, mixed-precision's and why-distribute's `step_s` per series, and
inference's median TTFT and TPOT (`ttft_p50_s`, `tpot_p50_s`).
Timings are only asserted here, never in tests; this machine's noise (other
processes, 4 ranks on 2 cores) is what the last two columns show: the range of the
runs' own after-run errors (`runs`) and of their measured times (`spread`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground import session  # noqa: E402
from playground.outcome import Outcome  # noqa: E402
from runtime.sim.units import format_seconds  # noqa: E402
from scenarios.registry import get_lesson  # noqa: E402

# label -> (lesson, params). zero's stages time 2 steps by default, and one
# stage of one run swings 20-30% on this machine's shared cores: "zero×5" is the same
# lesson with 5 steps, so the after-run error says what the model misses, not one step.
LESSONS: dict[str, tuple[str, dict[str, str]]] = {
    "ring-allreduce": ("ring-allreduce", {"ranks": "4"}),
    "zero": ("zero", {}),
    "zero×5": ("zero", {"steps": "5"}),
    "pipeline": ("pipeline", {"schedule": "gpipe,1f1b,interleaved,zb-h1"}),
    "failure-resume": ("failure-resume", {}),
    "tensor-parallel": ("tensor-parallel", {}),
    "mixed-precision": ("mixed-precision", {}),
    "why-distribute": ("why-distribute", {}),
    "inference": ("inference", {}),
}


def pairs(outcome: Outcome, name: str) -> dict[str | None, tuple[float, float]]:
    """(measured, predicted) of metric `name` per series."""
    return {
        m.series: (m.value, m.predicted)
        for m in outcome.metrics
        if m.name == name and isinstance(m.value, float) and isinstance(m.predicted, float)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lessons", nargs="+", default=list(LESSONS), choices=list(LESSONS))
    args = parser.parse_args()
    header = (
        f"{'lesson':<15} {'series':<16} {'measured':>9} {'before':>9} {'err':>6} "
        f"{'after err':>9} {'runs':>11} {'spread':>13}"
    )
    print(f"prediction error, median of {args.runs} runs")
    print(header)
    print("-" * len(header))
    for label in args.lessons:
        name, raw = LESSONS[label]
        headline = get_lesson(name).hooks.headline
        runs = [session.run(name, raw) for _ in range(args.runs)]  # the first may calibrate
        ahead = session.predict(name, raw).metrics
        for metric in headline:
            before = {m.series: m.predicted for m in ahead if m.name == metric and m.predicted}
            per_series: dict[str | None, list[tuple[float, float]]] = {}
            for outcome in runs:
                for series, pair in pairs(outcome, metric).items():
                    per_series.setdefault(series, []).append(pair)
            for series, values in per_series.items():
                measured = [m for m, _ in values]
                median = statistics.median(measured)
                errors = [abs(p - m) / m for m, p in values]
                after = statistics.median(errors)
                said = before.get(series)
                error = abs(said - median) / median if said else float("nan")
                spread = f"{format_seconds(min(measured))}–{format_seconds(max(measured))}"
                runs_said = f"{min(errors):.0%}–{max(errors):.0%}"
                what = " ".join(filter(None, (series, metric if len(headline) > 1 else None)))
                print(
                    f"{label:<15} {what or '—':<16} {format_seconds(median):>9} "
                    f"{format_seconds(said) if said else '—':>9} {error:>6.1%} {after:>9.1%} "
                    f"{runs_said:>11} {spread:>13}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
