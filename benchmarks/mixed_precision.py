"""Benchmark of lesson 6: after-run prediction error of the step time, and overlap, per bucket cap.

For each bucket cap, runs `mixed-precision` for real on 2 ranks several times
and prints, per series, the median measured step, the median after-run
predicted step (the prediction refined with the run's own costs), the median
relative error, and the measured and predicted `comm_overlap_fraction`; then
the median error over every series and run. Last, how long `predict` takes at
a large size (the bucket sweep included).

    python benchmarks/mixed_precision.py [--runs 3] [--caps 16KiB,64KiB,25MiB]

Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground import session  # noqa: E402

BIG = {"ranks": "1024", "layers": "48", "hidden": "4096", "heads": "32", "seq": "2048",
       "vocab": "50304", "steps": "1000"}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--caps", default="16KiB,64KiB,25MiB")
    args = parser.parse_args()
    errors: list[float] = []
    print(f"{'cap':>7} {'series':>11} {'measured':>9} {'predicted':>9} {'error':>6} "
          f"{'overlap':>7} {'pred.':>6}")  # fmt: skip
    for cap in args.caps.split(","):
        rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for _ in range(args.runs):
            out = session.run("mixed-precision", {"ranks": "2", "bucket_cap": cap})
            for m in out.metrics:
                if m.series is None:
                    continue
                if m.name == "step_s" and m.value and m.predicted:
                    rows[m.series]["measured"].append(m.value)
                    rows[m.series]["predicted"].append(m.predicted)
                    rows[m.series]["error"].append(abs(m.predicted - m.value) / m.value)
                if m.name == "comm_overlap_fraction":
                    rows[m.series]["overlap"].append(m.value or 0.0)
                    rows[m.series]["overlap_pred"].append(m.predicted or 0.0)
        for series, r in rows.items():
            med = {k: statistics.median(v) for k, v in r.items()}
            errors += r["error"]
            print(f"{cap:>7} {series:>11} {med['measured'] * 1e3:7.1f}ms {med['predicted'] * 1e3:7.1f}ms "
                  f"{med['error']:6.1%} {med['overlap']:7.1%} {med['overlap_pred']:6.1%}")  # fmt: skip
    print(f"median prediction error over every series and run: {statistics.median(errors):.1%}")
    start = time.perf_counter()
    session.predict("mixed-precision", BIG, hardware="h100-nvlink")
    print(f"predict at {BIG['ranks']} ranks, 48 layers: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
