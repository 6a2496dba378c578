"""What freeing a gloo send or receive right after its wait costs a ring all-reduce.

    python benchmarks/p2p_release.py [--calls 300] [--blocks 5]

Two ranks (gloo, loopback) run the project's hand-made ring all-reduce
(runtime.comm.Comm) of 32 floats between small computes, as tensor parallelism's
decode does, with its finished requests freed at once (`Spent(0)`, as the lessons
run now) or kept a while before they are freed (`Spent(KEEP_MEASURED)`), first with each rank
pinned to a core of its own, then as the lessons run (unpinned). The two variants
take turns, block by block, in the same processes, so a slow spell of the machine
meets both. The table: medians over the blocks of each block's median and 90th
percentile all-reduce, and the share of all-reduces past 2 ms. Timings are only
asserted here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = ("freed at once", "kept a while")


def rank_main(rank: int, port: int, pinned: bool, calls: int, blocks: int, out) -> None:  # noqa: ANN001
    import torch
    import torch.distributed as dist

    from runtime import collectives
    from runtime.comm import KEEP_MEASURED, Comm, Spent

    torch.set_num_threads(1)
    if pinned:
        os.sched_setaffinity(0, {rank % (os.cpu_count() or 1)})
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    steps = collectives.ring_all_reduce([0, 1], 32, 4)[rank]
    tensor = torch.zeros(32)
    weight, x = torch.randn(64, 64), torch.randn(1, 64)
    results: dict[str, list[list[float]]] = {v: [] for v in VARIANTS}
    for _ in range(blocks):
        for variant in VARIANTS:
            comm = Comm()
            comm.spent = Spent(0) if variant == VARIANTS[0] else Spent(KEEP_MEASURED)
            dist.barrier()
            took = []
            for _ in range(calls):
                for _ in range(20):  # a decode part's compute between all-reduces
                    x = torch.tanh(x @ weight)
                start = time.perf_counter()
                comm.run(steps, tensor)
                took.append(time.perf_counter() - start)
            results[variant].append(took)
    if rank == 0:
        out.put(results)
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(pinned: bool, calls: int, blocks: int) -> dict[str, list[list[float]]]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    ranks = [
        ctx.Process(target=rank_main, args=(r, port, pinned, calls, blocks, out)) for r in (0, 1)
    ]
    for p in ranks:
        p.start()
    results = out.get(timeout=600)
    for p in ranks:
        p.join(timeout=60)
    return results


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
