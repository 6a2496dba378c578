"""Lesson 3 at scale: `predict` of a million training steps, lumped.

The lesson's `lump` hook (scenarios.base.Lumped). Every rank runs the same
actions (their collectives over all ranks), so each step starts with every rank
in step, and all steps after the first take the same time t_step (the first,
t_first, starts on ranks that had not waited: no wake-up); a checkpoint step adds
the same t_checkpoint, and the step right after it what a wake-up after the
write adds beyond a usual step, t_after (0 where every step follows a wait: a
ZeRO-1 step ends with its all-gather). A few steps are simulated (the
first ones, the first checkpoint, the last step) and placed exactly where the
whole run puts them: step k > 1 starts at
t_first + (k−2)·t_step + ⌊(k−1)/every⌋·t_checkpoint + ⌊(k−2)/every⌋·t_after
(t_after: the wake-up a step right after a checkpoint pays beyond a usual one).
One bar per rank stands for the steps in between. The metrics read the same
numbers off this timeline as off the full one (the run's end, the mean step,
the median checkpoint); the lesson's tests check that they agree where both run.

Imports: runtime's pure part, the lesson contract and the lesson's params and Program
(the UI imports this).
"""

from __future__ import annotations

from dataclasses import replace

from runtime.sim.costmodel import CostModel
from runtime.sim.simulate import simulate
from runtime.sim.trace import Span, Timeline
from scenarios.base import LUMP_ABOVE_ACTIONS, Lumped
from scenarios.failure_resume.params import ResumeParams
from scenarios.failure_resume.program import build_for

# The first steps drawn as simulated (then the first checkpoint and the last step).
FIRST_STEPS = 3


def lump(params: ResumeParams, model: CostModel) -> Lumped | None:
    """The lumped prediction when the Program has more than LUMP_ABOVE_ACTIONS Actions
    (None: small enough to simulate them all)."""
    per_step = 4 if params.sharding == "zero1" else 3
    saves = params.steps // params.checkpoint_every
    if params.ranks * (params.steps * per_step + saves) <= LUMP_ABOVE_ACTIONS:
        return None
    return lumped(params, model)


def _with_predecessors(wanted: set[int], every: int) -> list[int]:
    """The steps to simulate: `wanted`, and where a step's predecessor among them wrote a
    checkpoint and its step before in the whole run did not (or the other way round),
    that step before too: a step right after a checkpoint pays a wake-up the others may
    not, so each drawn step must follow what it follows in the run."""
    shown = set(wanted)
    changed = True
    while changed:
        changed = False
        ordered = sorted(shown)
        for before, k in zip(ordered, ordered[1:], strict=False):
            if (before % every == 0) != ((k - 1) % every == 0):
                shown.add(k - 1)
                changed = True
    return sorted(shown)


def lumped(params: ResumeParams, model: CostModel) -> Lumped:
    """A few steps simulated, placed at their exact times; one bar per rank for the rest."""
    steps, every = params.steps, params.checkpoint_every
    after = min(every + 1, steps)  # the first step after a checkpoint
    wanted = {*range(1, min(steps, FIRST_STEPS) + 1), min(every, steps), after, steps}
    shown = _with_predecessors(wanted, every)
    simulated = simulate(build_for(params, params.ranks, shown), model).spans
    begin = {k: min(s.start for s in simulated if s.step == k) for k in shown}

    def took(k: int) -> float:  # step k, but for its checkpoint
        return max(s.end for s in simulated if s.step == k and s.kind != "checkpoint") - begin[k]

    # The first step starts on ranks that had not waited; a later one right after the
    # previous step's all-gather (ZeRO-1) or a checkpoint's write has its first compute
    # pay the model's wake-up: what a step after a checkpoint pays beyond a usual one, `extra`.
    first_s = took(1)
    step_s = took(2) if steps > 1 else first_s
    extra = took(after) - step_s if after > every else 0.0
    writes = [s.duration for s in simulated if s.kind == "checkpoint"]
    checkpoint_s = writes[0] if writes else 0.0

    def start(k: int) -> float:  # where step k starts in the whole run
        later = max(0, k - 2) * step_s + (first_s if k > 1 else 0.0)
        # checkpoints written before step k, and the steps after one that ended before it
        return later + (k - 1) // every * checkpoint_s + max(0, k - 2) // every * extra

    spans = []
    for span in simulated:
        k = span.step or 0
        moved = start(k) - begin[k]
        spans.append(replace(span, start=span.start + moved, end=span.end + moved))
    for a, b in zip(shown, shown[1:], strict=False):
        if b > a + 1:
            label = f"steps {a + 1}–{b - 1} (×{b - a - 1:,}, each a usual step)"
            spans += [Span(r, "lumped", label, start(a + 1), start(b)) for r in range(params.ranks)]
    formula = (
        f"every step is alike and ends with an all-gather over all ranks, so steps "
        f"{', '.join(map(str, shown))} are simulated and the {steps:,} steps placed exactly: "
        f"step k > 1 starts at t_first + (k−2)·t_step + ⌊(k−1)/{every}⌋·t_checkpoint "
        f"+ ⌊(k−2)/{every}⌋·t_after (t_first = {first_s:.6g} s, t_step = {step_s:.6g} s, "
        f"t_checkpoint = {checkpoint_s:.6g} s, t_after = {extra:.6g} s: what a step after "
        f"a checkpoint takes beyond t_step)"
    )
    return Lumped(Timeline(spans=spans), formula)
