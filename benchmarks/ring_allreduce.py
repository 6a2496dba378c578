"""Benchmark of lesson 1: the hand-made ring against torch's all_reduce, the prediction, and
what tracing costs.

For 2 and 4 ranks and buffers from 64 KiB to 16 MiB, runs `ring-allreduce` for real
several times and prints, as medians over the runs:
- the hand ring's busbw and torch's built-in all_reduce busbw, measured side by
  side in the same run (every iteration runs both), and their ratio;
- the after-run prediction error |pred - meas| / meas of the hand ring's time;
- the tracing overhead: the hand ring's step time with spans streamed live to the
  parent over its step time with every span kept in the rank until the end. Each
  streamed run is paired with an unstreamed one started right before or after it (in
  turn), so a drift in the machine's load hits both. Two estimates, each the median
  of the pairs' ratios: `tracing` compares the fastest quarter of each side's steps
  (the lower quartile of its timed iterations), which the load of other processes,
  always an addition, disturbs least; `tracing (median)` the medians, as the lesson
  reports its time. Each is followed by the lowest and highest ratio of one pair.

Then the lesson's own default run, the one a learner starts
(`playground run ring-allreduce --ranks 4 -p size=4MiB`: its 2 warm-up and 3 timed
iterations), `--lesson-runs` times: the median busbw ratio to the built-in and the
median after-run error, each with its range.

    python benchmarks/ring_allreduce.py [--runs 5] [--ranks 2 4] [--sizes 64KiB 4MiB]
        [--lesson-runs 5] [--write]

`--write` puts both tables into this script's section of docs/benchmarks.md
(benchmarks.doc_section). Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.doc_section import header, write_section  # noqa: E402
from playground import session  # noqa: E402
from runtime.sim.units import format_seconds  # noqa: E402
from scenarios.metrics import Metric, find  # noqa: E402
from scenarios.ring_allreduce.lesson import iteration_times  # noqa: E402

SCRIPT = "ring_allreduce.py"
WHAT = "the hand ring beside gloo's all_reduce, the prediction, the cost of tracing"
SIZES = ["64KiB", "256KiB", "1MiB", "4MiB", "16MiB"]
LESSON_DEFAULT = {"ranks": "4", "size": "4MiB"}  # `playground run ring-allreduce --ranks 4 …`


def run(raw: dict[str, str], stream: bool) -> list[Metric]:
    return session.run("ring-allreduce", raw, stream=stream).metrics


def steps(raw: dict[str, str], stream: bool) -> tuple[list[Metric], list[float]]:
    """A run's metrics and the hand ring's time in each timed iteration."""
    outcome = session.run("ring-allreduce", raw, stream=stream)
    return outcome.metrics, iteration_times(outcome.measured, "ring")


def quartile(values: list[float]) -> float:
    return statistics.quantiles(values, n=4)[0] if len(values) > 1 else values[0]


def value(metrics: list[Metric], name: str, field: str = "value") -> float:
    return getattr(find(metrics, name), field)


def spread(values: list[float], form: str) -> str:
    """The median, then the lowest and highest value: `1.01x (0.97–1.04)`."""
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"{mid:{form}} ({lo:{form}}–{hi:{form}})"


def measure(ranks: int, size: str, runs: int, repeat: int) -> dict[str, str]:
    raw = {"ranks": str(ranks), "size": size, "repeat": str(repeat)}
    traced, live_steps, kept_steps, fast, mid = [], [], [], [], []
    for n in range(runs):
        # A pair, one right after the other, in turn streamed first and kept first: a
        # run that pays for coming first (or second) does so on both sides alike.
        if n % 2 == 0:
            (live, live_t), (_, kept_t) = steps(raw, stream=True), steps(raw, stream=False)
        else:
            (_, kept_t), (live, live_t) = steps(raw, stream=False), steps(raw, stream=True)
        traced.append(live)
        live_steps += live_t
        kept_steps += kept_t
        fast.append(quartile(live_t) / quartile(kept_t))
        mid.append(statistics.median(live_t) / statistics.median(kept_t))
    # The pairs' ratios, their median: a run slowed as a whole by the machine's other
    # load weighs one pair, where pooling its steps would shift the whole distribution.
    pooled_fast, pooled_mid = statistics.median(fast), statistics.median(mid)

    def med(name: str, field: str = "value") -> float:
        return statistics.median(value(m, name, field) for m in traced)

    return {
        "ring": f"{med('busbw_gbps'):.3f} GB/s",
        "builtin": f"{med('builtin_busbw_gbps'):.3f} GB/s",
        "ratio": f"{med('busbw_vs_builtin'):.2f}x",
        "error": f"{med('time_s', 'error'):.1%}",
        "measured": format_seconds(med("time_s")),
        "tracing": f"{pooled_fast:.2f}x ({min(fast):.2f}–{max(fast):.2f})",
        "tracing_median": f"{pooled_mid:.2f}x ({min(mid):.2f}–{max(mid):.2f})",
    }


def record_cost() -> tuple[float, float]:
    """Seconds per Span, in this process: recording one into a rank's buffer (the timed
    path: runtime.engine.span_buffer.SpanBuffer.add), and building its dict (what shipping does
    later, between steps). The fastest of several rounds over the default Program's Actions."""
    from runtime.engine.span_buffer import SpanBuffer
    from runtime.sim.simulate import span_for
    from scenarios.ring_allreduce.params import RingParams
    from scenarios.ring_allreduce.program import build

    actions = build(RingParams(repeat=50)).ranks[0]

    def record() -> None:
        add = SpanBuffer(len(actions)).add
        for action in actions:
            add(action, 1, 2)

    def build_dicts() -> None:
        for action in actions:
            span_for(action, 1e-9, 2e-9).to_dict()

    rounds = 200
    per = rounds * len(actions)
    return (
        min(timeit.repeat(record, number=rounds, repeat=5)) / per,
        min(timeit.repeat(build_dicts, number=rounds, repeat=5)) / per,
    )


