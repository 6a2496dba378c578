"""Benchmark of `predict` at scale (issue 12, item 3): wall time and peak memory.

Runs each of the issue's slow `playground predict` commands (and the largest sizes
each lesson's `predict` accepts) as its own process, several times, and prints the
median wall time and the median peak resident memory of the process, with its exit
status. A command past `--timeout` is stopped and shown as such.

    python benchmarks/predict_scale.py [--runs 3] [--timeout 60] [--root DIR]

`--root` runs the commands from another checkout (the tree before a change, say), with
this interpreter. Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = [
    "zero -p dp=1048576 -p params=70B",
    "zero -p dp=1048576 -p params=1T",
    "zero --ranks 10000",
    "zero -p layers=4096",
    "failure-resume -p steps=100000",
    "failure-resume -p steps=1000000",
    "failure-resume -p mtbf=15m -p save_cost=5m",
    "pipeline -p schedule=interleaved -p stages=32 -p microbatches=256 -p chunks=2 -p layers=64",
    "pipeline -p schedule=interleaved -p stages=64 -p microbatches=256 -p chunks=4 -p layers=256",
    "ring-allreduce --ranks 4096 -p repeat=50",
    "ring-allreduce --ranks 64 -p repeat=50",
    "why-distribute -p params=70B -p gpus=64 -p gpus_per_node=8 -p gpu=h100-80gb",
    "why-distribute -p params=1T -p gpus=65536",
    "why-distribute -p params=175B -p gpus=65536 -p global_batch=16777216",
]


def run_once(command: str, root: Path, timeout: float) -> tuple[float, float, int | None]:
    """(wall seconds, peak RSS in MiB, exit status or None if stopped at the timeout)."""
    argv = [sys.executable, "-m", "playground.cli", "predict", *command.split()]
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = started + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            wall = time.perf_counter() - started
            return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)
        if time.perf_counter() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            _, _, usage = os.wait4(proc.pid, 0)
            return timeout, usage.ru_maxrss / 1024, None
        time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per command")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to run")
    parser.add_argument("commands", nargs="*", help="predict arguments (default: the list)")
    args = parser.parse_args()
    commands = args.commands or COMMANDS
    width = max(map(len, commands))
    print(f"predict, medians of {args.runs} runs (a process each), from {args.root}")
    print(f"{'command':<{width}}  {'wall':>9}  {'peak RSS':>10}  exit")
    for command in commands:
        runs = [run_once(command, args.root, args.timeout) for _ in range(args.runs)]
        wall = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        codes = {r[2] for r in runs}
        shown = f"> {args.timeout:.0f} s" if None in codes else f"{wall:.2f} s"
        exits = "timeout" if None in codes else ",".join(str(c) for c in sorted(codes))
        print(f"{command:<{width}}  {shown:>9}  {rss:>7.0f} MiB  {exits}", flush=True)


if __name__ == "__main__":
    main()
