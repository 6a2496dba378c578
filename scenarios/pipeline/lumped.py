"""Lesson 5 at scale: `predict` of 64 stages, 256 microbatches and 4 chunks, fast.

The lesson's `lump` hook (scenarios.base.Lumped). Pipeline ranks differ (each
holds its own stages and waits on its neighbours), so nothing is lumped away:
every action is simulated, by the simulator's loop that steps each rank ahead on
its own clock wherever nothing needs the global one (runtime.sim.eager: the times of
runtime.sim.eventloop's, only the order ops ended in is not kept, and this module
draws its spans itself). What is saved is building them: a slot's Actions (the
receive, the compute, the send) differ from one microbatch to the next only in
their ids, so each rank's (kind, chunk) slot is built and compiled once
(scenarios.pipeline.schedules.slot_actions) and its ops repeated along the
rank's order of work (scenarios.pipeline.orders). The metrics come from the
ops' times (makespan, bubble) and from the orders (activations held, bytes
sent), what the full Program gives (with shared cores, up to rounding); what is drawn is each rank's
first and last compute slots of each schedule, with one bar for the slots
between. The lesson's tests check both against the full simulation.

Imports: runtime's pure part, the lesson contract and the lesson's params, metrics
(.report) and schedules (the UI imports this).
"""

from __future__ import annotations

import statistics
from itertools import accumulate, chain
from operator import add, itemgetter, sub

from runtime.sim.costmodel import CostModel
from runtime.sim.eager import run_ops_eagerly
from runtime.sim.eventloop import Run, gc_paused
from runtime.sim.ops import BLOCKING, Compute, Op, Send
from runtime.sim.program import Action, barriers
from runtime.sim.simulate import Compiler, span_for
from runtime.sim.trace import Span, Timeline
from scenarios.base import LUMP_ABOVE_ACTIONS, Lumped
from scenarios.metrics import Metric
from scenarios.pipeline.orders import ORDERS, Slot
from scenarios.pipeline.params import PipelineParams
from scenarios.pipeline.report import SchedulePrediction, schedule_metrics
from scenarios.pipeline.schedules import Shape, slot_actions

# A slot's compiled ops, its compute's index among them, bytes and messages sent, and
# whether its last op blocks.
_Template = tuple[tuple[Op, ...], int, int, int, bool]

# Compute slots drawn in all (each rank's first and last ones of each schedule).
DRAWN = 6000


def lump(params: PipelineParams, model: CostModel) -> Lumped | None:
    """The fast prediction when the Program has more than LUMP_ABOVE_ACTIONS Actions
    (None: small enough to build and simulate them all). A slot is a compute with at
    most a receive before it and a send after it."""
    if 3 * params.compute_slots <= LUMP_ABOVE_ACTIONS:
        return None
    return lumped(params, model)


class _Layout:
    """Where one schedule's ops sit in one rank's row."""

    def __init__(self, barrier: Action, at: int, slots: list[Slot]) -> None:
        self.barrier = barrier  # the schedule's barrier on this rank…
        self.at = at  # …and its index in the row
        self.slots = slots  # the rank's order of work
        self.compute: list[int] = []  # index of each slot's compute op
        self.end = at + 1  # one past the schedule's last op
        self.sent = 0  # bytes the rank sends in the schedule
        self.messages = 0


