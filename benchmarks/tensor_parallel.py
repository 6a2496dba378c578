"""Lesson 4 in numbers: TP stays inside a node (predicted), and the step on this machine.

    python benchmarks/tensor_parallel.py [--runs 3] [--no-runs]

1. Predicted, no ranks: one layer of a GPT-3-like shape (h = 8192, 64 heads, s = 2048,
   b = 1) on the `h100-nvlink` and `a100-nvlink` profiles (8 GPUs a node), tp from 2
   to 64: the TP communication and compute per layer (forward and backward) and their
   ratio. Past 8 every collective crosses the inter-node link and the ratio jumps.
2. Measured (unless --no-runs): the lesson's default MiniGPT on 2 and 4 gloo ranks,
   with and without SP, both implementations: median step time over the runs and the
   median error of the after-run prediction.

Timings are only ever printed here, never asserted in tests.
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

SHAPE = {"hidden": "8192", "heads": "64", "seq": "2048", "vocab": "1024", "layers": "1"}


def node_rule() -> None:
    print("predicted per layer (forward + backward), h=8192, a=64, s=2048, b=1")
    header = f"{'profile':<12} {'tp':>3} {'comm':>9} {'compute':>9} {'comm/compute':>13}"
    print(header)
    print("-" * len(header))
    for profile in ("h100-nvlink", "a100-nvlink"):
        for tp in (2, 4, 8, 16, 32, 64):
            raw = {**SHAPE, "tp": str(tp), "microbatch_size": "1", "implementation": "hand"}
            outcome = session.predict("tensor-parallel", raw, hardware=profile)
            comm = find(outcome.metrics, "tp_comm_per_layer_s", "hand").predicted
            compute = find(outcome.metrics, "tp_compute_per_layer_s", "hand").predicted
            ratio = find(outcome.metrics, "tp_comm_to_compute", "hand").predicted
            print(
                f"{profile:<12} {tp:>3} {format_seconds(comm):>9} "
                f"{format_seconds(compute):>9} {ratio:>12.2f}×"
            )


def measured(runs: int) -> None:
    print(f"\nmeasured on this machine, median of {runs} runs (gloo, fp32)")
    header = f"{'ranks':>5} {'sp':>3} {'series':<6} {'step':>9} {'after-run error':>16}"
    print(header)
    print("-" * len(header))
    for ranks in (2, 4):
        for sp in ("off", "on"):
            outcomes = [
                session.run("tensor-parallel", {"tp": str(ranks), "sp": sp}) for _ in range(runs)
            ]
            for series in ("hand", "torch"):
                steps = [find(o.metrics, "step_measured_s", series) for o in outcomes]
                times = [m.value for m in steps if m is not None and m.value]
                errors = [m.error for m in steps if m is not None and m.error is not None]
                print(
                    f"{ranks:>5} {sp:>3} {series:<6} {format_seconds(statistics.median(times)):>9} "
                    f"{statistics.median(errors):>15.1%}",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-runs", action="store_true")
    args = parser.parse_args()
    node_rule()
    if not args.no_runs:
        measured(args.runs)


if __name__ == "__main__":
    main()
