"""Benchmark of lesson 1: the hand-made ring against torch's all_reduce, the prediction, and
what tracing costs.

For 2 and 4 ranks and buffers from 64 KiB to 16 MiB, runs `ring-allreduce` for real
several times and prints, as medians over the (streamed) runs:
- the hand ring's busbw and torch's built-in all_reduce busbw, measured side by
  side in the same run (every iteration runs both), and their ratio;
- the after-run prediction error |pred - meas| / meas of the hand ring's time;
- the tracing overhead, measured inside each streamed run so that the machine's other
  load cannot fake it: runtime.engine.worker's STREAM_BLOCKS_ENV hook makes the run's
  blocks of `--block` steps ship their records live and keep them back in turn (the
  real shipping path; shipments fall on the clock a streamed run ships on, and one due
  inside a kept block is skipped), so a streamed block and the kept block beside it
  lie milliseconds apart and a drift or burst of other load hits both alike. The
  first block (it holds the warm-up) and the first step of every block (the parent
  may still be taking in the previous block's records) are left out. Per pair of
  neighbouring blocks, streamed over kept: `tracing` the ratio of the blocks' median
  step times (the lesson reports a median), `tracing (means)` of their mean step
  times (every step's cost weighs, the one right after a shipment too); each the
  median over all pairs of all runs, with its 95% confidence interval;
- `null` and `null (means)`: the same blocks in as many runs that stream nothing (run
  in turn with the streamed ones), read like `tracing` and `tracing (means)`: what the
  method says where nothing differs, the size of its noise.

Then the lesson's own default run, the one a learner starts
(`playground run ring-allreduce --ranks 4 -p size=4MiB`: its 2 warm-up and 3 timed
iterations), `--lesson-runs` times: the median busbw ratio to the built-in and the
median after-run error, each with its range.

    python benchmarks/ring_allreduce.py [--runs 5] [--repeat 50] [--block 4] [--ranks 2 4]
        [--sizes 64KiB 4MiB] [--lesson-runs 5] [--write]

`--write` puts both tables into this script's section of docs/benchmarks.md
(benchmarks.doc_section). Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import timeit
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.doc_section import header, write_section  # noqa: E402
from playground import session  # noqa: E402
from runtime.engine.span_buffer import STREAM_BLOCKS_ENV  # noqa: E402
from runtime.sim.trace import Span, Timeline  # noqa: E402
from runtime.sim.units import format_seconds  # noqa: E402
from scenarios.metrics import Metric, find  # noqa: E402
from scenarios.ring_allreduce.lesson import iteration_times  # noqa: E402

SCRIPT = "ring_allreduce.py"
WHAT = "the hand ring beside gloo's all_reduce, the prediction, the cost of tracing"
SIZES = ["64KiB", "256KiB", "1MiB", "4MiB", "16MiB"]
LESSON_DEFAULT = {"ranks": "4", "size": "4MiB"}  # `playground run ring-allreduce --ranks 4 …`


def run(raw: dict[str, str], stream: bool) -> list[Metric]:
    return session.run("ring-allreduce", raw, stream=stream).metrics


def step_times(timeline: Timeline, series: str) -> dict[int, float]:
    """Each timed iteration's time (by its step), as the lesson times it (iteration_times)."""
    by_step: dict[int, list[Span]] = {}
    for span in timeline.spans:
        if span.series == series and span.step is not None:
            by_step.setdefault(span.step, []).append(span)
    return {k: iteration_times(Timeline(spans=v), series)[0] for k, v in sorted(by_step.items())}