@gc_paused()
def lumped(params: PipelineParams, model: CostModel) -> Lumped:
    """Every action simulated from each rank's order of work; a part of them drawn."""
    p = params.stages
    compiler = Compiler(model)
    everyone = tuple(range(p))
    rows: list[list[Op]] = [[] for _ in range(p)]
    layouts: dict[str, list[_Layout]] = {}
    for schedule in params.schedule:
        shape = params.shape(schedule)
        start = barriers(f"{schedule}/barrier", everyone, series=schedule, phase="start")
        layouts[schedule] = []
        for rank in range(p):
            row = rows[rank]
            layout = _Layout(start[rank], len(row), ORDERS[schedule](shape, rank))
            row.append(compiler.op(start[rank]))
            waited = type(row[-1]) in BLOCKING  # the last op blocks: a compute after pays
            picked = _picked(compiler, schedule, shape, rank, layout.slots, waited)
            # Where each slot's compute lands in the row: the row's length before the
            # slot, plus the compute's place in it.
            before = accumulate(map(len, map(itemgetter(0), picked)), initial=len(row))
            layout.compute = list(map(add, before, map(itemgetter(1), picked)))
            row += chain.from_iterable(map(itemgetter(0), picked))
            layout.sent = sum(map(itemgetter(2), picked))
            layout.messages = sum(map(itemgetter(3), picked))
            layout.end = len(row)
            layouts[schedule].append(layout)
    run = run_ops_eagerly(rows, compiler.groups, model)  # the spans are drawn here, not in order
    out = [Metric("parameters", "count", params.model.parameters)]
    for schedule, per_rank in layouts.items():
        out += schedule_metrics(params, schedule, _prediction(schedule, per_rank, run), None, [])
    edge = max(2, DRAWN // (2 * p * len(params.schedule)))
    spans = [
        span
        for schedule, per_rank in layouts.items()
        for rank, layout in enumerate(per_rank)
        for span in _drawn(schedule, rank, p, layout, run, edge)
    ]
    formula = (
        f"every one of the {sum(map(len, rows)):,} actions simulated, each rank's slots "
        "compiled once per kind and chunk and repeated along its order of work (not built "
        f"one by one); drawn: each rank's first and last {edge} compute slots of each "
        "schedule, one bar for the slots between"
    )
    return Lumped(Timeline(spans=spans), formula, out)


def _picked(
    compiler: Compiler, schedule: str, shape: Shape, rank: int, slots: list[Slot], waited: bool
) -> list[_Template]:
    """Each slot's template along the rank's order of work. Whether a slot's compute pays
    the wake-up depends on how the slot before ended, so in general the templates chain;
    where no slot ends blocked (a send or a compute last, as in every schedule here) all
    but the first are looked up at once."""
    keys = list(map(itemgetter(0, 1), slots))
    made: dict[tuple[tuple[str, int], bool], _Template] = {}

    def template(key: tuple[str, int], after_wait: bool) -> _Template:
        if (key, after_wait) not in made:
            made[(key, after_wait)] = _template(compiler, schedule, shape, rank, key, after_wait)
        return made[(key, after_wait)]

    if not keys:
        return []
    first = template(keys[0], waited)
    table = {key: template(key, first[4]) for key in set(keys[1:])}
    if not any(t[4] != first[4] for t in table.values()):
        return [first, *map(table.__getitem__, keys[1:])]
    picked = [first]  # a slot that ends blocked: follow the chain
    for key in keys[1:]:
        picked.append(template(key, picked[-1][4]))
    return picked


def _template(
    compiler: Compiler, schedule: str, shape: Shape, rank: int, slot: tuple[str, int], waited: bool
) -> _Template:
    """A slot's ops compiled once: its receive, compute and send as any microbatch has
    them (`waited`: the op before blocked, so its compute pays the wake-up)."""
    actions = slot_actions(schedule, shape, rank, (*slot, 0), "", f"{schedule}/")
    ops = tuple(compiler.ops(actions, after_wait=waited))
    at = next(i for i, op in enumerate(ops) if type(op) is Compute)
    sends = [a.bytes for a, op in zip(actions, ops, strict=True) if type(op) is Send]
    return ops, at, sum(sends), len(sends), type(ops[-1]) in BLOCKING


def _prediction(schedule: str, per_rank: list[_Layout], run: Run) -> SchedulePrediction:
    """The schedule's makespan and bubble from the ops' times (a rank's ops start and end
    in order), and what its order of work holds and sends."""
    starts, ends = run.starts, run.ends
    first = min(starts[r][layout.at + 1] for r, layout in enumerate(per_rank))
    last = max(ends[r][layout.end - 1] for r, layout in enumerate(per_rank))
    total = last - first
    busy = [
        sum(map(sub, map(ends[r].__getitem__, at), map(starts[r].__getitem__, at)))
        for r, at in enumerate(layout.compute for layout in per_rank)
    ]
    bubble = 1.0 - statistics.fmean(busy) / total if total > 0 else 0.0
    # Activations held: one more after each F, one fewer once its microbatch's B (ZB-H1:
    # its W) has run.
    held = {"F": 1, "B": 0, "W": 0, "W" if schedule == "zb-h1" else "B": -1}
    peaks = [
        max(accumulate(map(held.__getitem__, map(itemgetter(0), layout.slots)), initial=0))
        for layout in per_rank
    ]
    sent = [layout.sent for layout in per_rank]
    return SchedulePrediction(total, bubble, peaks, sent, sum(x.messages for x in per_rank))


def _drawn(schedule: str, rank: int, p: int, layout: _Layout, run: Run, edge: int) -> list[Span]:
    """The rank's barrier, its first and last `edge` compute slots, a bar between."""
    starts, ends = run.starts[rank], run.ends[rank]
    spans = [span_for(layout.barrier, starts[layout.at], ends[layout.at])]
    count = len(layout.slots)
    shown = range(count) if count <= 2 * edge else [*range(edge), *range(count - edge, count)]
    for j in shown:
        kind, chunk, mb = layout.slots[j]
        stage, i = chunk * p + rank, layout.compute[j]
        spans.append(
            Span(
                rank,
                kind,
                f"{kind}{mb}",
                starts[i],
                ends[i],
                action_id=f"{schedule}/{kind}.s{stage}.mb{mb}",
                series=schedule,
                stage=stage,
                microbatch=mb,
                chunk=chunk,
            )
        )
    if count > 2 * edge:
        between = f"slots {edge + 1}–{count - edge} (×{count - 2 * edge}, each simulated)"
        first, last = layout.compute[edge], layout.compute[count - edge - 1]
        spans.append(Span(rank, "lumped", between, starts[first], ends[last], series=schedule))
    return spans
