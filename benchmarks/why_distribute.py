"""Benchmark of lesson 0: the demonstration's DDP step measured beside predicted, and predict's time.

First table: `why-distribute` run for real on 2 and 4 ranks, `--runs` times each;
per DDP series (the hand-made one and torch's, on 1, 2, 4 ranks) the medians of
the measured and predicted step, their error, the measured and predicted
speed-up over one rank, and the hand-made step against torch's. On a machine
with fewer cores than ranks there is no speed-up to measure: the table says how
many cores the ranks shared.

Second table: how long `predict why-distribute` takes in this process (the
diagnosis, the planner with its simulations, the cost sentence) for the issue's
examples and the largest sizes its params accept.

    python benchmarks/why_distribute.py [--runs 3] [--ranks 2 4]

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
from scenarios.metrics import Metric  # noqa: E402
from scenarios.why_distribute import planner, report  # noqa: E402

PREDICTS = [
    {"params": "7B", "gpu": "a100-80gb", "precision": "fp32"},
    {"params": "400k", "gpu": "a100-80gb", "precision": "fp32"},
    {"params": "70B", "gpus": "64", "gpus_per_node": "8", "gpu": "h100-80gb"},
    {"params": "1T", "gpus": "65536"},
    {"params": "10T", "gpus": "65536", "gpus_per_node": "64", "top": "64"},
    {"params": "175B", "gpus": "65536", "global_batch": "16777216"},
]


def of(metrics: list[Metric], name: str, series: str | None) -> Metric | None:
    return next((m for m in metrics if m.name == name and m.series == series), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args()

    print("DDP step, medians of", args.runs, "runs (measured | predicted)")
    header = f"{'ranks':>5} {'series':<12} {'measured':>10} {'predicted':>10} {'error':>7}"
    print(header + f" {'speed-up':>9} {'predicted':>9} {'vs torch':>9} {'cores':>6}")
    for ranks in args.ranks:
        runs = [session.run("why-distribute", {"ranks": str(ranks)}) for _ in range(args.runs)]
        names = [m.series for m in runs[0].metrics if m.name == "step_s" and m.series]
        cores = of(runs[0].metrics, "cpu_cores", None)
        for name in names:
            if name == "recommended":
                continue
            steps = [of(r.metrics, "step_s", name) for r in runs]
            speed = [of(r.metrics, "ddp_speedup", name) for r in runs]
            versus = [of(r.metrics, "step_vs_torch", name) for r in runs]
            measured = statistics.median(m.value for m in steps if m and m.value)
            predicted = statistics.median(m.predicted for m in steps if m and m.predicted)
            up = statistics.median(m.value for m in speed if m and m.value)
            up_p = statistics.median(m.predicted for m in speed if m and m.predicted)
            torch_ratio = [m.value for m in versus if m and m.value]
            ratio = f"{statistics.median(torch_ratio):.2f}×" if torch_ratio else "—"
            error = abs(predicted - measured) / measured
            print(
                f"{ranks:>5} {name:<12} {measured * 1e3:>8.2f}ms {predicted * 1e3:>8.2f}ms "
                f"{error:>6.0%} {up:>8.2f}× {up_p:>8.2f}× {ratio:>9} "
                f"{cores.value if cores else '—':>6}"
            )

    print("\npredict why-distribute, in this process, caches cleared (median of 3)")
    for raw in PREDICTS:
        times = []
        for _ in range(3):
            for cached in (report._problem, report.diagnosis, report.planning, planner._program):
                cached.cache_clear()  # each time from scratch, as a new `predict` process
            started = time.perf_counter()
            session.predict("why-distribute", raw)
            times.append(time.perf_counter() - started)
        print(
            f"{statistics.median(times) * 1e3:>8.0f} ms  "
            + " ".join(f"{k}={v}" for k, v in raw.items())
        )


if __name__ == "__main__":
    main()
