"""Rank side of lesson 3: data-parallel training that checkpoints, dies on cue, and resumes.

Called inside each rank process by runtime.engine.worker with a RankContext. Under the
restart supervisor (runtime.engine.supervise) `ctx.attempt` says which attempt this
is, where checkpoints live, which one to resume from, and the run's time
origin, so that every attempt's spans share one clock. Under torchrun it is
None: checkpoints then go to a directory named after the elastic run, and a
worker restarted by `torchrun --max-restarts` resumes from the newest valid
one there by itself.

It runs this rank's Actions of the `failure-resume` Program
(scenarios.failure_resume.program.build_for), one Trainer method per Action
(scenarios.failure_resume.trainer), a checkpoint every `checkpoint_every` steps.

Faults (ctx.faults): `kill|hang:rank=R,step=K` fire in the middle of step K
(after fwd+bwd, before the gather), `kill:rank=R,during=checkpoint` after half
of this rank's first file of that checkpoint is on disk. Each writes a record
for the supervisor first (`fault<index>.json` in the attempt's fired_dir), then
sends the signal to its own process.

At the end, the same processes train the same seed again from scratch without
checkpoints or faults (the uninterrupted run) and compare everything with
torch.equal. One thread per rank: a matmul's summation order may depend on the
thread count, and bit-for-bit needs the same order.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.distributed as dist

from runtime.engine import checkpoint as ckpt
from runtime.engine.faults import Fault
from runtime.engine.files import make_private_dir, write_text_atomic
from runtime.engine.rundirs import runs_root
from runtime.engine.worker import RankContext
from runtime.sim.program import Action
from scenarios.failure_resume.params import ResumeParams, ResumeResult
from scenarios.failure_resume.trainer import Trainer

Context = RankContext[ResumeParams]
# The cost keys of build_for a run measures (fb per leaf), to refine the prediction.
COST_KEYS = ("fb", "opt", "ckpt")


# -- faults ------------------------------------------------------------------------------
def _fire(fault: Fault, step: int, where: str, ctx: Context, fired_dir: Path) -> None:
    """Record the fault for the supervisor, then signal this very process."""
    record = {
        "index": fault.index,
        "kind": fault.kind,
        "rank": ctx.rank,
        "step": step,
        "where": where,
        "t_ns": time.perf_counter_ns(),
    }
    write_text_atomic(fired_dir / f"fault{fault.index}.json", json.dumps(record))
    ctx.flush()
    os.kill(os.getpid(), signal.SIGKILL if fault.kind == "kill" else signal.SIGSTOP)
    time.sleep(3600)  # a stopped rank never gets here; a killed one never returns


def _checkpoint_fault_step(fault: Fault, params: ResumeParams) -> int:
    """The checkpoint a during=checkpoint fault hits: the one at its step, else the second
    of the run (so there is an older one to fall back to), else the first."""
    if fault.step:
        return fault.step
    every = params.checkpoint_every
    return 2 * every if 2 * every <= params.steps else every


# -- where this attempt keeps its checkpoints --------------------------------------------
def _places(ctx: Context) -> tuple[Path, Path, Path | None]:
    """(checkpoint root, fired-fault records, checkpoint to resume from)."""
    attempt = ctx.attempt
    if attempt is not None:
        root, fired_dir = Path(attempt.checkpoint_dir), Path(attempt.fired_dir)
    else:  # torchrun: one directory per elastic run, shared by its restarts
        # Under the user's private runs folder, not a name anyone can guess in /tmp.
        run_id = os.environ.get("TORCHELASTIC_RUN_ID") or str(os.getppid())
        root = runs_root() / f"torchrun-checkpoints-{run_id}"
        fired_dir = root / "faults"
    make_private_dir(root)  # 0700; a symlink in its place is refused
    make_private_dir(fired_dir)
    if attempt is not None:
        return root, fired_dir, Path(attempt.resume) if attempt.resume else None
    return root, fired_dir, ckpt.newest_valid(root)[0]


def _start_clock(ctx: Context) -> None:
    """Every attempt draws on the first one's clock: its rank 0 writes time zero down."""
    ctx.start_clock()
    attempt = ctx.attempt
    if attempt is None:
        return
    if attempt.origin_ns is not None:
        ctx.t0_ns = attempt.origin_ns
    elif ctx.rank == 0:
        write_text_atomic(attempt.origin_file, json.dumps({"origin_ns": ctx.t0_ns}))