def blocks_of(times: dict[int, float], block: int) -> list[tuple[bool, list[float]]]:
    """The run's timed iterations in its blocks of `block` steps, in order: whether the
    block streamed (runtime.engine.worker: blocks 0, 2, 4, ... do), and its iterations'
    times, the block's first step left out (the parent may still be taking in what the
    block before shipped). The first block, which holds the warm-up, and blocks left
    with fewer than two iterations are dropped."""
    out = []
    for b in range(1, max(times) // block + 1):
        steps = range(b * block + 1, (b + 1) * block)
        kept = [times[s] for s in steps if s in times]
        if len(kept) >= 2:
            out.append((b % 2 == 0, kept))
    return out


def pair_ratios(blocks: list[tuple[bool, list[float]]], stat) -> list[float]:
    """Each streamed block over each kept block beside it (before and after): a pair a
    few milliseconds apart, so a drift or burst of other load hits both alike."""
    ratios = []
    for (s1, t1), (s2, t2) in pairwise(blocks):
        if s1 != s2:
            streamed, kept = (t1, t2) if s1 else (t2, t1)
            ratios.append(stat(streamed) / stat(kept))
    return ratios


def median_ci(values: list[float]) -> str:
    """The median and its 95% confidence interval, `1.01x (0.99–1.03)`: distribution-free,
    the order statistics n/2 ∓ 0.98·√n (the binomial count below the median, normal)."""
    v, n = sorted(values), len(values)
    lo = max(math.floor(n / 2 - 0.98 * math.sqrt(n)) - 1, 0)
    hi = min(math.ceil(1 + n / 2 + 0.98 * math.sqrt(n)) - 1, n - 1)
    return f"{statistics.median(v):.3f}x ({v[lo]:.3f}–{v[hi]:.3f})"


def quartiles(values: list[float]) -> str:
    """The lower and upper quartile of single pairs' ratios: how far one pair strays."""
    lo, _, hi = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"{lo:.2f}–{hi:.2f}"


def value(metrics: list[Metric], name: str, field: str = "value") -> float:
    return getattr(find(metrics, name), field)


def spread(values: list[float], form: str) -> str:
    """The median, then the lowest and highest value: `1.01x (0.97–1.04)`."""
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"{mid:{form}} ({lo:{form}}–{hi:{form}})"


def measure(ranks: int, size: str, runs: int, repeat: int, block: int) -> dict[str, str]:
    """`runs` streamed runs whose blocks of `block` steps ship their records and keep them
    back in turn (STREAM_BLOCKS_ENV), each paired with a run that streams nothing, cut
    into the same blocks: the null, what the method reads where nothing differs."""
    raw = {"ranks": str(ranks), "size": size, "repeat": str(repeat)}
    traced, medians, means, null, null_means = [], [], [], [], []
    os.environ[STREAM_BLOCKS_ENV] = str(block)  # the ranks take the launcher's environment
    try:
        for n in range(runs):
            for stream in (True, False) if n % 2 == 0 else (False, True):
                outcome = session.run("ring-allreduce", raw, stream=stream)
                blocks = blocks_of(step_times(outcome.measured, "ring"), block)
                if stream:
                    traced.append(outcome.metrics)
                    medians += pair_ratios(blocks, statistics.median)
                    means += pair_ratios(blocks, statistics.fmean)
                else:
                    null += pair_ratios(blocks, statistics.median)
                    null_means += pair_ratios(blocks, statistics.fmean)
    finally:
        del os.environ[STREAM_BLOCKS_ENV]

    def med(name: str, field: str = "value") -> float:
        return statistics.median(value(m, name, field) for m in traced)

    return {
        "ring": f"{med('busbw_gbps'):.3f} GB/s",
        "builtin": f"{med('builtin_busbw_gbps'):.3f} GB/s",
        "ratio": f"{med('busbw_vs_builtin'):.2f}x",
        "error": f"{med('time_s', 'error'):.1%}",
        "measured": format_seconds(med("time_s")),
        "tracing": median_ci(medians),
        "null": median_ci(null),
        "tracing_means": median_ci(means),
        "null_means": median_ci(null_means),
        "pairs": f"{len(medians)} ({quartiles(medians)})",
    }


def record_cost() -> tuple[float, float, float]:
    """Seconds per Span, in this process: recording one into a rank's buffer (the timed
    path: runtime.engine.span_buffer.SpanBuffer.add); packing it, what a rank does when
    it ships, between steps (SpanBuffer.pack); and building its Span dict, done by the
    parent once the run is over or for a listener of live records (a torchrun rank
    still builds them itself). The fastest of several rounds over the default Program's
    Actions."""
    from runtime.engine.span_buffer import SpanBuffer
    from runtime.sim.simulate import span_for
    from scenarios.ring_allreduce.params import RingParams
    from scenarios.ring_allreduce.program import build

    actions = build(RingParams(repeat=50)).ranks[0]
    buffer = SpanBuffer(len(actions), actions)

    def record() -> None:
        add = SpanBuffer(len(actions)).add
        for action in actions:
            add(action, 1, 2)

    def pack() -> None:
        for action in actions:
            buffer.add(action, 1, 2)
        buffer.pack()

    def build_dicts() -> None:
        for action in actions:
            span_for(action, 1e-9, 2e-9).to_dict()

    rounds = 200
    per = rounds * len(actions)
    recorded = min(timeit.repeat(record, number=rounds, repeat=5)) / per
    packed = min(timeit.repeat(pack, number=rounds, repeat=5)) / per - recorded
    built = min(timeit.repeat(build_dicts, number=rounds, repeat=5)) / per
    return recorded, packed, built


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
    parser.add_argument(
        "--repeat", type=int, default=50, help="timed iterations inside each run (at most 50)"
    )
    parser.add_argument(
        "--block", type=int, default=4, help="steps per block, streamed and kept in turn"
    )
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--sizes", nargs="+", default=SIZES)
    parser.add_argument("--lesson-runs", type=int, default=5)
    parser.add_argument(
        "--write", action="store_true", help="write the tables into docs/benchmarks.md"
    )
    args = parser.parse_args()
    if not 1 <= args.repeat <= 50:
        parser.error("--repeat: from 1 to 50 timed iterations (the lesson's own bounds)")
    if args.block < 2 or 3 * args.block > args.repeat + 2:  # 2: the lesson's warm-up steps
        parser.error("--block: at least 2 steps, and three blocks must fit in the run's steps")
    load = os.getloadavg()[0]  # before this script adds its own
    invoked = (
        f"python benchmarks/{SCRIPT} --runs {args.runs} --repeat {args.repeat} "
        f"--block {args.block} "
        f"--ranks {' '.join(map(str, args.ranks))} --sizes {' '.join(args.sizes)} "
        f"--lesson-runs {args.lesson_runs}"
    )
    table = [
        *header(SCRIPT, WHAT, invoked),
        f"Load average when it started: {load:.1f} on {os.cpu_count()} cores "
        "(other processes' load only ever adds time, unevenly).",
        "",
        f"Per row, {args.runs} streamed runs of {args.repeat} timed iterations (after the",
        "lesson's 2 warm-up ones) and as many runs that stream nothing, in turn. busbw,",
        "ratio, pred err and measured: medians over the streamed runs, as the lesson",
        "computes them. tracing: within each streamed run, blocks of",
        f"{args.block} steps ship their records live and keep them back in turn",
        f"({STREAM_BLOCKS_ENV}; the shipments fall on the clock a streamed run ships on,",
        "one due inside a kept block is skipped), so a streamed block and the kept one",
        "beside it are milliseconds apart and the machine's other load hits both alike.",
        "The first block (the warm-up) and the first step of every block (the parent may",
        "still be taking in the last block's records) are left out. Per pair of",
        "neighbouring blocks, streamed over kept: `tracing` the ratio of the blocks'",
        "median step times (the lesson reports a median), `tracing (means)` of their mean",
        "step times (every step's cost weighs); each the median over all pairs, in",
        "brackets its 95% confidence interval. `null` and `null (means)`: the same read",
        "in the runs that stream nothing, cut into the same blocks: what the method says",
        "where nothing differs, the size of its noise. `pairs`: how many (per column), and",
        "the quartiles of one pair's `tracing` ratio.",
        "",
        "| ranks | size | ring busbw | builtin busbw | ratio | pred err | measured "
        "| tracing | null | tracing (means) | null (means) | pairs |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(table), flush=True)
    for ranks in args.ranks:
        for size in args.sizes:
            r = measure(ranks, size, args.runs, args.repeat, args.block)
            row = (
                f"| {ranks} | {size} | {r['ring']} | {r['builtin']} | {r['ratio']} "
                f"| {r['error']} | {r['measured']} | {r['tracing']} | {r['null']} "
                f"| {r['tracing_means']} | {r['null_means']} | {r['pairs']} |"
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
    recorded, packed, built = record_cost()
    cost = [
        "",
        f"Per Span: recording it on the timed path {format_seconds(recorded)} (a slot of "
        f"the rank's buffer); packing it when the rank ships, between steps, "
        f"{format_seconds(packed)}; building its dict, done by the parent once the run is "
        f"over (or at once for a live view) {format_seconds(built)}.",
    ]
    table += cost
    print("\n".join(cost), flush=True)
    if args.write:
        write_section(SCRIPT, table)


if __name__ == "__main__":
    main()
