"""What each rank of the template lesson runs: its Actions, for real, with torch.

runtime.engine.worker calls `run_rank` inside each rank process with a RankContext
(its rank, the typed params, its Actions of the Program, the recorder). It runs one
untimed warm-up step, starts the shared clock, executes its Actions one Span each
(`ctx.execute`), and returns its TemplateResult: the compute seconds it measured
(what the prediction is refined with after the run) and its numerics against a
single-process reference.

Engine part: imports torch (rank processes and tests only; the UI never imports it).
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from runtime.engine.worker import RankContext
from runtime.sim.program import Action

from .params import MATMUL, TemplateParams, TemplateResult


def inputs(rank: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(X_rank, W): this rank's data, different on every rank, and the weights every
    rank shares; seeded, so a single process can build them all again."""
    x = torch.randn(dim, dim, generator=torch.Generator().manual_seed(1000 + rank))
    w = torch.randn(dim, dim, generator=torch.Generator().manual_seed(7)) / dim**0.5
    return x, w


def local(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """One rank's part: G_r = tanh(X_r·W)."""
    return torch.tanh(x @ w)


def reference(world_size: int, dim: int) -> torch.Tensor:
    """What the all-reduce gives every rank, computed in one process: Σ_r tanh(X_r·W)."""
    return sum((local(*inputs(r, dim)) for r in range(world_size)), torch.zeros(dim, dim))


def run_rank(ctx: RankContext[TemplateParams]) -> TemplateResult:
    params = ctx.params
    x, w = inputs(ctx.rank, params.dim)
    g = local(x, w)  # the warm-up step, untimed: first-touch buffers, gloo's connections
    dist.all_reduce(g)
    seconds: list[float] = []

    def handler(action: Action) -> None:
        if action.is_compute:
            start = time.perf_counter()
            torch.tanh(torch.matmul(x, w, out=g), out=g)
            seconds.append(time.perf_counter() - start)
        else:
            dist.all_reduce(g)  # op=SUM, in place: every rank ends with the same sum

    ctx.start_clock()
    ctx.execute(ctx.actions, handler)
    diff = (g - reference(ctx.world_size, params.dim)).abs().max().item()
    return TemplateResult(
        compute_costs={MATMUL: statistics.median(seconds)},
        checksum=g.double().sum().item(),
        max_abs_diff_vs_reference=diff,
    )
