"""Lesson 1's warm-up iterations: in the Program, on the timeline (hatched in the Gantt and
the HTML export, named as a series), predicted like the others and left out of the
lesson's times on both sides; and the real run's hand ring, planned before the clock
(runtime.engine.comm.Comm.plan), still equals torch's all_reduce."""

from __future__ import annotations

import statistics

import pytest
import torch

from playground import session
from playground.export.timeline import build_figure
from playground.widgets.gantt_draw import WARMUP_FILL, GanttRow, row_strip
from runtime.engine.comm import Comm
from runtime.engine.workers import WARMUP_SERIES
from runtime.sim.program import past_warmup
from runtime.sim.simulate import simulate
from scenarios.metrics import find
from scenarios.registry import get_lesson
from scenarios.ring_allreduce import lumped
from scenarios.ring_allreduce.lesson import HOOKS, iteration_times
from scenarios.ring_allreduce.params import REFERENCE, WARMUP_ITERATIONS, RingParams
from scenarios.ring_allreduce.program import build

LESSON = get_lesson("ring-allreduce")


def params(**raw: str) -> RingParams:
    return RingParams.parse(raw, "predict")


def shape(action):
    """What an action does, whatever its iteration: kind, peers, bytes, chunk, phase."""
    return (action.kind, action.src, action.dst, action.bytes, action.chunk, action.phase)


@pytest.mark.parametrize("algorithm", ["ring", "tree", "builtin"])
def test_the_warm_up_iterations_come_first_and_do_what_the_timed_ones_do(algorithm) -> None:
    p = params(ranks="3", size="12KiB", algorithm=algorithm, repeat="4")
    program = build(p)
    for rank, acts in enumerate(program.ranks):
        steps = sorted({a.step for a in acts})
        assert steps == list(range(WARMUP_ITERATIONS + 4))
        for a in acts:
            warm = a.step < WARMUP_ITERATIONS
            assert (a.series == WARMUP_SERIES) == warm, a.id
            if not warm:
                assert a.series == (REFERENCE if a.phase == REFERENCE else algorithm)
        by_step = [[shape(a) for a in acts if a.step == s] for s in steps]
        assert all(s == by_step[0] for s in by_step), f"rank {rank}: iterations differ"
    assert HOOKS.warmup_steps(p) == WARMUP_ITERATIONS
    # The refinement after a run leaves out exactly the warm-up's actions.
    left_out = [a for a in program.actions() if not past_warmup(a.step, WARMUP_ITERATIONS)]
    assert {a.series for a in left_out} == {WARMUP_SERIES}


def test_the_metrics_read_the_timed_iterations_of_the_prediction() -> None:
    p = params(ranks="4", size="1MiB", repeat="3")
    outcome = session.predict("ring-allreduce", {"ranks": "4", "size": "1MiB"}, "cpu-default")
    timeline = outcome.predicted
    warm = [s for s in timeline.spans if s.series == WARMUP_SERIES]
    assert {s.step for s in warm} == set(range(WARMUP_ITERATIONS))
    assert len(iteration_times(timeline, "ring")) == p.repeat
    time_s = next(m for m in outcome.metrics if m.name == "time_s")
    assert time_s.predicted == statistics.median(iteration_times(timeline, "ring"))
    # The timed iterations begin once the warm-up is over, on every rank.
    first_timed = min(s.start for s in timeline.spans if s.series == "ring")
    assert max(s.end for s in warm) <= first_timed


def test_the_lumped_prediction_counts_the_warm_up_too() -> None:
    p = params(ranks="4", size="1MiB", repeat="5")
    model = LESSON.prepare_model(p, session.select_model("cpu-default", "auto", 4, nearest=True))
    full = simulate(build(p), model)
    lump = lumped.lumped(p, model)
    assert max(s.end for s in lump.timeline.spans) == pytest.approx(
        max(s.end for s in full.spans), rel=1e-9
    )
    timed = iteration_times(full, "ring")
    assert iteration_times(lump.timeline, "ring") == pytest.approx(timed[:1], rel=1e-9)


