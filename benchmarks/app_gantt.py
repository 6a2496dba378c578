"""Benchmark: one Gantt frame of a 100k-span timeline, redrawn from scratch.

Builds a GanttView (playground.widgets.gantt) in a headless app with 100 000
measured spans over 8 ranks (and as many predicted ones, in "both" mode), then
moves the cursor and renders every line of the widget, the work of one frame
when the cursor moves (each line's cache key changes). Prints the median and
the slowest frame, whole run zoomed out and zoomed in 64x. The goal is under
20 ms a frame (issue 3).

    python benchmarks/app_gantt.py [--spans 100000] [--frames 30]

Timings are only ever asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual.app import App, ComposeResult  # noqa: E402

from playground.widgets.gantt import GanttView  # noqa: E402
from runtime.sim.trace import Span, Timeline  # noqa: E402

KINDS = ("F", "B", "W", "send", "recv", "sendrecv")


def timeline(spans: int, ranks: int, seed: int) -> Timeline:
    rng = random.Random(seed)
    out = []
    for rank in range(ranks):
        t = 0.0
        for i in range(spans // ranks):
            t += rng.random() * 1e-4  # idle gap
            length = 1e-5 + rng.random() * 1e-3
            out.append(
                Span(rank, rng.choice(KINDS), f"F{i % 64}", t, t + length, action_id=f"a{rank}.{i}")
            )
            t += length
    return Timeline(out)


class Bench(App[None]):
    def compose(self) -> ComposeResult:
        yield GanttView(id="gantt")


async def measure(spans: int, frames: int) -> None:
    app = Bench()
    async with app.run_test(size=(200, 30)) as pilot:
        gantt = app.query_one(GanttView)
        gantt.set_timelines(timeline(spans, 8, 1), timeline(spans, 8, 2))
        await pilot.pause()
        height = 1 + len(gantt.rows)
        for label, zoom in (("whole run", 1.0), ("zoomed 64x", 64.0)):
            gantt.home()
            gantt.zoom(zoom)
            lo, hi = gantt.window
            times = []
            for frame in range(frames):
                gantt.cursor = lo + (hi - lo) * (frame + 0.5) / frames
                start = time.perf_counter()
                for y in range(height):
                    gantt.render_line(y)
                times.append(time.perf_counter() - start)
            print(
                f"{label:<11} {spans:>7} spans x2 {len(gantt.rows):>3} rows"
                f" {statistics.median(times) * 1e3:>7.2f} ms {max(times) * 1e3:>7.2f} ms {'<20 ms':>7}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--frames", type=int, default=30)
    args = parser.parse_args()
    print(f"{'view':<11} {'spans':>7}          {'rows':>4} {'median':>10} {'max':>10} {'goal':>7}")
    asyncio.run(measure(args.spans, args.frames))


if __name__ == "__main__":
    main()
