"""Benchmark of lesson 7: measured TTFT and TPOT against the calibrated prediction, and
the routers and batching modes side by side.

Runs `inference` for real (two ranks for tp and pp, four for replicas) a few times and
prints, as medians over the runs: the measured and predicted (after the run's own
calibration: the prefill and decode scales, the rings, p2p) TTFT and TPOT p50 and their
errors, the throughput and whether every answer equals torch's own greedy decode. Then
the same trace with shared prefixes under each router, and continuous against static
batching: measured TTFT p50, throughput and prefix hits.

    python benchmarks/inference.py [--runs 3]

Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground import session  # noqa: E402
from runtime.engine.launch import RunFailed  # noqa: E402
from runtime.sim.units import format_seconds  # noqa: E402
from scenarios.metrics import Metric, find  # noqa: E402

MODES = [("tp", "2"), ("pp", "2"), ("replicas", "4")]
RATE = "2"  # requests per second: well below what two ranks sharing two cores serve
SHARED = {
    "mode": "replicas",
    "ranks": "4",
    "prefixes": "8",
    "prefix_len": "40",
    "prompt_len": "4",
    "output_len": "6",
    "kv_blocks": "24",
    "requests": "64",
    "rate": "50",
    "layers": "4",
    "hidden": "128",
}


def runs(raw: dict[str, str], count: int) -> list[list[Metric]]:
    out = []
    for _ in range(count):
        try:
            out.append(session.run("inference", raw, stream=False).metrics)
        except RunFailed as exc:  # a rank starved past the heartbeat on a busy machine
            print(f"  (a run failed and is run again: {exc})", file=sys.stderr)
            out.append(session.run("inference", raw, stream=False).metrics)
    return out


def median(rows: list[list[Metric]], name: str, series: str, predicted: bool = False) -> float:
    values = []
    for metrics in rows:
        metric = find(metrics, name, series)
        value = metric.predicted if predicted else metric.value
        if isinstance(value, int | float):
            values.append(float(value))
    return statistics.median(values) if values else float("nan")


def error(measured: float, predicted: float) -> str:
    return f"{abs(predicted - measured) / measured:6.1%}" if measured else "     —"


def accuracy(count: int) -> None:
    print(f"inference, measured vs predicted after calibration, median of {count} runs")
    header = (
        f"{'mode':<9} {'ranks':>5} {'TTFT meas':>10} {'pred':>9} {'err':>6} "
        f"{'TPOT meas':>10} {'pred':>9} {'err':>6} {'tokens/s':>9} {'equal':>6}"
    )
    print(header)
    print("-" * len(header))
    for mode, ranks in MODES:
        rows = runs({"mode": mode, "ranks": ranks, "rate": RATE}, count)
        ttft, ttft_p = median(rows, "ttft_p50_s", mode), median(rows, "ttft_p50_s", mode, True)
        tpot, tpot_p = median(rows, "tpot_p50_s", mode), median(rows, "tpot_p50_s", mode, True)
        equal = all(find(m, "tokens_equal_reference", mode).value for m in rows)
        print(
            f"{mode:<9} {ranks:>5} {format_seconds(ttft):>10} {format_seconds(ttft_p):>9} "
            f"{error(ttft, ttft_p)} {format_seconds(tpot):>10} {format_seconds(tpot_p):>9} "
            f"{error(tpot, tpot_p)} {median(rows, 'throughput_tokens_s', mode):9.1f} "
            f"{'yes' if equal else 'NO':>6}"
        )


def comparisons(count: int) -> None:
    print()
    print(f"the shared-prefix trace on 4 replicas, median of {count} runs")
    header = f"{'router / batching':<28} {'TTFT p50':>10} {'tokens/s':>9} {'prefix hits':>11}"
    print(header)
    print("-" * len(header))
    variants = [{"router": r} for r in ("round-robin", "least-outstanding", "prefix-affinity")]
    variants += [{"router": "round-robin", "batching": "static"}]
    for variant in variants:
        rows = runs({**SHARED, **variant}, count)
        label = " / ".join(variant.values())
        print(
            f"{label:<28} {format_seconds(median(rows, 'ttft_p50_s', 'replicas')):>10} "
            f"{median(rows, 'throughput_tokens_s', 'replicas'):9.1f} "
            f"{median(rows, 'prefix_hit_tokens', 'replicas'):11.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    accuracy(args.runs)
    comparisons(args.runs)


if __name__ == "__main__":
    main()
