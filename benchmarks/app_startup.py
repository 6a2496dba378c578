"""Benchmark: how long `playground` takes to paint its first screen, from the command's start.

Runs the installed command in a pseudo-terminal (what a learner's terminal
is), and stops the clock when the home screen's lesson list has been written
to the terminal: the first frame the learner sees. Prints the median of
several runs, the fastest and the slowest. The goal is under half a second
(issue 43; under one second since issue 3): the UI never imports torch, and
before its first frame the app imports only what the home screen draws (the
lesson screen, its widgets and the session come after it: playground.app).

    python benchmarks/app_startup.py [--runs 7] [--write]

`--write` puts the table into this script's section of docs/benchmarks.md
(benchmarks.doc_section). Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import compileall
import os
import pty
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.doc_section import header, write_section  # noqa: E402

SCRIPT = "app_startup.py"
WHAT = "the app's first paint"
GOAL_S = 0.5
MARKER = b"Lesson 7"  # the last lesson of the home list: the whole first frame is out


def first_paint_seconds(command: list[str], timeout: float = 20.0) -> float:
    master, slave = pty.openpty()
    env = {
        **os.environ,
        "PLAYGROUND_LANG": "en",
        "TERM": "xterm-256color",
        "COLUMNS": "120",
        "LINES": "40",
    }
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    seen = b""
    try:
        while time.perf_counter() - start < timeout:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
                if MARKER in seen:
                    return time.perf_counter() - start
        raise RuntimeError("the first screen never appeared")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        os.close(master)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--write", action="store_true", help="write the table into docs/benchmarks.md"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]  # before this script adds its own
    installed = shutil.which("playground")
    command = [installed] if installed else [sys.executable, "-m", "playground.cli"]
    # Bytecode compiled, as an installed package's is: with PYTHONDONTWRITEBYTECODE set (or a
    # changed file) every start would compile the changed modules again and time that.
    root = Path(__file__).resolve().parent.parent
    for package in ("playground", "scenarios", "runtime"):
        compileall.compile_dir(root / package, quiet=1)
    first_paint_seconds(command)  # warm the file cache, as a learner's second start would
    times = [first_paint_seconds(command) for _ in range(args.runs)]
    table = [
        *header(SCRIPT, WHAT, f"python benchmarks/{SCRIPT} --runs {args.runs}"),
        f"Load average when it started: {load:.1f} on {os.cpu_count()} cores "
        "(other processes' load only ever adds time, unevenly).",
        "",
        f"`playground` in a pseudo-terminal until the home screen's last lesson is written,"
        f" {args.runs} runs after one that warms the file cache.",
        "",
        "| median | fastest | slowest | goal |",
        "|---:|---:|---:|---:|",
        f"| {statistics.median(times) * 1e3:.0f} ms | {min(times) * 1e3:.0f} ms "
        f"| {max(times) * 1e3:.0f} ms | < {GOAL_S * 1e3:.0f} ms |",
    ]
    print("\n".join(table))
    if args.write:
        write_section(SCRIPT, table)


if __name__ == "__main__":
    main()
