"""Benchmark: how long a learner waits for a run, cold (`playground run`) and warm (the app).

Per lesson, the medians of `--repeat` runs (3 by default):

- cold: wall time of `playground run LESSON` as a subprocess, from its start to
  its exit (spawn, torch import, rendezvous, the lesson's own preparation, the
  run, the report). One untimed run first, so a missing calibration is not timed;
- warm: through a RankPool, as the app runs the lesson again after a first run
  (untimed, it starts the pool): from the run request (session.run, which the
  app's `r` calls) to every rank holding the job ("ranks ready"), to the first
  action of any rank ("first action": after the lesson's own preparation, such
  as the reference run or the pipeline's stage costs), and to the result.

failure-resume runs under the restart supervisor, so it is always cold (its
ranks die on purpose); its warm columns show its cold run through the app's path.

Targets from issue 12 (measured, never asserted): a warm re-run starts executing
within 0.5 s of `r`; cold `playground run pipeline` within 6 s, `zero` within 4 s.

    python benchmarks/time_to_result.py [--repeat 3] [--lesson NAME]...

Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

from playground import session
from runtime.engine.pool import RankPool

# (label, lesson, -p params): the lessons' defaults, ring-allreduce on 2 and 4 ranks.
CASES = [
    ("ring-allreduce ×2", "ring-allreduce", {"ranks": "2"}),
    ("ring-allreduce ×4", "ring-allreduce", {"ranks": "4"}),
    ("zero", "zero", {}),
    ("pipeline", "pipeline", {}),
    ("failure-resume", "failure-resume", {}),
    ("why-distribute", "why-distribute", {}),
]


def playground_command() -> list[str]:
    found = shutil.which("playground")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from playground.cli import main; sys.exit(main())"]


def cold_seconds(lesson: str, raw: dict[str, str]) -> float:
    command = [*playground_command(), "run", lesson]
    for key, value in raw.items():
        command += ["-p", f"{key}={value}"]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def warm_seconds(
    pool: RankPool, lesson: str, raw: dict[str, str]
) -> tuple[float, float, float, bool]:
    """(ranks ready, first action, result) in seconds after the request, and warm or not."""
    ready: list[float] = []
    start = time.perf_counter()
    outcome = session.run(
        lesson,
        raw,
        pool=pool,
        on_message=lambda m: ready.append(time.perf_counter()) if m[0] == "ready" else None,
    )
    done = time.perf_counter() - start
    assert outcome.start_s is not None
    return max(ready) - start, outcome.start_s, done, bool(outcome.warm)


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lesson", action="append", help="only these lessons (label prefix)")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.lesson or any(c[0].startswith(x) for x in args.lesson)]

    rows = []
    for label, lesson, raw in cases:
        cold_seconds(lesson, raw)  # untimed: calibrates if needed, warms the file cache
        cold = median([cold_seconds(lesson, raw) for _ in range(args.repeat)])
        with RankPool() as pool:
            first = warm_seconds(pool, lesson, raw)
            warm = [warm_seconds(pool, lesson, raw) for _ in range(args.repeat)]
        kept = all(w[3] for w in warm)
        columns = [median([w[i] for w in warm]) for i in range(3)]
        rows.append((label, cold, first[2], *columns, kept))
        print(f"  {label}: done", file=sys.stderr)

    print(f"time to result, medians of {args.repeat} (seconds)")
    head = (
        f"{'lesson':<20}{'cold CLI':>10}{'1st app run':>13}"
        f"{'warm: ready':>13}{'first action':>14}{'result':>9}"
    )
    print(head)
    for label, cold, first_app, ready, first_action, result, kept in rows:
        note = "" if kept else "  (always cold: restarts)"
        print(
            f"{label:<20}{cold:>10.2f}{first_app:>13.2f}"
            f"{ready:>13.2f}{first_action:>14.2f}{result:>9.2f}{note}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
