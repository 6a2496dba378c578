"""Rank-side jobs of the engine tests (run inside real rank processes by runtime.engine.launch).

Each job takes a RankContext and returns a dict; the tests in test_engine.py
launch them with the job name "rank_jobs:<function>".
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from runtime.engine import comm
from runtime.engine.worker import RankContext
from runtime.sim.formulas import even_split

DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64)


def _data(rank: int, numel: int, dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(7 + rank)
    if dtype.is_floating_point:
        return torch.randn(numel, generator=gen, dtype=torch.float64).to(dtype)
    return torch.randint(-50, 50, (numel,), generator=gen, dtype=dtype)


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    if got.shape != want.shape:
        return False
    if got.dtype.is_floating_point:
        return torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    return torch.equal(got, want)


def check_collectives(ctx: RankContext[None]) -> dict[str, Any]:
    """Every hand-made collective against torch.distributed's built-in, for many shapes."""
    n, rank = ctx.world_size, ctx.rank
    failures: list[str] = []
    checked = 0
    for dtype in DTYPES:
        for numel in (1, n - 1, n, 1000, 1001, 4099):
            x = _data(rank, numel, dtype)
            where = f"{dtype} numel={numel}"

            want = x.clone()
            dist.all_reduce(want)
            counter = comm.Comm()
            got = comm.ring_all_reduce(x.clone(), counter)
            if not _same(got, want):
                failures.append(f"ring_all_reduce {where}")
            sizes = even_split(numel, n)
            expected_sent = (
                sum(sizes) * x.element_size() * 2
                - (sizes[rank] + sizes[(rank + 1) % n]) * x.element_size()
            )
            if counter.bytes_sent != expected_sent:
                failures.append(
                    f"ring_all_reduce bytes {where}: {counter.bytes_sent} != {expected_sent}"
                )

            if not _same(comm.tree_all_reduce(x.clone()), want):
                failures.append(f"tree_all_reduce {where}")

            mine = comm.ring_reduce_scatter(x.clone())
            if not _same(mine, want.split(sizes)[rank]):
                failures.append(f"ring_reduce_scatter vs all_reduce slice {where}")
            if numel % n == 0:
                builtin_rs = torch.empty(numel // n, dtype=dtype)
                dist.reduce_scatter_tensor(builtin_rs, x.clone())
                if not _same(mine, builtin_rs):
                    failures.append(f"ring_reduce_scatter vs reduce_scatter_tensor {where}")

            # all-gather: rank r contributes its even_split chunk; torch's all_gather
            # needs equal sizes, so pad to the largest chunk and trim.
            chunk = x[: sizes[rank]].clone()
            padded = torch.zeros(max(sizes), dtype=dtype)
            padded[: sizes[rank]] = chunk
            gathered = [torch.empty_like(padded) for _ in range(n)]
            dist.all_gather(gathered, padded)
            want_ag = torch.cat([g[: sizes[r]] for r, g in enumerate(gathered)])
            if not _same(comm.ring_all_gather(chunk, sizes), want_ag):
                failures.append(f"ring_all_gather {where}")

            for root in (0, n - 1):
                want_bc = x.clone()
                dist.broadcast(want_bc, src=root)
                if not _same(comm.tree_broadcast(x.clone(), root=root), want_bc):
                    failures.append(f"tree_broadcast root={root} {where}")
            checked += 1
    return {"failures": failures, "checked": checked}


def sleep_forever(ctx: RankContext[None]) -> dict[str, Any]:
    """A rank job that never finishes on its own (for hang and cancel tests)."""
    import time

    ctx.start_clock()
    while True:
        time.sleep(0.05)


def raise_on_rank_one(ctx: RankContext[None]) -> dict[str, Any]:
    ctx.start_clock()
    if ctx.rank == 1:
        raise ValueError("deliberate failure for the test")
    dist.barrier()
    return {}


def seeded_sum(ctx: RankContext[None]) -> dict[str, Any]:
    """Draws from torch's global generator (seeded per job by runtime.engine.worker), all-reduced:
    the same numbers on a fresh rank and on a warm one; and whether the job ran with the
    cyclic garbage collector on, and the imports' objects frozen (runtime.engine.worker.run_rank)."""
    import gc

    ctx.start_clock()
    x = torch.randn(4)
    total = x.clone()
    dist.all_reduce(total)
    return {
        "mine": x.tolist(),
        "sum": total.tolist(),
        "threads": torch.get_num_threads(),
        "collecting": gc.isenabled(),
        "frozen": gc.get_freeze_count() > 0,
    }
