"""Benchmark: where the test suite's CPU work goes, test file by test file.

benchmarks/suite_time.py says how long the suite takes and how busy it keeps the cores;
on a machine whose cores are all busy through the run, the wall time is the CPU work
divided by the cores, and only less work makes it shorter. This script says where that
work is: it runs the suite serially (one test at a time, as CI's workers each do) with
benchmarks/suite_cpu_plugin.py, which charges each test with the CPU the whole machine
spent while it ran (its ranks, fork servers, apps in tmux and helpers included), and
prints the files that cost most, with the work outside any test (start, collection).

    python benchmarks/suite_cpu.py [TEST_FILE ...] [-m "not ranks"] [--top 25] [--write]

Run it on an otherwise idle machine: another process's work is charged to the tests that
ran beside it. `--write` puts the table in its section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.doc_section import ROOT, header, write_section  # noqa: E402

SCRIPT = "suite_cpu.py"
WHAT = "where the test suite's CPU work goes"


def measure(marker: str | None, paths: list[str], profile: str) -> dict:
    """One serial pytest run under the plugin: its rows and session totals."""
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as folder:
        out = Path(folder) / "rows.json"
        env = {**os.environ, "HYPOTHESIS_PROFILE": profile, "SUITE_CPU_OUT": str(out)}
        selection = ["-m", marker] if marker else []
        # Serial: `-p no:xdist` also drops addopts' `--dist`, which needs xdist.
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-o", "addopts=",
             "-p", "benchmarks.suite_cpu_plugin", *selection, *paths],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if not out.exists():
            sys.exit(f"pytest wrote no rows (exit {done.returncode}):\n{done.stdout[-2000:]}")
        document = json.loads(out.read_text())
    document["summary"] = (done.stdout.strip().splitlines() or ["?"])[-1].strip("= ")
    return document


def table(document: dict, top: int) -> list[str]:
    per_file: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for nodeid, wall, busy in document["rows"]:
        row = per_file[nodeid.split("::", 1)[0]]
        row[0] += 1
        row[1] += wall
        row[2] += busy
    total_busy = document["session_busy"]
    in_tests = sum(row[2] for row in per_file.values())
    ranked = sorted(per_file.items(), key=lambda item: -item[1][2])
    lines = [
        "| test file | tests | wall | CPU work | share |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (count, wall, busy) in ranked[:top]:
        lines.append(
            f"| `{name}` | {count:.0f} | {wall:.0f} s | {busy:.0f} core-s "
            f"| {busy / total_busy:.0%} |"
        )
    rest = ranked[top:]
    if rest:
        busy = sum(row[2] for _, row in rest)
        lines.append(
            f"| {len(rest)} other files | {sum(row[0] for _, row in rest):.0f} "
            f"| {sum(row[1] for _, row in rest):.0f} s | {busy:.0f} core-s "
            f"| {busy / total_busy:.0%} |"
        )
    outside = total_busy - in_tests
    lines.append(
        f"| outside any test (start, collection) | | | {outside:.0f} core-s "
        f"| {outside / total_busy:.0%} |"
    )
    lines.append(
        f"| **the whole run** | {len(document['rows'])} | {document['session_wall']:.0f} s "
        f"| {total_busy:.0f} core-s | 100% |"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="test files (default: the whole suite)")
    parser.add_argument("-m", dest="marker", default=None, help="pytest's -m (default: all)")
    parser.add_argument("--top", type=int, default=25, help="files listed one by one")
    parser.add_argument("--profile", default="ci", help="HYPOTHESIS_PROFILE (ci: as CI runs)")
    parser.add_argument(
        "--write", action="store_true", help="write the table into docs/benchmarks.md"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    document = measure(args.marker, args.paths, args.profile)
    cores = os.cpu_count() or 1
    command = " ".join(
        ["python", f"benchmarks/{SCRIPT}", *args.paths]
        + ([f'-m "{args.marker}"'] if args.marker else [])
    )
    section = [
        *header(SCRIPT, WHAT, command),
        f"One serial run (HYPOTHESIS_PROFILE={args.profile}): {document['summary']}. "
        f"Load average when it started: {load:.1f}. CPU work: what the whole machine's "
        "cores spent while each test ran (its ranks, fork servers and apps included), "
        f"in core-seconds; {cores} cores do at most {cores} core-seconds a second, so the "
        f"work alone needs {document['session_busy'] / cores:.0f} s of wall time here, "
        "however the tests are spread over the cores.",
        "",
        *table(document, args.top),
    ]
    print("\n".join(section))
    if args.write:
        write_section(SCRIPT, section)


if __name__ == "__main__":
    main()
