"""Lesson 2 at scale: `predict` with up to a million ranks or thousands of layers, lumped.

The lesson's `lump` hook (scenarios.base.Lumped). Every rank of a stage runs
the same actions with the same costs, and every collective spans all of them
(data parallelism): they start together after the stage's barrier and stay in
lockstep, so rank 0 stands for all N of them (runtime.sim.simulate's
simulate_lockstep): each action starts when the one before it ends, a compute
takes its cost over the core share of N ranks computing at once, a collective
its α-β ring formula. The steps of a stage are identical (FSDP2's first Adam apart), so one is worked out
and repeated. A step of many units (a model of thousands of layers) is drawn as
one bar per kind of action (all the forwards, all the all-reduces…), laid end
to end: the step ends where its actions one after the other end. The stage's
makespan, all the metrics read off the timeline, is what simulating every
rank gives; the lesson's tests check that they agree where both run.

Imports: runtime's pure part, the lesson contract and the lesson's params, memory
accounting and Program (the UI imports this).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import accumulate
from operator import itemgetter

from runtime.sim.costmodel import CostModel
from runtime.sim.program import barriers
from runtime.sim.simulate import blocks, simulate_lockstep, span_for
from runtime.sim.trace import Span, Timeline
from scenarios.base import LUMP_ABOVE_ACTIONS, Lumped
from scenarios.zero import memory
from scenarios.zero.params import ZeroParams
from scenarios.zero.program import cost_key, plan_action, step_plan

# A step with more actions than this is drawn one bar per kind of action.
DRAWN_PER_STEP = 64
# An action of a step: (seconds, a compute?, does its rank block on it?)
Cost = tuple[float, bool, bool]
Plan = list[tuple[str, int | None, str, str]]  # scenarios.zero.program.step_plan


def lump(params: ZeroParams, model: CostModel) -> Lumped | None:
    """The lumped prediction when the Program has more than LUMP_ABOVE_ACTIONS Actions
    (None: small enough to simulate them all)."""
    units = len(memory.program_units(params))
    plans = {stage: step_plan(stage, units) for stage in params.stage}
    per_rank = sum(1 + params.steps * len(plan) for plan in plans.values())
    if params.ranks * per_rank <= LUMP_ABOVE_ACTIONS:
        return None
    return lumped(params, model, plans)


def lumped(params: ZeroParams, model: CostModel, plans: dict[str, Plan] | None = None) -> Lumped:
    """Rank 0 of every stage, standing for all the ranks in lockstep (`plans`: each
    stage's step_plan, when the caller has them)."""
    n = params.ranks
    # Every rank, without listing a million of them (the cost model reads a range's ends).
    group = range(n)
    numels = memory.program_units(params)
    plans = plans or {stage: step_plan(stage, len(numels)) for stage in params.stage}
    share = model.core_share(n)
    wake = model.corrections.wake / share
    by_unit: dict[tuple[str, int], Cost] = {}  # a unit's action costs the same in every stage
    by_size: dict[tuple[str, str, int], Cost] = {}  # (stage, kind, elements) of a collective
    others: dict[tuple[str, str, str | None], Cost] = {}  # a stage's own: Adam, FSDP2's F/B

    def costed(stage: str, item: tuple[str, int | None, str, str], step: int) -> Cost:
        action = plan_action(stage, step, 0, item, numels, group)
        if action.is_collective:
            seconds = model.collective_time(action)
        else:
            seconds = model.compute_time(action) / share
        return (seconds, action.is_compute, blocks(action))

    def cost(stage: str, item: tuple[str, int | None, str, str], step: int) -> Cost:
        # Each Action is built only for a key not costed yet: a model of thousands of
        # layers has a hundred thousand items, and building an Action for each would be
        # most of the prediction. A unit's collectives of one size cost the same (the
        # middle units all have one).
        kind, unit = item[0], item[1]
        if unit is None:
            key = (kind, stage, cost_key(stage, step, kind, unit))
            if key not in others:
                others[key] = costed(stage, item, step)
            return others[key]
        found = by_unit.get((kind, unit))
        if found is None:
            if cost_key(stage, step, kind, unit) is None:  # a collective
                size = (stage, kind, numels[unit])
                found = by_size.get(size) or by_size.setdefault(size, costed(stage, item, step))
            else:
                found = costed(stage, item, step)
            by_unit[(kind, unit)] = found
        return found

    spans: list[Span] = []
    t = 0.0
    for stage, plan in plans.items():
        start = barriers(f"{stage}/start", (0,), series=stage, phase=stage)[0]
        [barrier] = simulate_lockstep([replace(start, group=group)], model, n, t)
        spans.append(barrier)
        t = barrier.end
        # Step 0 and the others (the same, but for a first call's cost of its own); a
        # compute right after a collective (or the start barrier) pays the model's wake-up.
        # (a unit's cost is looked up here first: `cost` per item is the slow path)
        step0 = [by_unit.get(item[:2]) or cost(stage, item, 0) for item in plan]
        # Only a stage's own items (FSDP2's first Adam) cost differently after step 0.
        step1 = [
            cost(stage, item, 1) if item[1] is None else each
            for item, each in zip(plan, step0, strict=True)
        ]
        firsts = _woken(step0, True, wake)
        laters = _woken(step1, step0[-1][2], wake)
        if len(plan) <= DRAWN_PER_STEP:  # every action drawn, as the full simulation does
            for step in range(params.steps):
                durations = laters if step else firsts
                for item, each in zip(plan, durations, strict=True):
                    spans.append(
                        span_for(plan_action(stage, step, 0, item, numels, group), t, t + each)
                    )
                    t += each
        else:  # one bar per kind of action, the same in every step after the first
            drawn = [_by_kind(plan, firsts), _by_kind(plan, laters)]
            for step in range(params.steps):
                bars, length = drawn[min(step, 1)]
                for kind, label, begin, end in bars:
                    spans.append(Span(0, kind, label, t + begin, t + end, series=stage, step=step))
                t += length
    formula = (
        f"the {n:,} ranks of a stage run the same actions in lockstep (every collective spans "
        f"them all), so rank 0 stands for all: each action starts when the one before ends, "
        f"a compute takes its cost × max(1, N/cores), a collective its α-β ring formula; the "
        f"{params.steps} steps of a stage are identical (but FSDP2's first Adam)"
    )
    if any(len(plan) > DRAWN_PER_STEP for plan in plans.values()):
        formula += f"; a step of {len(numels):,} units is drawn one bar per kind of action"
    return Lumped(Timeline(spans=spans), formula)


def _woken(step: list[Cost], after_wait: bool, wake: float) -> list[float]:
    """A step's durations, a compute right after its rank blocked paying the wake-up
    (runtime.sim.simulate.Compiler.ops); `after_wait`: the rank blocked before the step."""
    out = []
    for seconds, compute, blocked in step:
        out.append(seconds + wake if after_wait and compute else seconds)
        after_wait = blocked
    return out


def _by_kind(
    plan: Plan, durations: list[float]
) -> tuple[list[tuple[str, str, float, float]], float]:
    """One step as one bar per kind of action, in the order the kinds first appear and
    laid end to end: (kind, label, start, end) from the step's start; and the step's
    length, its actions one after the other."""
    kinds = list(map(itemgetter(0), plan))
    total = dict.fromkeys(kinds, 0.0)  # in the order the kinds first appear
    for kind, seconds in zip(kinds, durations, strict=True):
        total[kind] += seconds
    count = Counter(kinds)
    *_, length = accumulate(durations, initial=0.0)  # added in order, as the steps run
    bars, t = [], 0.0
    for kind, seconds in total.items():
        bars.append((kind, f"{kind} ×{count[kind]:,}", t, t + seconds))
        t += seconds
    kind, label, begin, _ = bars[-1]
    bars[-1] = (kind, label, begin, length)
    return bars, length
