"""Lesson 1's Program: each iteration's barrier, the hand-made all-reduce, torch's beside it.

`build(params)`: per iteration, a barrier, then the chosen algorithm (the ring's
or the tree's steps from runtime.engine.collectives, one Action per step and rank,
or one all-reduce per rank costed by its formula above STEPWISE_MAX_RANKS ranks or
for `builtin`), then a barrier and torch's own all_reduce on the same data
(series "reference"). The first WARMUP_ITERATIONS iterations (steps 0..W-1) are the
same actions in the warm-up series (runtime.engine.workers.WARMUP_SERIES); the `repeat`
timed ones follow (steps W..W+repeat-1). What sets the reference apart from the
hand-made algorithm is its phase, "reference", in warm-up and timed iterations alike.

Imports: runtime's pure part and the lesson's params (the UI imports this).
"""

from __future__ import annotations

from dataclasses import replace

from runtime.engine import collectives
from runtime.engine.workers import WARMUP_SERIES
from runtime.sim.program import Action, Program, barriers
from scenarios.ring_allreduce.params import REFERENCE, WARMUP_ITERATIONS, RingParams


def build(params: RingParams) -> Program:
    n, algorithm = params.ranks, params.algorithm
    group = list(range(n))
    members = tuple(group)  # one shared tuple: the simulator keys collectives by it
    program = Program(n, name="ring-allreduce")
    for step in range(WARMUP_ITERATIONS + params.repeat):
        prefix = f"it{step}."
        warm = step < WARMUP_ITERATIONS
        hand = WARMUP_SERIES if warm else algorithm
        program.extend(
            barriers(f"{prefix}{algorithm}.barrier", members, series=hand, phase="start", step=step)
        )
        if not params.stepwise:
            # One action per rank, costed by the algorithm's formula.
            label = "all_reduce" if algorithm == "builtin" else f"{algorithm} all_reduce"
            program.extend(
                _all_reduce(
                    f"{prefix}allreduce", members, params.size, algorithm, label, step, hand
                )
            )
        else:
            if algorithm == "ring":
                schedule = collectives.ring_all_reduce(
                    group, params.numel, params.itemsize, prefix=prefix, step=step, series=hand
                )
            else:
                schedule = collectives.tree_all_reduce(
                    group, params.size, prefix=prefix, step=step, series=hand
                )
            for rank in group:
                program.extend(schedule[rank])
        # torch's own all_reduce on the same data, after a barrier, in every iteration:
        # measured side by side with the hand-made one, so drifts in the machine's load
        # hit both alike (and the learner sees both on one timeline).
        reference = WARMUP_SERIES if warm else REFERENCE
        program.extend(
            barriers(
                f"{prefix}{REFERENCE}.barrier",
                members,
                series=reference,
                phase=REFERENCE,
                step=step,
            )
        )
        program.extend(
            _all_reduce(
                f"{prefix}{REFERENCE}.all_reduce",
                members,
                params.size,
                REFERENCE,
                "torch all_reduce",
                step,
                reference,
            )
        )
    return program


def _all_reduce(
    name: str,
    members: tuple[int, ...],
    nbytes: int,
    algorithm: str,
    label: str,
    step: int,
    series: str,
) -> list[Action]:
    """One all_reduce action per rank, costed by its algorithm's formula (REFERENCE:
    torch's own, phase "reference")."""
    reference = algorithm == REFERENCE
    template = Action("", 0, "all_reduce", label, bytes=nbytes, group=members, step=step)
    template = replace(
        template,
        algorithm="builtin" if reference else algorithm,
        series=series,
        phase=REFERENCE if reference else "all-reduce",
    )
    return [replace(template, id=f"{name}@r{rank}", rank=rank) for rank in members]