# -- the rank entry ------------------------------------------------------------------------
def run_rank(ctx: Context) -> ResumeResult:
    torch.set_num_threads(1)  # bit for bit: one summation order for every matmul
    params = ctx.params
    root, fired_dir, resume = _places(ctx)
    trainer = Trainer(params, ctx.world_size, ctx.rank, ctx.device)
    trainer.seed_everything()
    if resume is not None:
        trainer.load(resume)
    start = trainer.step
    mine = [f for f in ctx.faults if f.rank == ctx.rank and not f.timed]
    step_faults = {f.step: f for f in mine if f.during is None and f.step}
    save_faults = {_checkpoint_fault_step(f, params): f for f in mine if f.during}
    _start_clock(ctx)

    seconds: dict[str, list[float]] = defaultdict(list)
    own_leaves = params.microbatches // ctx.world_size

    def handle(action: Action) -> None:
        op, k = action.arg("op"), action.step
        # Compute in CPU seconds, what a core spends on it (the simulator shares the
        # cores among ranks itself); a checkpoint in wall seconds: it waits on the disk.
        clock = time.perf_counter if op == "ckpt" else time.process_time
        began = clock()
        if op == "fb":
            trainer.forward_backward()
            if k in step_faults:
                _fire(step_faults[k], k, "step", ctx, fired_dir)
        elif op == "grads":
            trainer.gather_grads()
        elif op == "opt":
            trainer.adam()
        elif op == "params":
            trainer.gather_params()
        elif op == "ckpt":
            fault = save_faults.get(k)
            hook = (lambda: _fire(fault, k, "checkpoint", ctx, fired_dir)) if fault else None
            trainer.save(root, hook)
        else:
            raise ValueError(f"failure-resume cannot run action {action.id}")
        elapsed = clock() - began
        seconds[op].append(elapsed / own_leaves if op == "fb" else elapsed)

    steps = sorted({a.step for a in ctx.actions if a.step is not None})
    for k in steps:
        if k <= start:
            continue
        ctx.execute([a for a in ctx.actions if a.step == k], handle)
        if ctx.rank == 0:
            ctx.sample("loss", trainer.losses[k])
        ctx.flush()  # every finished step reaches the parent before the next can fail

    reference, checks = _compare_with_uninterrupted(ctx, trainer)
    every_rank = torch.tensor([int(all(checks.values()))], device=ctx.device)
    dist.all_reduce(every_rank, op=dist.ReduceOp.MIN)
    last = params.steps
    return ResumeResult(
        bitwise_equal=bool(every_rank.item()),
        checks=checks,
        parameters_sha256=hashlib.sha256(trainer.flat.numpy().tobytes()).hexdigest(),
        optimizer_sha256=hashlib.sha256(
            trainer.exp_avg.numpy().tobytes() + trainer.exp_avg_sq.numpy().tobytes()
        ).hexdigest(),
        resumed_from_step=start,
        losses=[trainer.losses[k] for k in range(start + 1, last + 1)],
        final_loss=trainer.losses.get(last),
        final_loss_uninterrupted=reference.losses.get(last),
        compute_costs={op: statistics.median(v) for op, v in seconds.items() if op in COST_KEYS},
    )


def _compare_with_uninterrupted(ctx: Context, trainer: Trainer) -> tuple[Trainer, dict[str, bool]]:
    """The uninterrupted run: same seed, same code, same processes, no checkpoints; and
    every piece of state of the resumed run compared with it, bit for bit."""
    final_state = trainer.rng_state()
    reference = Trainer(ctx.params, ctx.world_size, ctx.rank, ctx.device)
    reference.seed_everything()
    for _ in range(ctx.params.steps):
        reference.train_step()
    checks = {
        "parameters": torch.equal(trainer.flat, reference.flat),
        "exp_avg": torch.equal(trainer.exp_avg, reference.exp_avg),
        "exp_avg_sq": torch.equal(trainer.exp_avg_sq, reference.exp_avg_sq),
        "optimizer_step": trainer.step == reference.step,
        "rng_states": final_state == reference.rng_state(),
        "data_position": (trainer.epoch, trainer.cursor, trainer.order)
        == (reference.epoch, reference.cursor, reference.order),
    }
    return reference, checks