def lesson_default(runs: int) -> dict[str, str]:
    """The lesson's default run, `runs` times: busbw ratio to the built-in, after-run error."""
    rows = [run(LESSON_DEFAULT, stream=True) for _ in range(runs)]
    ratios = [value(m, "busbw_vs_builtin") for m in rows]
    errors = [value(m, "time_s", "error") * 100 for m in rows]
    return {
        "ratio": spread(ratios, ".2f").replace(" (", "x (", 1),
        "error": spread(errors, ".1f").replace(" (", "% (", 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10, help="timed iterations inside each run")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--sizes", nargs="+", default=SIZES)
    parser.add_argument("--lesson-runs", type=int, default=5)
    parser.add_argument(
        "--write", action="store_true", help="write the tables into docs/benchmarks.md"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]  # before this script adds its own
    invoked = (
        f"python benchmarks/{SCRIPT} --runs {args.runs} --repeat {args.repeat} "
        f"--ranks {' '.join(map(str, args.ranks))} --sizes {' '.join(args.sizes)} "
        f"--lesson-runs {args.lesson_runs}"
    )
    table = [
        *header(SCRIPT, WHAT, invoked),
        f"Load average when it started: {load:.1f} on {os.cpu_count()} cores "
        "(other processes' load only ever adds time, unevenly).",
        "",
        f"Medians of {args.runs} runs of {args.repeat} timed iterations (after the lesson's",
        "2 warm-up ones). tracing: the hand ring's step time with spans streamed live over",
        "kept to the end, runs paired (streamed first and kept first in turn); the",
        "median of the pairs' ratios of lower quartiles (`tracing`) and of medians",
        "(`tracing (median)`); in brackets the lowest and highest pair.",
        "",
        "| ranks | size | ring busbw | builtin busbw | ratio | pred err | measured "
        "| tracing | tracing (median) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(table), flush=True)
    for ranks in args.ranks:
        for size in args.sizes:
            r = measure(ranks, size, args.runs, args.repeat)
            row = (
                f"| {ranks} | {size} | {r['ring']} | {r['builtin']} | {r['ratio']} "
                f"| {r['error']} | {r['measured']} | {r['tracing']} | {r['tracing_median']} |"
            )
            table.append(row)
            print(row, flush=True)
    if args.lesson_runs:
        d = lesson_default(args.lesson_runs)
        lesson = [
            "",
            f"The lesson's default run, `playground run ring-allreduce --ranks 4 -p size=4MiB`"
            f" (2 warm-up and 3 timed iterations), {args.lesson_runs} times: median (range).",
            "",
            "| busbw vs builtin | after-run error of time_s |",
            "|---:|---:|",
            f"| {d['ratio']} | {d['error']} |",
        ]
        table += lesson
        print("\n".join(lesson), flush=True)
    recorded, built = record_cost()
    cost = [
        "",
        f"Recording one Span on the timed path: {format_seconds(recorded)} (a slot of the "
        f"rank's buffer); building its dict, done when records ship between steps: "
        f"{format_seconds(built)}.",
    ]
    table += cost
    print("\n".join(cost), flush=True)
    if args.write:
        write_section(SCRIPT, table)


if __name__ == "__main__":
    main()
