"""Benchmark of lesson 5: pipeline makespans measured on real ranks against the prediction.

For the configurations of the lesson's "Done means" (GPipe and 1F1B with p = 4,
m = 8; interleaved with p = 2, v = 2, m = 4; ZB-H1 with p = 4, m = 8), runs
`pipeline` for real several times and prints, as medians over the runs: the
measured and predicted makespan, the prediction error, the measured and
predicted bubble share, and the largest gradient difference to one process.

Four ranks share this machine's two cores, so the prediction has to model the
sharing of cores (runtime.sim.simulate); this table is where that is checked.

    python benchmarks/pipeline.py [--runs 5]

Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground import session  # noqa: E402
from runtime.sim.units import format_seconds  # noqa: E402
from scenarios.metrics import Metric, find, series_of  # noqa: E402

CONFIGS: list[dict[str, str]] = [
    {"schedule": "gpipe,1f1b", "stages": "4", "microbatches": "8"},
    {"schedule": "interleaved", "stages": "2", "chunks": "2", "microbatches": "4"},
    {"schedule": "zb-h1", "stages": "4", "microbatches": "8"},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"pipeline, median of {args.runs} runs on this machine")
    header = (
        f"{'schedule':<12} {'p':>2} {'m':>3} {'v':>2} {'measured':>9} {'predicted':>10}"
        f" {'error':>6} {'bubble meas':>11} {'bubble pred':>11} {'grad diff':>9}"
    )
    print(header)
    print("-" * len(header))
    for config in CONFIGS:
        rows: dict[str, list[list[Metric]]] = {}
        for _ in range(args.runs):
            metrics = session.run("pipeline", config, stream=True).metrics
            for name in series_of(metrics):
                rows.setdefault(name, []).append(metrics)
        for name, runs in rows.items():

            def med(metric: str, field: str = "value", runs=runs, name=name) -> float:
                return statistics.median(getattr(find(m, metric, name), field) for m in runs)

            makespan_error = statistics.median(find(m, "makespan_s", name).error for m in runs)
            grad_diff = max(find(m, "max_grad_diff_vs_reference", name).value for m in runs)
            v = config.get("chunks", "1") if name == "interleaved" else "1"
            print(
                f"{name:<12} {config['stages']:>2} {config['microbatches']:>3} {v:>2}"
                f" {format_seconds(med('makespan_s')):>9}"
                f" {format_seconds(med('makespan_s', 'predicted')):>10}"
                f" {makespan_error:>6.1%}"
                f" {med('bubble_fraction'):>11.1%} {med('bubble_fraction', 'predicted'):>11.1%}"
                f" {grad_diff:>9.1e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
