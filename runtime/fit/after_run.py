"""After a run: the prediction refined from what the ranks measured, as one policy.

docs/design.md's "after a run". The steps compose the run's own figures, in order:
the messages' latency (refine_p2p), then the collectives as the run timed them
(refine_collectives, fitted against that latency), then compute as its spans took
(refine_compute), the gaps between actions where the lesson has many small ones
(refine_dispatch), and last each rank's compute replayed as it ran (replay_compute).
A lesson chooses how through one `Refinement` in its hooks; it never switches steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runtime.fit.refine import refine_compute, refine_dispatch, refine_p2p
from runtime.fit.refine_collectives import refine_collectives
from runtime.fit.replay import replay_compute
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Program
from runtime.sim.simulate import simulate
from runtime.sim.trace import Timeline


@dataclass(frozen=True)
class Refinement:
    """How a lesson's prediction learns from its run.

    - `collectives`: "each" times every collective on its own; "chained" for a step that
      is a chain of many small collectives whose sum is what counts (each instance from
      its last member's arrival to its last member's end, the scale their mean).
    - `gaps`: "model" keeps the cost model's gap between two actions; "measured" adds the
      mean gap the ranks measured before each action, per series (a step of many small
      actions, where the executor's own Python between them is a noticeable share).
    - `measures`: what the ranks time, in the refined model's `source` ("unit costs").
    """

    collectives: Literal["each", "chained"] = "each"
    gaps: Literal["model", "measured"] = "model"
    measures: str = "compute costs"  # what a run measures, said in the refined model's source


def refine_after_run(
    model: CostModel,
    program: Program,
    measured: Timeline,
    policy: Refinement,
    *,
    warmup_steps: int = 0,
    restarted: bool = False,
) -> tuple[CostModel, CostModel]:
    """(refined, replayed): the cost model with the run's figures, and that model with
    each rank's compute replayed as it ran (what the after-run timeline is simulated
    with). After a restart the same Actions ran again, maybe on fewer ranks with more
    work each: their spans are no measure of the Program's compute, which stays."""
    refined = refine_p2p(model, program, measured)
    before = simulate(program, refined)
    refined = refine_collectives(
        refined,
        program,
        measured,
        before,
        chained=policy.collectives == "chained",
        warmup_steps=warmup_steps,
    )
    if restarted:
        return refined, refined
    refined = refine_compute(refined, program, measured, simulate(program, refined), warmup_steps)
    if policy.gaps == "measured":
        refined = refine_dispatch(refined, program, measured, warmup_steps)
    return refined, replay_compute(refined, program, measured, warmup_steps)
