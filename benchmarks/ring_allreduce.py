"""Benchmark of lesson 1: the hand-made ring against torch's all_reduce, and the prediction.

For 2 and 4 ranks and buffers from 64 KiB to 16 MiB, runs `ring-allreduce`
for real several times and prints, as medians over the runs:
- the hand ring's busbw and torch's built-in all_reduce busbw, measured side by
  side in the same run, and their ratio;
- the prediction error |pred - meas| / meas of the calibrated cost model;
- the tracing overhead: the ring's time with live span streaming over the time
  with spans kept in the rank until the end (ratio, same configuration).

    python benchmarks/ring_allreduce.py [--runs 5] [--ranks 2 4] [--sizes 64KiB 4MiB]

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
from scenarios.metrics import find  # noqa: E402

SIZES = ["64KiB", "256KiB", "1MiB", "4MiB", "16MiB"]


def measure(ranks: int, size: str, runs: int, repeat: int) -> dict[str, float]:
    traced, untraced = [], []
    for _ in range(runs):
        # Interleave traced and untraced runs so drifts in machine load hit both alike.
        for stream, sink in ((True, traced), (False, untraced)):
            outcome = session.run(
                "ring-allreduce",
                {"ranks": str(ranks), "size": size, "repeat": str(repeat)},
                stream=stream,
            )
            sink.append(outcome.metrics)

    def med(rows: list, name: str, field: str = "value") -> float:
        return statistics.median(getattr(find(metrics, name), field) for metrics in rows)

    return {
        "busbw": med(traced, "busbw_gbps"),
        "builtin": med(traced, "builtin_busbw_gbps"),
        "ratio": med(traced, "busbw_vs_builtin"),
        "error": med(traced, "time_s", "error"),
        "measured": med(traced, "time_s"),
        "overhead": med(traced, "time_s") / med(untraced, "time_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10, help="timed iterations inside each run")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--sizes", nargs="+", default=SIZES)
    args = parser.parse_args()
    print(f"ring-allreduce, median of {args.runs} runs ({args.repeat} timed iterations each)")
    header = f"{'ranks':>5} {'size':>7} {'ring busbw':>11} {'builtin':>9} {'ratio':>6} {'pred err':>8} {'measured':>9} {'tracing':>8}"
    print(header)
    print("-" * len(header))
    for ranks in args.ranks:
        for size in args.sizes:
            r = measure(ranks, size, args.runs, args.repeat)
            print(
                f"{ranks:>5} {size:>7} {r['busbw']:>7.3f} GB/s {r['builtin']:>5.3f} GB/s {r['ratio']:>5.2f}x"
                f" {r['error']:>7.1%} {format_seconds(r['measured']):>9} {r['overhead']:>7.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
