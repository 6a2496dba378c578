"""Pipeline schedules (scenarios.pipeline.schedules and .orders): textbook numbers,
warm-up rules, validity, schedules as series."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runtime.sim.profiles import PROFILES
from runtime.sim.program import ProgramError
from runtime.sim.simulate import simulate
from scenarios.params import ParamError
from scenarios.pipeline import formulas, orders, schedules
from scenarios.pipeline.schedules import ScheduleError, Shape

UNIT = PROFILES["unit"]


def makespan(schedule: str, p: int, m: int, v: int = 1) -> float:
    timeline = simulate(schedules.build(schedule, Shape(p, m, v)), UNIT)
    return timeline.makespan


def compute_order(program, rank: int) -> list[tuple[str, int | None, int | None]]:
    return [
        (a.kind, a.chunk, a.microbatch) for a in program.ranks[rank] if a.kind in ("F", "B", "W")
    ]


@pytest.mark.parametrize(
    ("schedule", "p", "m", "v", "expected"),
    [
        ("gpipe", 4, 8, 1, 33.0),
        ("1f1b", 4, 8, 1, 33.0),
        ("interleaved", 4, 8, 2, 28.5),
        ("zb-h1", 4, 8, 1, 27.0),
        ("gpipe", 2, 1, 1, 6.0),
        ("1f1b", 3, 5, 1, 21.0),
        ("interleaved", 2, 4, 2, 13.5),
        ("interleaved", 4, 4, 2, 16.5),
    ],
)
def test_unit_makespans_are_the_textbook_ones(schedule, p, m, v, expected):
    assert makespan(schedule, p, m, v) == pytest.approx(expected)
    w = 1.0 if schedule == "zb-h1" else 0.0
    assert formulas.pipeline_makespan(schedule, p, m, v, 1.0, 2.0, w) == pytest.approx(expected)


def test_bubble_fraction_of_gpipe_and_1f1b_is_three_elevenths():
    for schedule in ("gpipe", "1f1b"):
        timeline = simulate(schedules.build(schedule, Shape(4, 8)), UNIT)
        busy = [
            sum(s.duration for s in timeline.spans if s.rank == r and s.kind in "FBW")
            for r in range(4)
        ]
        assert all(b == pytest.approx(24.0) for b in busy)
        assert 1 - busy[0] / timeline.makespan == pytest.approx(3 / 11)
    assert formulas.pipeline_bubble_fraction("gpipe", 4, 8) == pytest.approx(3 / 11)


@pytest.mark.parametrize(
    ("schedule", "v", "peaks"),
    [("gpipe", 1, [8, 8, 8, 8]), ("1f1b", 1, [4, 3, 2, 1]), ("zb-h1", 1, [4, 4, 4, 4])],
)
def test_peak_inflight(schedule, v, peaks):
    assert schedules.peak_inflight(schedules.build(schedule, Shape(4, 8, v))) == peaks


@pytest.mark.parametrize(("p", "m"), [(2, 1), (2, 5), (4, 2), (4, 8), (5, 3), (8, 16)])
def test_1f1b_warmup_is_min_of_p_minus_r_minus_1_and_m(p, m):
    program = schedules.build("1f1b", Shape(p, m))
    for rank in range(p):
        order = compute_order(program, rank)
        first_b = next(i for i, (kind, _, _) in enumerate(order) if kind == "B")
        warm = min(p - rank - 1, m)
        assert orders.warmup_1f1b(p, m, rank) == warm
        # warm-up forwards, then (while forwards remain) the 1F of 1F1B before the first B
        assert first_b == warm + (1 if warm < m else 0)
        steady = order[warm : warm + 2 * (m - warm)]
        assert [k for k, _, _ in steady] == ["F", "B"] * (len(steady) // 2)


def megatron_order(p: int, m: int, v: int, rank: int) -> list[tuple[str, int, int]]:
    """Megatron-LM's forward_backward_pipelining_with_interleaving, written out
    independently: warm-up count and get_model_chunk_id."""
    total = m * v
    warm = total if m == p else min((p - rank - 1) * 2 + (v - 1) * p, total)

    def unit(k: int, forward: bool) -> tuple[int, int]:
        chunk = (k % (p * v)) // p
        if not forward:
            chunk = v - chunk - 1
        group, offset = divmod(k, p * v)
        return chunk, group * p + offset % p

    out = [("F", *unit(k, True)) for k in range(warm)]
    for k in range(total - warm):
        out += [("F", *unit(k + warm, True)), ("B", *unit(k, False))]
    out += [("B", *unit(k, False)) for k in range(total - warm, total)]
    return out


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 4, 2), (2, 6, 3), (3, 9, 2)])
def test_interleaved_follows_megatrons_rule(p, m, v):
    program = schedules.build("interleaved", Shape(p, m, v))
    for rank in range(p):
        assert compute_order(program, rank) == megatron_order(p, m, v, rank)
        warm = orders.warmup_interleaved(p, m, v, rank)
        expected = m * v if m == p else min(2 * (p - rank - 1) + (v - 1) * p, m * v)
        assert warm == expected


def test_interleaved_places_stage_s_on_rank_s_mod_p():
    program = schedules.build("interleaved", Shape(3, 6, 2))
    for action in program.actions():
        if action.kind in ("F", "B"):
            assert action.stage % 3 == action.rank
            assert action.stage // 3 == action.chunk


@pytest.mark.parametrize("schedule", schedules.SCHEDULES)
@pytest.mark.parametrize(("p", "m", "v"), [(2, 2, 2), (2, 4, 2), (3, 6, 3), (4, 8, 2), (4, 12, 4)])
def test_every_schedule_validates_and_never_deadlocks(schedule, p, m, v):
    v = v if schedule == "interleaved" else 1
    program = schedules.build(schedule, Shape(p, m, v, activation_bytes=1024))
    program.validate()
    kinds = ("F", "B", "W") if schedule == "zb-h1" else ("F", "B")
    for kind in kinds:
        units = {(a.stage, a.microbatch) for a in program.actions() if a.kind == kind}
        assert units == {(s, j) for s in range(p * v) for j in range(m)}
    # with communication costs as well as with free ones
    costed = replace(UNIT, alpha=0.1, beta=1e-4)
    assert simulate(program, costed).makespan > simulate(program, UNIT).makespan


def test_messages_pair_per_channel():
    program = schedules.build("interleaved", Shape(2, 4, 2, activation_bytes=8))
    tags = {a.tag for a in program.actions() if a.is_p2p}
    assert tags == set(range(2 * 3))  # 3 boundaries between 4 stages, two directions each
    broken = schedules.build("1f1b", Shape(2, 2))
    recv = next(a for a in broken.ranks[1] if a.kind == "recv")
    broken.ranks[1].remove(recv)
    with pytest.raises(ProgramError, match="sends 2 message"):
        broken.validate()


@pytest.mark.parametrize(
    ("schedule", "shape", "rule", "field"),
    [
        ("1f1b", Shape(1, 4), "p >= 2", "stages"),
        ("gpipe", Shape(4, 0), "from 1 to 256", "microbatches"),
        ("gpipe", Shape(4, 257), "from 1 to 256", "microbatches"),
        ("interleaved", Shape(4, 6, 2), "multiple of p", "microbatches"),
        ("interleaved", Shape(4, 8, 1), "v >= 2", "chunks"),
        ("1f1b", Shape(4, 8, 2), "only the interleaved", "chunks"),
        ("pipedream", Shape(4, 8), "unknown schedule", "schedule"),
    ],
)
def test_invalid_combinations_name_the_rule_and_the_field(schedule, shape, rule, field):
    with pytest.raises(ScheduleError, match=rule) as caught:
        schedules.build(schedule, shape)
    assert isinstance(caught.value, ParamError) and caught.value.field == field


def test_several_schedules_run_one_after_the_other():
    program = schedules.build_many([("gpipe", Shape(4, 8)), ("1f1b", Shape(4, 8))])
    # every action, barriers included, carries its schedule as its series
    assert {a.series for a in program.actions()} == {"gpipe", "1f1b"}
    barriers = [a for a in program.actions() if a.kind == "barrier"]
    assert sorted(a.series for a in barriers) == ["1f1b"] * 4 + ["gpipe"] * 4
    for actions in program.ranks:  # each rank runs all of gpipe, then all of 1f1b
        series = [a.series for a in actions]
        assert series == sorted(series, key=["gpipe", "1f1b"].index)
    timeline = simulate(program, UNIT)
    ends = {name: max(s.end for s in timeline.of_series(name)) for name in ("gpipe", "1f1b")}
    assert ends["gpipe"] == pytest.approx(33.0)
    assert ends["1f1b"] == pytest.approx(66.0)
    assert timeline.of_series("gpipe") and timeline.of_series("1f1b")
