"""What freeing a gloo send or receive right after its wait costs a ring all-reduce.

    python benchmarks/p2p_release.py [--calls 300] [--blocks 5]

Two ranks (gloo, loopback), launched as the lessons' ranks are (runtime.engine.launch), run
the project's hand-made ring all-reduce (runtime.engine.comm.Comm) of 32 floats between small
computes, as tensor parallelism's decode does, with its finished requests freed at once
(`Spent(0)`, as the lessons run now) or kept a while before they are freed
(`Spent(KEEP_MEASURED)`), first with each rank pinned to a core of its own, then as the
lessons run (unpinned). The two variants take turns, block by block, in the same
processes, so a slow spell of the machine meets both. The table: medians over the
blocks of each block's median and 90th percentile all-reduce, and the share of
all-reduces past 2 ms. Timings are only asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch.distributed as dist  # noqa: E402

from runtime.engine.launch import LaunchSpec, launch  # noqa: E402
from runtime.engine.worker import RankContext  # noqa: E402

VARIANTS = ("freed at once", "kept a while")


def rank_main(ctx: RankContext[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """One rank (runtime.engine.launch): every variant's all-reduce times, block by block."""
    import torch

    from runtime.engine import collectives
    from runtime.engine.comm import KEEP_MEASURED, Comm, Spent

    params = ctx.params
    if params["pinned"]:
        os.sched_setaffinity(0, {ctx.rank % (os.cpu_count() or 1)})
    steps = collectives.ring_all_reduce([0, 1], 32, 4)[ctx.rank]
    tensor = torch.zeros(32)
    weight, x = torch.randn(64, 64), torch.randn(1, 64)
    results: dict[str, list[list[float]]] = {v: [] for v in VARIANTS}
    for _ in range(params["blocks"]):
        for variant in VARIANTS:
            comm = Comm()
            comm.spent = Spent(0) if variant == VARIANTS[0] else Spent(KEEP_MEASURED)
            dist.barrier()
            took = []
            for _ in range(params["calls"]):
                for _ in range(20):  # a decode part's compute between all-reduces
                    x = torch.tanh(x @ weight)
                start = time.perf_counter()
                comm.run(steps, tensor)
                took.append(time.perf_counter() - start)
            results[variant].append(took)
    return results


def measure(pinned: bool, calls: int, blocks: int) -> dict[str, list[list[float]]]:
    params = {"pinned": pinned, "calls": calls, "blocks": blocks}
    spec = LaunchSpec("benchmarks.p2p_release:rank_main", 2, params=params, backend="gloo")
    return launch(spec).rank_results[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--blocks", type=int, default=5)
    args = parser.parse_args()
    print(f"ring all-reduce of 32 floats on 2 ranks, {args.calls} calls x {args.blocks} blocks")
    print(f"{'ranks':<9} {'requests':<14} {'median':>8} {'p90':>8} {'past 2 ms':>10}")
    for pinned in (True, False):
        results = measure(pinned, args.calls, args.blocks)
        for variant in VARIANTS:
            blocks = [sorted(b) for b in results[variant]]
            median = statistics.median(b[len(b) // 2] for b in blocks)
            p90 = statistics.median(b[int(len(b) * 0.9)] for b in blocks)
            slow = statistics.median(sum(t > 2e-3 for t in b) / len(b) for b in blocks)
            where = "pinned" if pinned else "unpinned"
            print(f"{where:<9} {variant:<14} {median * 1e3:6.2f}ms {p90 * 1e3:6.2f}ms {slow:9.0%}")


if __name__ == "__main__":
    main()