def test_the_gantt_hatches_the_warm_up_and_the_html_export_marks_it() -> None:
    outcome = session.predict("ring-allreduce", {"ranks": "2", "repeat": "2"}, "cpu-default")
    row = GanttRow("r0", 0, True)
    for span in sorted((s for s in outcome.predicted.spans if s.rank == 0), key=lambda s: s.start):
        row.add(span)
    end = max(s.end for s in row.spans)
    warm_end = max(s.end for s in row.spans if s.series == WARMUP_SERIES)
    text = "".join(seg.text for seg in row_strip(row, [], 200, 0.0, end / 200, -1))
    split = int(200 * warm_end / end) - 1
    assert WARMUP_FILL in text[7 : 7 + split]  # the label column first
    assert WARMUP_FILL not in text[7 + split + 2 :]
    figure = build_figure(outcome)
    hatched = [
        (trace.marker.pattern.shape, trace.base)
        for trace in figure.data
        if trace.marker.pattern is not None and trace.marker.pattern.shape is not None
    ]
    assert hatched, "no bar of the export is hatched"
    for shapes, bases in hatched:
        warm = [b for shape_, b in zip(shapes, bases, strict=True) if shape_ == "/"]
        timed = [b for shape_, b in zip(shapes, bases, strict=True) if shape_ == ""]
        assert warm and timed and max(warm) < min(timed)  # the first bars, and only those
    names = [a.text for a in figure.layout.annotations]
    assert f"<b>{WARMUP_SERIES}</b>" in names


def test_the_texts_say_how_many_warm_up_iterations_there_are() -> None:
    words = {"en": {2: "two", 1: "one", 3: "three"}, "es": {2: "dos", 1: "una", 3: "tres"}}
    for language in ("en", "es"):
        assert f"{WARMUP_ITERATIONS} " in LESSON.texts.help["repeat"][language]
        body = LESSON.texts.narrative[0].body[language]
        assert words[language][WARMUP_ITERATIONS] in body


def test_a_plan_makes_its_buffers_once_per_tensor() -> None:
    """Planning every iteration before the clock: the chunk views and the two receive
    buffers are the same objects for every plan of the same tensor."""
    p = params(ranks="4", size="4KiB", repeat="3")
    acts = build(p).ranks[1]
    work = torch.zeros(p.numel)
    comm = Comm()
    plans = [
        comm.plan([a for a in acts if a.step == s and a.phase != REFERENCE], work)
        for s in range(WARMUP_ITERATIONS + 3)
    ]
    first, *rest = plans
    steps = list(first.steps.values())
    assert len(steps) == 2 * (4 - 1)
    for plan in rest:
        for a, b in zip(steps, plan.steps.values(), strict=True):
            assert a.outgoing is b.outgoing and a.target is b.target and a.incoming is b.incoming
    reduce_buffers = {id(s.incoming) for s in steps if s.reduce}
    assert len(reduce_buffers) == 2  # two alternate: an early receive never lands in use
    for s in steps:
        assert s.outgoing.data_ptr() >= work.data_ptr()  # views of the tensor itself
        if not s.reduce:
            assert s.incoming is s.target  # the all-gather receives in place
    followed = [s.following for s in steps[:-1]]
    assert followed == steps[1:]


@pytest.mark.ranks
def test_a_real_run_shows_its_warm_up_and_sums_like_torch() -> None:
    outcome = session.run("ring-allreduce", {"ranks": "2", "size": "64KiB", "repeat": "2"})
    spans = outcome.measured.spans
    assert {s.step for s in spans if s.series == WARMUP_SERIES} == set(range(WARMUP_ITERATIONS))
    assert len(iteration_times(outcome.measured, "ring")) == 2
    assert find(outcome.metrics, "equals_builtin").value is True
    # Every Action of the Program has its Span, warm-up included.
    program = build(outcome.params)
    assert sorted(s.action_id for s in spans) == sorted(a.id for a in program.actions())
