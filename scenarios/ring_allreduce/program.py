"""Lesson 1's Program: each iteration's barrier, the hand-made all-reduce, torch's beside it.

`build(params)`: per iteration, a barrier, then the chosen algorithm (the ring's
or the tree's steps from runtime.engine.collectives, one Action per step and rank,
or one all-reduce per rank costed by its formula above STEPWISE_MAX_RANKS ranks or
for `builtin`), then a barrier and torch's own all_reduce on the same data
(series "reference").

Imports: runtime's pure part and the lesson's params (the UI imports this).
"""

from __future__ import annotations

from dataclasses import replace

from runtime.engine import collectives
from runtime.sim.program import Action, Program, barriers
from scenarios.ring_allreduce.params import REFERENCE, RingParams


def build(params: RingParams) -> Program:
    n, algorithm = params.ranks, params.algorithm
    group = list(range(n))
    members = tuple(group)  # one shared tuple: the simulator keys collectives by it
    program = Program(n, name="ring-allreduce")
    for step in range(params.repeat):
        prefix = f"it{step}."
        program.extend(
            barriers(
                f"{prefix}{algorithm}.barrier", members, series=algorithm, phase="start", step=step
            )
        )
        if not params.stepwise:
            # One action per rank, costed by the algorithm's formula.
            label = "all_reduce" if algorithm == "builtin" else f"{algorithm} all_reduce"
            program.extend(
                _all_reduce(f"{prefix}allreduce", members, params.size, algorithm, label, step)
            )
        else:
            if algorithm == "ring":
                schedule = collectives.ring_all_reduce(
                    group, params.numel, params.itemsize, prefix=prefix, step=step
                )
            else:
                schedule = collectives.tree_all_reduce(group, params.size, prefix=prefix, step=step)
            for rank in group:
                program.extend(replace(a, series=algorithm) for a in schedule[rank])
        # torch's own all_reduce on the same data, after a barrier, in every iteration:
        # measured side by side with the hand-made one, so drifts in the machine's load
        # hit both alike (and the learner sees both on one timeline).
        program.extend(
            barriers(
                f"{prefix}{REFERENCE}.barrier",
                members,
                series=REFERENCE,
                phase=REFERENCE,
                step=step,
            )
        )
        reference = _all_reduce(
            f"{prefix}{REFERENCE}.all_reduce",
            members,
            params.size,
            REFERENCE,
            "torch all_reduce",
            step,
        )
        program.extend(reference)
    return program


def _all_reduce(
    name: str, members: tuple[int, ...], nbytes: int, series: str, label: str, step: int
) -> list[Action]:
    """One all_reduce action per rank, costed by its algorithm's formula."""
    algorithm = series if series != REFERENCE else "builtin"
    phase = "all-reduce" if series != REFERENCE else REFERENCE
    template = Action("", 0, "all_reduce", label, bytes=nbytes, group=members, step=step)
    template = replace(template, algorithm=algorithm, series=series, phase=phase)
    return [replace(template, id=f"{name}@r{rank}", rank=rank) for rank in members]
