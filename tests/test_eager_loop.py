"""The eager loop (runtime.sim.eager) gives the ordered event loop's times.

Each lesson's default Program, compiled as runtime.sim.simulate compiles it, runs in
both loops: on profiles without shared cores the starts and ends are the same floats;
with ranks sharing two cores (and a wake-up after a wait, as calibrated here) they
agree to rounding; both paths of the eager loop are taken (inline, and each op through
its handler where a rank is slowed or a dispatch gap follows each op). The ops whose outcome depends on the order groups complete
(non-blocking collectives, synced computes) are refused. Pure: no ranks.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from runtime.sim.eager import run_ops_eagerly
from runtime.sim.eventloop import run_ops
from runtime.sim.ops import Compute, Drain, Launch, Synced
from runtime.sim.profiles import PROFILES
from runtime.sim.simulate import compile_program
from scenarios.registry import NAMES, get_lesson

SHARED = replace(PROFILES["cpu-default"], cores=2).corrected(wake=1e-4)
MODELS = {
    "cpu": PROFILES["cpu-default"],
    "nodes": PROFILES["h100-nvlink"],
    "shared": SHARED,  # the work clock of the shared cores, inline
    # The generic path (each op through its handler): a slowed rank, a dispatch gap.
    "slowed": replace(SHARED, slow=((1, 3.0),)),
    "gaps": PROFILES["cpu-default"].corrected(dispatch=2e-5),
}


def _compiled(name: str, model):
    lesson = get_lesson(name)
    params = lesson.parse({}, "predict")
    return compile_program(lesson.build(params), lesson.prepare_model(params, model))


def _eager_takes(ops) -> bool:
    return not any(isinstance(op, Launch | Drain | Synced) for row in ops for op in row)


@pytest.mark.parametrize("model", MODELS, ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_the_eager_loop_gives_the_ordered_loop_s_times(name: str, model: str) -> None:
    ops, groups = _compiled(name, MODELS[model])
    if not _eager_takes(ops):
        with pytest.raises(ValueError, match="ordered loop"):
            run_ops_eagerly(ops, groups, MODELS[model])
        return
    ordered = run_ops(ops, groups, MODELS[model])
    eager = run_ops_eagerly(ops, groups, MODELS[model])
    assert eager.pc == ordered.pc  # every rank ends where it ended
    if MODELS[model].cores is None:
        assert (eager.starts, eager.ends) == (ordered.starts, ordered.ends)
        return
    for ours, theirs in zip(eager.starts + eager.ends, ordered.starts + ordered.ends, strict=True):
        assert all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)
            for a, b in zip(ours, theirs, strict=True)
        )


def test_a_computes_end_and_a_start_at_one_instant_end_first_in_both_loops() -> None:
    # Two ranks, two cores shared by... one: rank 1's compute starts the instant rank 0's
    # ends; its rate must be the one after rank 0's end, in both loops.
    model = replace(PROFILES["unit"], cores=1)
    ops = [[Compute(1.0), Compute(1.0)], [Compute(2.0), Compute(0.5)]]
    ordered, eager = run_ops(ops, [], model), run_ops_eagerly(ops, [], model)
    assert eager.ends == ordered.ends and eager.starts == ordered.starts
