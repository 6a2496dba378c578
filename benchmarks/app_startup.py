"""Benchmark: how long `playground` takes to paint its first screen, from the command's start.

Runs the installed command in a pseudo-terminal (what a learner's terminal
is), and stops the clock when the home screen's lesson list has been written
to the terminal: the first frame the learner sees. Prints the median of
several runs and the slowest one. The goal is under one second on this
machine (issue 3); the UI must never import torch, which is what makes it
possible.

    python benchmarks/app_startup.py [--runs 7]

Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time

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
    args = parser.parse_args()
    installed = shutil.which("playground")
    command = [installed] if installed else [sys.executable, "-m", "playground.cli"]
    first_paint_seconds(command)  # warm the file cache, as a learner's second start would
    times = [first_paint_seconds(command) for _ in range(args.runs)]
    print(f"first paint of `{' '.join(command)}`, {args.runs} runs")
    print(f"{'median':>8} {'max':>8} {'goal':>6}")
    print(f"{statistics.median(times) * 1e3:>6.0f}ms {max(times) * 1e3:>6.0f}ms {'<1 s':>6}")


if __name__ == "__main__":
    main()
