"""Lesson 3's Program: per step and rank, fwd+bwd, the gradient gather, Adam, a checkpoint.

`build_for(params, world)` gives the Program of one attempt on any world size: the
restart policy asks for it after a failure (on `resume_ranks` ranks), the lumped
prediction for a few of its steps.

Imports: runtime's pure part and the lesson's params (the UI imports this).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runtime.sim import formulas
from runtime.sim.effects import IO, NO_EFFECTS
from runtime.sim.program import Action, Program
from scenarios.failure_resume.params import ResumeParams
from scenarios.shape import FP32


def build(params: ResumeParams) -> Program:
    return build_for(params, params.ranks)


def build_for(params: ResumeParams, world: int, steps: Iterable[int] | None = None) -> Program:
    """The Program of one attempt on `world` ranks. Per step and rank: fwd+bwd of its
    microbatches, all-gather of the subtree gradient sums, the Adam step (of its shard
    with ZeRO-1, then an all-gather of parameters), and every `checkpoint_every` steps
    a checkpoint write. `steps`: only those (a lumped prediction draws a few), else all."""
    numel = params.parameters
    group = tuple(range(world))
    leaves = params.microbatches // world
    zero1 = params.sharding == "zero1"
    shard = max(formulas.even_split(numel, world))
    program = Program(world, name="failure-resume")
    every = params.checkpoint_every
    for k in range(1, params.steps + 1) if steps is None else steps:
        for r in group:
            # A collective is where a dead peer strands the survivors: the cursor on
            # one tells why everyone restarts.
            gather = dict(phase="collective", group=group, algorithm="builtin")
            program.add(_step(k, r, "fb", "compute", "fwd+bwd", cost_key="fb", work=leaves))
            grads = world * (numel + 1) * FP32
            program.add(_step(k, r, "grads", "all_gather", "gather grads", bytes=grads, **gather))
            work = shard / numel if zero1 else 1.0
            program.add(_step(k, r, "opt", "opt", "adam", cost_key="opt", work=work))
            if zero1:
                nbytes = world * shard * FP32
                program.add(
                    _step(k, r, "params", "all_gather", "gather params", bytes=nbytes, **gather)
                )
            if k % every == 0:  # a checkpoint step (checkpoint_steps)
                # The first checkpoint tells how one is written (atomicity); the later
                # ones, how often to pay for one (Young and Daly).
                phase = "checkpoint" if k == every else "interval"
                program.add(_step(k, r, "ckpt", "checkpoint", "checkpoint", phase, cost_key="ckpt"))
    return program


def _step(
    k: int, rank: int, op: str, kind: str, label: str, phase: str = "train", **more: Any
) -> Action:
    """The action `op` of training step k on `rank` (the rank code dispatches on `op`)."""
    return Action(
        id=f"s{k}.{op}@r{rank}",
        rank=rank,
        kind=kind,
        label=f"{label} {k}",
        step=k,
        phase=phase,
        # A checkpoint waits on the disk, not a core: the simulator shares no core with it.
        args=(("op", op),),
        effects=IO if op == "ckpt" else NO_EFFECTS,
        **more,
    )
