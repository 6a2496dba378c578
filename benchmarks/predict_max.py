"""Benchmark of `predict` at every knob's predict maximum (issue 37, item 8).

For each lesson (the registry's order): `predict` with each knob alone at its predict
maximum (`Knob.upper("predict")`; a choice knob with each of its choices, a comma list
with all its choices), then with every numeric knob at its maximum together. Each
command runs as its own process, `--runs` times; the table shows the median wall
time, the median peak resident memory and the exit status (2 is a refusal: the
lesson's rules forbid that combination, an allowed outcome when it is quick).

    python benchmarks/predict_max.py [--runs 3] [--timeout 60] [--root DIR] [--vs DIR]
                                     [--only TEXT] [--hardware NAME] [--write]

`--root` runs the commands from another checkout (the tree before a change), with
this interpreter; `--vs` measures another checkout beside it, each command's runs
taken in turn with its own (so a busy machine slows both alike), in two more
columns; `--only` keeps the commands containing TEXT (a lesson's name);
`--hardware` predicts on that profile (repeatable; `local`, the default: this
machine's calibration);
`--write` puts the table into its own section of docs/benchmarks.md,
headed with the command, the date and the machine (benchmarks.doc_section; the other
sections are kept). The promise is < 1 s for each row; timings are only
ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.doc_section import header, write_section  # noqa: E402
from benchmarks.predict_scale import run_once  # noqa: E402
from scenarios.pipeline.params import MAX_PREDICT_SLOTS  # noqa: E402
from scenarios.registry import LESSONS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "predict_max.py"
WHAT = "`predict` at every knob's predict maximum"


def commands(hardware: str | None = None) -> Iterator[str]:
    """Every `predict` argument line the benchmark runs (on `hardware`, if named)."""
    on = f" --hardware {hardware}" if hardware else ""
    for name, lesson in LESSONS.items():
        together: list[str] = []
        for field_name, knob in lesson.params.knobs():
            values = knob.predict_extremes()
            for value in values:
                yield f"{name} -p {field_name}={value}{on}"
            if values and knob.kind not in ("choice", "choices"):
                together.append(f"-p {field_name}={values[0]}")
        if together:
            yield f"{name} {' '.join(together)}{on}"
    yield f"{at_the_cap()}{on}"


def at_the_cap() -> str:
    """The pipeline's heaviest prediction the cap allows, which no row above reaches (its
    knobs' maxima together are refused): interleaved at the most stages and microbatches,
    with as many chunks as MAX_PREDICT_SLOTS leaves, every model knob at its maximum."""
    lesson = LESSONS["pipeline"]
    top = {f: k.predict_extremes()[0] for f, k in lesson.params.knobs() if k.kind == "int"}
    per_chunk = 2 * int(top["stages"]) * int(top["microbatches"])  # an F and a B per slot
    top |= {"schedule": "interleaved", "chunks": str(MAX_PREDICT_SLOTS // per_chunk)}
    return "pipeline " + " ".join(f"-p {f}={v}" for f, v in top.items())


def measure(command: str, root: Path, runs: int, timeout: float) -> tuple[str, str, str]:
    """(wall, peak RSS, exits) of one command, as the table shows them."""
    return shown([run_once(command, root, timeout) for _ in range(runs)], timeout)


def measure_beside(
    command: str, root: Path, other: Path, runs: int, timeout: float
) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    """measure() of `root` and of `other`, their runs taken in turn."""
    mine, theirs = [], []
    for _ in range(runs):
        mine.append(run_once(command, root, timeout))
        theirs.append(run_once(command, other, timeout))
    return shown(mine, timeout), shown(theirs, timeout)


def shown(results: list[tuple[float, float, int | None]], timeout: float) -> tuple[str, str, str]:
    """(wall, peak RSS, exits) of a command's runs, as the table shows them: medians."""
    wall = statistics.median(r[0] for r in results)
    rss = statistics.median(r[1] for r in results)
    codes = {r[2] for r in results}
    wall_text = f"> {timeout:.0f} s" if None in codes else f"{wall:.2f} s"
    exits = "timeout" if None in codes else ",".join(str(c) for c in sorted(codes))
    return wall_text, f"{rss:.0f} MiB", exits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per command")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to run")
    parser.add_argument(
        "--write",
        action="store_true",
        help="write the table into its section of docs/benchmarks.md",
    )
    parser.add_argument("--only", default="", help="only the commands containing this text")
    parser.add_argument("--vs", type=Path, default=None, help="another checkout, beside it")
    parser.add_argument(
        "--hardware",
        action="append",
        default=None,
        help="predict on this hardware profile (repeatable; 'local': this machine's "
        "calibration, the default)",
    )
    args = parser.parse_args()
    invoked = f"python benchmarks/{SCRIPT} --runs {args.runs}"
    invoked += f" --root {args.root}" if args.root != ROOT else ""
    invoked += f" --vs {args.vs}" if args.vs is not None else ""
    invoked += f" --only {args.only}" if args.only else ""
    profiles = args.hardware or ["local"]
    invoked += "".join(f" --hardware {h}" for h in args.hardware or [])
    table = [
        *header(SCRIPT, WHAT, invoked),
        f"Each command its own process, median of {args.runs} runs; exit 2 is a refusal",
        "(one line, the limit named)."
        + (f" `vs`: the same from {args.vs}, run in turn with it." if args.vs else "")
        + f" Load average at the start: {os.getloadavg()[0]:.1f} (a busy machine slows each row).",
        "",
        "| command | wall | peak RSS | exit |"
        + (" wall (vs) | peak RSS (vs) |" if args.vs else ""),
        "|---|---:|---:|---:|" + ("---:|---:|" if args.vs else ""),
    ]
    print("\n".join(table), flush=True)
    everything = [c for h in profiles for c in commands(None if h == "local" else h)]
    for command in everything:
        if args.only not in command:
            continue
        if args.vs is None:
            wall, rss, exits = measure(command, args.root, args.runs, args.timeout)
            row = f"| `predict {command}` | {wall} | {rss} | {exits} |"
        else:
            (wall, rss, exits), (vs_wall, vs_rss, _) = measure_beside(
                command, args.root, args.vs, args.runs, args.timeout
            )
            row = f"| `predict {command}` | {wall} | {rss} | {exits} | {vs_wall} | {vs_rss} |"
        table.append(row)
        print(row, flush=True)
    if args.write:
        write_section(SCRIPT, table)


if __name__ == "__main__":
    main()
