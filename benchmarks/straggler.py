"""A straggler, measured and predicted: `zero` on 4 ranks, plain and with rank 2 slowed.

    python benchmarks/straggler.py [--runs 3] [--factor 3] [--rank 2]

For each ZeRO stage, medians over the runs: the measured makespan and the
prediction of the same run (refined with what its ranks measured, and for the
slowed run with the slowed rank: runtime.sim.eventloop), their error, and what the
straggler adds (slowed − plain), measured against predicted: that difference is
the straggler's own cost, with the calibration's error on the collectives
(shared by both runs) left out. Then who was flagged, in how many steps, and
each rank's wait per step (runtime.engine.stragglers). Timings are asserted only here,
never in tests; this machine's noise (4 ranks on 2 cores, other processes) is
in the spread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground import session  # noqa: E402
from playground.outcome import Outcome  # noqa: E402
from runtime.sim.units import format_seconds  # noqa: E402


def makespans(outcome: Outcome) -> dict[str, tuple[float, float]]:
    return {
        m.series: (m.value, m.predicted)
        for m in outcome.metrics
        if m.name == "makespan_s" and m.series and isinstance(m.value, float)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--factor", type=float, default=3.0)
    parser.add_argument("--rank", type=int, default=2)
    args = parser.parse_args()
    fault = f"slow:rank={args.rank},factor={args.factor:g}"
    plain = [session.run("zero", {"ranks": "4"}) for _ in range(args.runs)]
    slow = [session.run("zero", {"ranks": "4"}, faults=[fault]) for _ in range(args.runs)]
    print(f"zero, 4 ranks, {fault}: medians of {args.runs} runs")
    header = f"{'stage':<7}{'plain meas':>11}{'pred':>10}{'err':>6}{'slow meas':>11}{'pred':>10}{'err':>6}{'+meas':>10}{'+pred':>10}"
    print(header)
    print("-" * len(header))
    for stage in makespans(plain[0]):
        p = [makespans(o)[stage] for o in plain]
        s = [makespans(o)[stage] for o in slow]
        pm, pp = statistics.median(x[0] for x in p), statistics.median(x[1] for x in p)
        sm, sp = statistics.median(x[0] for x in s), statistics.median(x[1] for x in s)
        print(
            f"{stage:<7}{format_seconds(pm):>11}{format_seconds(pp):>10}{abs(pp - pm) / pm:>6.0%}"
            f"{format_seconds(sm):>11}{format_seconds(sp):>10}{abs(sp - sm) / sm:>6.0%}"
            f"{format_seconds(sm - pm):>10}{format_seconds(sp - pp):>10}"
        )
    for name, runs in (("plain", plain), ("slowed", slow)):
        for outcome in runs:
            w = outcome.workers
            assert w is not None
            v = w.overall
            waits = " ".join(
                f"r{r} {format_seconds(w.totals[r].wait_s / max(1, w.totals[r].steps))}"
                for r in w.ranks
            )
            flagged = (
                f"rank {v.straggler} ({v.reason}, {v.ratio:.2f}×, "
                f"{w.totals[v.straggler].straggler_steps}/{sum(w.closed)} steps)"
                if v.straggler is not None
                else "none"
            )
            print(f"{name:<7} straggler {flagged:<40} wait per step: {waits}")


if __name__ == "__main__":
    main()
