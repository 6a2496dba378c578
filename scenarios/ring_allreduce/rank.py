"""Rank side of lesson 1: run the ring (or tree, or built-in) all-reduce for real.

Called inside each rank process by runtime.engine.worker with a RankContext. It runs
this rank's Actions of the `ring-allreduce` Program (scenarios.ring_allreduce
.program) on a real buffer with runtime.engine.comm, one Span per Action; in every
iteration it also runs the Program's reference actions (torch's own all_reduce
on the same data, after a barrier), so the two are timed side by side; and it
checks the hand-made result against torch's. The warm-up iterations are the
Program's first ones, run and recorded like the others. The buffers are made once,
and every ring step is looked up before the clock starts (runtime.engine.comm.Comm.plan):
the timed loop allocates nothing in Python but torch's requests.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

from itertools import groupby

import torch

from runtime.engine.comm import KEEP_MEASURED, Comm, Spent
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
    """torch's all_reduce and its barrier, in warm-up and timed iterations alike."""
    return action.phase == REFERENCE


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
    # Finished requests kept a while before they are freed (runtime.engine.comm.Spent):
    # freed at once, each would hold this rank until gloo's thread lets go of it, a
    # scheduler tick whenever ranks outnumber cores, six times per iteration. torch's
    # all_reduce, timed beside it, pays no such toll in Python.
    comm.spent = Spent(KEEP_MEASURED)
    # Two buffers for the whole run, refilled from `x` before each iteration: the
    # hand-made all-reduce works on `work`, torch's on `reference`.
    work, reference = torch.empty_like(x), torch.empty_like(x)
    # Every iteration's handlers, built before the clock starts (Comm.plan looks each
    # ring step up once): the timed loop only runs them. The warm-up iterations are
    # the Program's first ones, timed and shown like the rest (the lesson leaves them
    # out of its times).
    iterations = []
    for _, group in groupby(ctx.actions, key=lambda a: a.step):
        actions = list(group)
        hand = [a for a in actions if not is_reference(a)]
        torchs = [a for a in actions if is_reference(a)]
        iterations.append((hand, comm.plan(hand, work), torchs, comm.plan(torchs, reference)))

    ctx.start_clock()
    for hand, run_hand, torchs, run_torch in iterations:
        # The hand-made all-reduce on `work`, then torch's on `reference`, both timed as
        # Spans: side by side in every iteration (the Program's reference actions).
        # Records reach the parent between the two, and between iterations (the
        # barrier that starts each lines the ranks up again: runtime.engine.worker).
        work.copy_(x)
        ctx.execute(hand, run_hand)
        comm.settle()
        reference.copy_(x)
        ctx.execute(torchs, run_torch)
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
