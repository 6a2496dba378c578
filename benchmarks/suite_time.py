"""Benchmark: how long the test suite takes, whole and its fast subset, serial and on every core.

Runs each pytest command as CI would (a fresh process, from the repository's root) and
prints its wall time, the median of `--runs`, with what pytest said of the tests (passed,
failed, skipped): a timing of a suite that failed is shown as such, never quietly. The
goals (issue 36): the README's command under 6 minutes on a 2-core machine, the fast
subset (`-m "not ranks"`) under 60 s. Beside each time, the CPU work the machine did
meanwhile: where the cores are busy throughout, the wall time is that work over the
cores, and only less work shortens it (benchmarks/suite_cpu.py says where it goes).

    python benchmarks/suite_time.py [--runs 1] [--only fast|full] [--parallel] [--write]

`--write` puts the table between docs/benchmarks.md's suite markers
(benchmarks.doc_section). Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.doc_section import ROOT, header, write_suite  # noqa: E402
from benchmarks.suite_cpu_plugin import busy_seconds  # noqa: E402

SCRIPT = "suite_time.py"
WHAT = "the test suite's wall time"
# (label, pytest's arguments, goal in seconds, which group): the README's commands.
COMMANDS = [
    ("fast subset, serial", ["-m", "not ranks"], None, "fast"),
    ("fast subset, every core", ["-m", "not ranks", "-n", "auto"], 60.0, "fast"),
    ("whole suite, serial", [], None, "full"),
    ("whole suite, the README's command", ["-n", "auto"], 360.0, "full"),
]
# pytest's last line, as `-q` prints it: "2013 passed, 1 skipped, 35 warnings in 502.00s".
SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed|errors?)\b.*?) in [\d.]+s", re.MULTILINE)


def time_pytest(arguments: list[str], profile: str) -> tuple[float, float, str]:
    """Wall seconds of one `pytest ARGUMENTS` run, the CPU seconds the whole machine
    spent meanwhile (every process it started, and whatever else ran), and pytest's
    summary line."""
    env = {**os.environ, "HYPOTHESIS_PROFILE": profile}
    busy = busy_seconds()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    busy = busy_seconds() - busy
    found = SUMMARY.findall(done.stdout)
    summary = found[-1] if found else f"exit status {done.returncode}, no summary"
    for line in done.stdout.splitlines():  # what failed, on this script's stderr
        if line.startswith(("FAILED ", "ERROR ")):
            print(line, file=sys.stderr)
    return seconds, busy, re.sub(r"\s+", " ", summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", choices=("fast", "full"), default=None)
    parser.add_argument(
        "--parallel", action="store_true", help="only the commands on every core (no serial)"
    )
    parser.add_argument("--profile", default="ci", help="HYPOTHESIS_PROFILE (ci: as CI runs)")
    parser.add_argument(
        "--write", action="store_true", help="write the table into docs/benchmarks.md"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]  # before this script adds its own
    cores = os.cpu_count() or 1
    rows = []
    for label, arguments, goal, group in COMMANDS:
        if args.only not in (None, group) or (args.parallel and "-n" not in arguments):
            continue
        runs = [time_pytest(arguments, args.profile) for _ in range(args.runs)]
        seconds = [s for s, _, _ in runs]
        work = statistics.median(busy for _, busy, _ in runs)
        busy_share = statistics.median(busy / (s * cores) for s, busy, _ in runs)
        words = " ".join(["pytest", *(f'"{a}"' if " " in a else a for a in arguments)])
        rows.append(
            f"| `{words}` | {label} | {statistics.median(seconds):.0f} s "
            f"| {min(seconds):.0f}–{max(seconds):.0f} s "
            f"| {work:.0f} core-s | {busy_share:.0%} | {work / cores:.0f} s "
            f"| {f'< {goal:.0f} s' if goal else ''} | {runs[-1][2]} |"
        )
    command = (
        f"python benchmarks/{SCRIPT} --runs {args.runs}"
        + (f" --only {args.only}" if args.only else "")
        + (" --parallel" if args.parallel else "")
    )
    table = [
        *header(SCRIPT, WHAT, command),
        f"Load average when it started: {load:.1f} on {cores} cores "
        "(other processes' load only ever adds time, unevenly). "
        f"HYPOTHESIS_PROFILE={args.profile}; wall time of the whole pytest process, "
        f"start and collection included, median of {args.runs} run(s) (range). "
        "CPU work: the core-seconds the whole machine spent during the run (every process "
        "the tests started, and anything else running); cores busy: that work over the "
        f"wall time's {cores} cores; least wall: the work spread over every core with none "
        "idle, the shortest this work could take here (only less work goes below it).",
        "",
        "| command | what | median | range | CPU work | cores busy | least wall | goal "
        "| tests (the last run) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
        *rows,
    ]
    print("\n".join(table))
    if args.write:
        write_suite(table)


if __name__ == "__main__":
    main()
