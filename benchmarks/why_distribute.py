"""Benchmark of lesson 0: the demonstration's DDP step measured beside predicted, and predict's time.

First table: `why-distribute` run for real on 2 and 4 ranks, `--runs` times each;
per DDP series (the hand-made one and torch's, on 1, 2, 4 ranks) the medians of
the measured and predicted step, their error, the measured and predicted
speed-up over one rank, and the hand-made step against torch's. On a machine
with fewer cores than ranks there is no speed-up to measure: the table says how
many cores the ranks shared.

Second table: how long `predict why-distribute` takes in this process (the
diagnosis, the planner with its simulations, the cost sentence) for the issue's
examples, presets, pinned layouts, context parallelism and the largest sizes its
params accept.

With `--published` (no ranks started): the published training runs the planner
reproduces (scenarios.why_distribute.published: Narayanan et al. 2021's Table 1 and
others), each with its command, the step its paper implies, the step predicted and
the error, plus MFU and HFU; `--write` puts that table in docs/benchmarks.md
(benchmarks.doc_section), which the lesson's page links to.

    python benchmarks/why_distribute.py [--runs 3] [--ranks 2 4]
    python benchmarks/why_distribute.py --published [--write]

Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.doc_section import header as section_header  # noqa: E402
from benchmarks.doc_section import write_section  # noqa: E402
from playground import session  # noqa: E402
from playground.usage import UsageError  # noqa: E402
from scenarios.metrics import Metric  # noqa: E402
from scenarios.registry import get_lesson  # noqa: E402
from scenarios.why_distribute import planner, report  # noqa: E402
from scenarios.why_distribute.published import RUNS, Run  # noqa: E402

PREDICTS = [
    {"params": "7B", "gpu": "a100-80gb", "precision": "fp32"},
    {"params": "400k", "gpu": "a100-80gb", "precision": "fp32"},
    {"params": "70B", "gpus": "64", "gpus_per_node": "8", "gpu": "h100-80gb"},
    {"params": "1T", "gpus": "65536"},
    {"params": "10T", "gpus": "65536", "gpus_per_node": "64", "top": "64"},
    {"params": "175B", "gpus": "65536", "global_batch": "16777216"},
    {"preset": "llama3-405b", "gpus": "16384", "gpu": "h100-80gb", "attention": "flash"},
    {
        "preset": "llama3-405b",
        "seq": "131072",
        "gpus": "16384",
        "gpu": "h100-80gb",
        "attention": "flash",
        "global_batch": "128",
    },  # fmt: skip
    {
        "preset": "megatron-1t",
        "gpus": "3072",
        "global_batch": "3072",
        "recompute": "full",
        "layout": "tp8,pp64,dp6",
    },  # fmt: skip
]


def of(metrics: list[Metric], name: str, series: str | None) -> Metric | None:
    return next((m for m in metrics if m.name == name and m.series == series), None)


def costed(run: Run) -> tuple[float, float, float, str]:
    """(step, MFU, HFU, note) of a run's pinned layout: through `predict`, or, when its
    params refuse the layout (the memory model says it does not fit), costed by the
    planner all the same and the refusal said beside it."""
    try:
        metrics = session.predict("why-distribute", run.params, hardware=run.hardware).metrics
    except UsageError as refused:  # the layout's ParamError, as the command line says it
        lesson = get_lesson("why-distribute")
        params = lesson.parse({**run.params, "layout": "auto"}, "predict")
        layout = replace(params, layout=run.params["layout"]).pinned
        assert layout is not None
        plan = planner.pinned(report.problem(params), layout).recommended
        assert plan is not None
        return plan.step_s, plan.mfu, plan.hfu, f" (refused: {str(refused).split('; ')[0]})"
    step = of(metrics, "step_s", "recommended")
    mfu, hfu = of(metrics, "mfu", "recommended"), of(metrics, "hfu", "recommended")
    assert step and mfu and hfu
    return step.predicted, mfu.predicted, hfu.predicted, ""


def published() -> list[str]:
    """The published runs' table, as Markdown lines."""
    lines = [
        "| run | published | step implied (s) | predicted (s) | error | within | MFU | HFU |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    commands, misses = [], []
    for i, run in enumerate(RUNS, 1):
        step, mfu, hfu, note = costed(run)
        error = step / run.step_s - 1
        held = f"±{run.within:.0%}" + (" ✓" if abs(error) <= run.within and not note else " ✗")
        lines.append(
            f"| {i}. {run.name} | {run.published} | {run.step_s:.2f} | {step:.2f}{note} "
            f"| {error:+.1%} | {held} | {mfu:.0%} | {hfu:.0%} |"
        )
        commands.append(f"{i}. `{run.command}` ({run.source})")
        if run.miss:
            misses.append(f"- {run.name}: {run.miss}.")
    return [*lines, "", "Commands:", "", *commands, "", "Not reached:", "", *misses]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--published", action="store_true", help="the published runs' table")
    parser.add_argument("--write", action="store_true", help="into docs/benchmarks.md")
    args = parser.parse_args()
    if args.published:
        table = published()
        print("\n".join(table))
        if args.write:
            what = "published training runs reproduced by the planner"
            command = "python benchmarks/why_distribute.py --published --write"
            intro = [
                "Each run pinned to its paper's shape, GPUs, global batch and layout; "
                "the step its paper's TFLOP/s imply under that paper's own FLOPs count "
                "(Narayanan's Eq. 3 is hardware FLOPs, HFU; Llama 3 reports MFU, PaLM's "
                "6N + 12·l·h·s). The efficiency model's one constant (GEMM_PEAK) is fit to "
                "Table 1, and an H100's matmuls are scaled from it by a published single-GPU "
                "measurement (Bekman's MAMF table); the other rows are predictions. MFU and "
                "HFU: the planner's own. A layout the memory model refuses is costed all the "
                "same and marked ✗, with the refusal.",
                "",
            ]
            write_section("why_distribute.py --published", [
                *section_header("why_distribute.py --published", what, command), *intro, *table
            ])  # fmt: skip
        return

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
