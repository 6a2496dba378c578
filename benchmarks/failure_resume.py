"""Benchmark of lesson 3: what a failure costs on real ranks, and Young vs Daly vs Monte-Carlo.

First table: for each fault kind of the lesson's "Done means" (4 ranks, 30 steps,
a checkpoint every 5), runs `failure-resume` for real several times and prints
the restarts, the lost steps, the detection delay (failure to the launcher
seeing it) and the restart time (detection to the first resumed step), as
medians, and whether every run ended bitwise equal to the uninterrupted one.
Also a 4 -> 2 ranks resume, DDP and ZeRO-1.

Second table: for a range of MTBF and checkpoint costs, Young's and Daly's
intervals beside the optimum of the Monte-Carlo (scenarios.failure_resume
.interval), and how long `predict failure-resume` takes.

Both read the lesson's typed metrics (scenarios.metrics.Metric) by name.

    python benchmarks/failure_resume.py [--runs 3]

Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground import session  # noqa: E402
from runtime.sim.units import format_seconds  # noqa: E402
from scenarios.failure_resume import interval  # noqa: E402
from scenarios.metrics import Metric  # noqa: E402

BASE = {"ranks": "4", "steps": "30", "checkpoint_every": "5"}
CASES: list[tuple[str, dict[str, str], list[str]]] = [
    ("kill at step 12", {}, ["kill:rank=1,step=12"]),
    ("kill during checkpoint", {}, ["kill:rank=1,during=checkpoint"]),
    ("kill + corrupt newest", {}, ["kill:rank=1,step=12", "corrupt:checkpoint=latest"]),
    ("hang at step 12", {}, ["hang:rank=1,step=12"]),
    ("4 -> 2 ranks, ddp", {"resume_ranks": "2"}, ["kill:rank=3,step=12"]),
    ("4 -> 2 ranks, zero1", {"resume_ranks": "2", "sharding": "zero1"}, ["kill:rank=3,step=12"]),
]
INTERVALS = [
    ("30min", "10s"),
    ("1h", "60s"),
    ("3h", "60s"),
    ("3h", "300s"),
    ("24h", "60s"),
    ("24h", "600s"),
]


def values(metrics: list[Metric]) -> dict[str, object]:
    """name -> value of one run's typed metrics (each name is used once by the lesson)."""
    return {metric.name: metric.value for metric in metrics}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"failure-resume, median of {args.runs} runs on this machine")
    header = (
        f"{'case':<24} {'restarts':>8} {'lost':>5} {'detection':>10} {'restart':>9}"
        f" {'resumed from':>12} {'bitwise':>8}"
    )
    print(header)
    print("-" * len(header))
    for name, extra, faults in CASES:
        runs = [
            values(session.run("failure-resume", {**BASE, **extra}, faults=faults).metrics)
            for _ in range(args.runs)
        ]
        med = lambda key, runs=runs: statistics.median(r[key] for r in runs)  # noqa: E731
        print(
            f"{name:<24} {med('restarts'):>8} {med('lost_steps'):>5}"
            f" {format_seconds(med('detection_s')):>10} {format_seconds(med('restart_s')):>9}"
            f" {str(runs[0]['resumed_from_steps']):>12}"
            f" {str(all(r['bitwise_equal_to_uninterrupted'] for r in runs)):>8}",
            flush=True,
        )
    print()
    header = f"{'mtbf':>6} {'C':>5} {'Young':>9} {'Daly':>9} {'simulated':>10} {'sim/Daly':>9} {'predict':>8}"
    print(header)
    print("-" * len(header))
    for mtbf, cost in INTERVALS:
        interval.study.cache_clear()  # a cold predict: the runs above cached the default study
        started = time.perf_counter()
        m = values(session.predict("failure-resume", {"mtbf": mtbf, "save_cost": cost}).metrics)
        took = time.perf_counter() - started
        print(
            f"{mtbf:>6} {cost:>5} {m['young_interval_s']:>8.1f}s {m['daly_interval_s']:>8.1f}s"
            f" {m['simulated_optimal_interval_s']:>9.1f}s {m['simulated_vs_daly']:>9.4f}"
            f" {format_seconds(took):>8}",
            flush=True,
        )


if __name__ == "__main__":
    main()
