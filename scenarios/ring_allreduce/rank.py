"""Rank side of lesson 1: run the ring (or tree, or built-in) all-reduce for real.

Called inside each rank process by runtime.engine.worker with a RankContext. It runs
this rank's Actions of the `ring-allreduce` Program (scenarios.ring_allreduce
.program) on a real buffer with runtime.engine.comm, one Span per Action; in every
iteration it also runs the Program's reference actions (torch's own all_reduce
on the same data, after a barrier), so the two are timed side by side; and it
checks the hand-made result against torch's.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

from itertools import groupby

import torch
import torch.distributed as dist

from runtime.engine.comm import Comm
from runtime.engine.worker import RankContext
from runtime.sim.program import Action
from scenarios.ring_allreduce.params import REFERENCE, RingParams, RingResult

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
}


def is_reference(action: Action) -> bool:
    return action.series == REFERENCE


def make_input(rank: int, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Deterministic, different on every rank: what this rank's gradients would be."""
    gen = torch.Generator().manual_seed(1000 + rank)
    if dtype.is_floating_point:
        data = torch.randn(numel, generator=gen, dtype=torch.float64).to(dtype)
    else:
        data = torch.randint(-1000, 1000, (numel,), generator=gen, dtype=dtype)
    return data.to(device)


def run_rank(ctx: RankContext[RingParams]) -> RingResult:
    params = ctx.params
    dtype = DTYPES[params.dtype]
    x = make_input(ctx.rank, params.numel, dtype, ctx.device)
    comm = Comm()
    iterations = [list(group) for _, group in groupby(ctx.actions, key=lambda a: a.step)]

    # The reference, and a warm-up of both paths (first-touch buffers, connections).
    reference = x.clone()
    dist.all_reduce(reference)
    work, scratch = x.clone(), x.clone()
    comm.run([a for a in iterations[0] if not is_reference(a)], work)
    comm.reset_counters()

    ctx.start_clock()
    for actions in iterations:
        # The hand-made all-reduce on `work`, then torch's on `scratch`, both timed
        # as Spans: side by side in every iteration (the Program's reference actions).
        work.copy_(x)
        comm.run([a for a in actions if not is_reference(a)], work, runner=ctx.execute)
        scratch.copy_(x)
        comm.run([a for a in actions if is_reference(a)], scratch, runner=ctx.execute)
    bytes_sent = comm.bytes_sent // len(iterations)
    uses_hand_comm = params.algorithm != "builtin"

    if dtype.is_floating_point:
        diff = (work.double() - reference.double()).abs().max().item() if work.numel() else 0.0
        scale = reference.double().abs().max().item() if work.numel() else 0.0
        equal = diff <= 1e-5 * max(1.0, scale) * ctx.world_size
    else:
        diff = float((work - reference).abs().max().item()) if work.numel() else 0.0
        equal = diff == 0
    return RingResult(
        bytes_sent_per_iteration=bytes_sent if uses_hand_comm else None,
        max_abs_diff_vs_builtin=diff,
        equals_builtin=bool(equal),
    )
