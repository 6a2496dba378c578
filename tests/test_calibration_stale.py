"""runtime.fit.conditions: when a calibration no longer describes this machine (made
before its last boot, or at a load average unlike now's), and the before-run interval
from the spread it measured (the model at its fast and slow ends). Pure: no ranks."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import msgspec
import pytest

from playground import session
from playground.saved_profile import ProfileDoc
from runtime.fit import conditions
from runtime.fit.conditions import Conditions, Spread, Staleness, staleness
from runtime.sim.costmodel import CostModel
from runtime.sim.profiles import PROFILES
from runtime.sim.simulate import simulate

CALIBRATED = Conditions(calibrated_at=1_000_000.0, booted_at=900_000.0, load1=0.4)


@pytest.mark.parametrize(
    ("booted_at", "load", "verdict"),
    [
        (900_000.0, 0.4, "fresh"),  # the same boot, the same load
        (900_000.0, 1.3, "fresh"),  # 0.9 more: within LOAD_ABS
        (900_000.0, 1.5, "load"),  # 1.1 more: over LOAD_ABS and over half of 0.4
        (1_000_500.0, 0.4, "rebooted"),  # booted after it was calibrated
        (1_000_500.0, 9.0, "rebooted"),  # the reboot says it first, whatever the load
        (None, 0.4, "fresh"),  # no /proc: the boot test is skipped
        (900_000.0, None, "fresh"),  # no load average: that test is skipped
    ],
)
def test_staleness_with_fixed_boot_times_and_loads(booted_at, load, verdict) -> None:
    said = staleness(CALIBRATED, booted_at, load)
    assert said.verdict == verdict
    assert said.stale == (verdict in ("rebooted", "load"))
    assert Staleness.from_dict(said.to_dict()) == said


def test_the_load_threshold_is_absolute_and_relative() -> None:
    busy = Conditions(calibrated_at=1.0, load1=4.0)
    assert staleness(busy, 0.5, 5.5).verdict == "fresh"  # 1.5 apart: under half of 4
    assert staleness(busy, 0.5, 6.5).verdict == "load"  # 2.5 apart: over both
    assert staleness(busy, 0.5, 1.9).verdict == "load"  # quieter counts as well
    assert conditions.load_differs(0.0, 1.01) and not conditions.load_differs(0.0, 1.0)


def test_an_older_calibration_without_conditions_is_unknown_and_loads() -> None:
    model = PROFILES["cpu-default"]
    assert conditions.of(model) is None and conditions.ends(model) is None
    assert staleness(None, 1.0, 1.0).verdict == "unknown"
    assert not staleness(None, 1.0, 1.0).stale
    # A named profile is no calibration: nothing to judge.
    assert conditions.staleness_now(model) is None
    older = replace(model, name="calibrated:host/gloo/n=2")
    assert conditions.staleness_now(older).verdict == "unknown"


def test_conditions_round_trip_and_a_malformed_record_is_unknown() -> None:
    recorded = Conditions(1e9, 9e8, 0.75, Spread((0.9, 1.3), (0.7, 1.8)), {"alpha": (1e-4, 3e-3)})
    assert Conditions.from_dict(json.loads(json.dumps(recorded.to_dict()))) == recorded
    doc = recorded.to_dict()
    for bad in (
        {**doc, "schema": 2},  # another shape
        {**doc, "calibrated_at": "yesterday"},
        {**doc, "calibrated_at": math.inf},
        [],
        None,
    ):
        assert Conditions.from_dict(bad) is None
    # A spread whose fast end is above 1 (or not a pair) is not one: the interval is unknown.
    for spread in ({"compute": [1.2, 1.5], "communication": [0.9, 1.1]}, {"compute": 3}):
        assert Conditions.from_dict({**doc, "spread": spread}).spread is None
    assert Conditions.from_dict({**doc, "load1": -1}).load1 is None


def test_boot_time_is_read_from_proc_stat(tmp_path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3\nintr 5\nbtime 1796536115\nprocesses 12\n")
    assert conditions.boot_time(stat) == 1796536115.0
    stat.write_text("cpu  1 2 3\nbtime soon\n")
    assert conditions.boot_time(stat) is None
    assert conditions.boot_time(tmp_path / "absent") is None
    now = conditions.boot_time()  # this machine's, where it has a /proc
    assert now is None or 0 < now < 1e12


def with_spread(model, compute: tuple[float, float], links: tuple[float, float]):
    recorded = Conditions(1e9, 9e8, 0.5, Spread(compute, links))
    return replace(model, details={**model.details, "conditions": recorded.to_dict()})


@pytest.mark.parametrize("name", ["ring-allreduce", "pipeline", "zero"])
def test_the_interval_is_the_program_at_the_spreads_ends(name: str) -> None:
    """Every cost scaled alike scales the makespan alike; the fast end is never slower
    than the model, the slow end never faster."""
    lesson, params = session.resolve(name, {}, "run")
    base = PROFILES["cpu-default"]
    model = lesson.prepare_model(params, with_spread(base, (0.5, 2.0), (0.5, 2.0)))
    program = lesson.build(params)
    mid = simulate(program, model).makespan
    fast, slow = (simulate(program, end).makespan for end in conditions.ends(model))
    assert fast == pytest.approx(0.5 * mid, rel=1e-6) and slow == pytest.approx(2 * mid, rel=1e-6)
    # Compute and links apart: still low ≤ the model ≤ high.
    model = lesson.prepare_model(params, with_spread(base, (0.9, 1.2), (0.6, 1.9)))
    mid = simulate(program, model).makespan
    fast, slow = (simulate(program, end).makespan for end in conditions.ends(model))
    assert fast <= mid <= slow and fast < slow


def test_scaled_moves_compute_and_links_apart() -> None:
    model = replace(PROFILES["cpu-default"], compute={"F": 2.0}, flops_per_s=10.0)
    model = model.corrected(wake=1.0, dispatch=0.5, send_issue=4.0)
    end = conditions.scaled(model, compute=2.0, links=3.0)
    assert end.compute == {"F": 4.0} and end.flops_per_s == 5.0
    assert (end.alpha, end.beta, end.gamma) == pytest.approx(
        (3 * model.alpha, 3 * model.beta, 3 * model.gamma)
    )
    assert end.corrections.wake == 2.0 and end.corrections.dispatch == 1.0
    assert end.corrections.send_issue == 12.0
    assert end.collective_scale == model.collective_scale  # a ratio to the formula: kept


def test_a_saved_profile_keeps_the_conditions_and_the_runs_verdict() -> None:
    recorded = Conditions(1e9, 9e8, 0.5, Spread((0.9, 1.2), (0.7, 1.6)), {"gamma": (1e-11, 2e-11)})
    verdict = staleness(recorded, 9e8, 2.0)
    model = replace(
        PROFILES["cpu-default"],
        details={
            "points": [[1, 2]],
            "conditions": recorded.to_dict(),
            "staleness": verdict.to_dict(),
        },
    )
    doc = msgspec.json.decode(json.dumps(model.describe()), type=ProfileDoc)
    back = CostModel.from_dict(msgspec.to_builtins(doc))
    assert conditions.of(back) == recorded
    assert Staleness.from_dict(back.details["staleness"]) == verdict
    # A file written before them reads as before: no conditions, the interval unknown.
    older = {k: v for k, v in model.describe().items() if k != "details"}
    plain = CostModel.from_dict(
        msgspec.to_builtins(msgspec.json.decode(json.dumps(older), type=ProfileDoc))
    )
    assert conditions.of(plain) is None and conditions.ends(plain) is None
    # Out of bounds: refused, never read.
    hostile = json.loads(json.dumps(model.describe()))
    hostile["details"]["conditions"]["spread"]["compute"] = [0.0, 1e9]
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(json.dumps(hostile), type=ProfileDoc)
