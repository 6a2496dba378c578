"""`predict` at any scale it accepts (issue 12, items 3 to 5).

- Lumped predictions agree with simulating every Action, where both run: the
  metrics (to 1e-9, relative) and every drawn span that stands for an action.
- The slow commands of the issue finish, lumped and saying so; Daly's interval
  is given for any save cost; values past any meaning are refused in one line.
- Every lesson's `predict`, driven with arbitrary parameter strings within and
  beyond each knob's bounds: exit 0, or exit 2 with one line; never a traceback.
  How long they take is measured in benchmarks/predict_scale.py, not asserted here.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from conftest import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_hostile_replay import cli

from runtime.sim.costmodel import CostModel
from runtime.sim.profiles import PROFILES
from runtime.sim.simulate import simulate
from runtime.sim.trace import Timeline
from scenarios.failure_resume import interval
from scenarios.failure_resume import lumped as resume_lumped
from scenarios.metrics import Metric
from scenarios.params import Knob
from scenarios.pipeline import lumped as pipeline_lumped
from scenarios.registry import LESSONS, get_lesson
from scenarios.ring_allreduce import lumped as ring_lumped
from scenarios.zero import lumped as zero_lumped

MODELS = {
    "cpu": PROFILES["cpu-default"],
    "two-cores": replace(PROFILES["cpu-default"], cores=2),  # ranks share cores
    "nodes": PROFILES["h100-nvlink"],  # 8 ranks per node, slower links between nodes
    # As calibrated here: a compute right after a wait pays a wake-up (Corrections.wake)
    "woken": replace(PROFILES["cpu-default"], cores=2).corrected(wake=1e-4),
}


def close(a: Any, b: Any) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(close(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)
    return a == b


def assert_same_metrics(want: list[Metric], got: list[Metric]) -> None:
    assert [(m.name, m.series, m.category) for m in got] == [
        (m.name, m.series, m.category) for m in want
    ]
    for w, g in zip(want, got, strict=True):
        assert close(w.value, g.value) and close(w.predicted, g.predicted), (w, g)


def assert_drawn_spans_are_simulated(full: Timeline, drawn: Timeline, scale: float) -> int:
    """Every drawn span that stands for an action is that action's simulated span (times
    to 1e-9 of the makespan); returns how many were compared."""
    spans = full.by_action()
    compared = 0
    for span in drawn.spans:
        if span.action_id is None:
            assert span.kind == "lumped" or span.label.count("×") == 1, span
            continue
        twin = spans[span.action_id]
        assert {**span.to_dict(), "start": 0, "end": 0} == {**twin.to_dict(), "start": 0, "end": 0}
        assert abs(span.start - twin.start) <= 1e-9 * scale, (span, twin)
        assert abs(span.end - twin.end) <= 1e-9 * scale, (span, twin)
        compared += 1
    return compared


def full_prediction(name: str, raw: dict[str, str], model: CostModel) -> tuple:
    lesson = get_lesson(name)
    params = lesson.parse(raw, "predict")
    model = lesson.prepare_model(params, model)
    full = simulate(lesson.build(params), model)
    return lesson, params, model, full, lesson.metrics(params, full, None)


# -- lumped and unlumped agree -------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(
    "raw",
    [
        {"ranks": "64", "repeat": "4"},  # every ring step simulated in iteration 1
        {"ranks": "64", "repeat": "3", "algorithm": "tree"},
        {"ranks": "100", "repeat": "3"},  # past 64 ranks: rank 0 stands for all
        {"ranks": "37", "repeat": "2", "algorithm": "builtin", "size": "1GiB"},
    ],
)
def test_ring_lumped_agrees_with_every_step(raw: dict[str, str], model: str) -> None:
    lesson, params, prepared, full, want = full_prediction("ring-allreduce", raw, MODELS[model])
    lumped = ring_lumped.lumped(params, prepared)
    assert_same_metrics(want, lesson.metrics(params, lumped.timeline, None))
    assert assert_drawn_spans_are_simulated(full, lumped.timeline, full.makespan) > 0
    assert lumped.timeline.end == pytest.approx(full.end, rel=1e-9)  # R identical iterations


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(
    "raw",
    [
        {"ranks": "64"},  # the model's units, every action drawn
        {"ranks": "100", "stage": "zero3,ddp", "steps": "3"},  # past 64 ranks: one unit
        {"ranks": "4", "layers": "70", "stage": "ddp,zero2,zero3"},  # one bar per kind
        {"ranks": "3", "params": "1000003", "steps": "3", "precision": "mixed"},
    ],
)
def test_zero_rank_zero_stands_for_all(raw: dict[str, str], model: str) -> None:
    lesson, params, prepared, full, want = full_prediction("zero", raw, MODELS[model])
    lumped = zero_lumped.lumped(params, prepared)
    assert_same_metrics(want, lesson.metrics(params, lumped.timeline, None))
    assert_drawn_spans_are_simulated(full, lumped.timeline, full.makespan)
    assert {s.rank for s in lumped.timeline.spans} == {0}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(
    "raw",
    [
        {"steps": "200", "checkpoint_every": "7", "sharding": "zero1"},
        {"steps": "200", "checkpoint_every": "1", "ranks": "8"},
        {"steps": "200", "checkpoint_every": "300"},  # no checkpoint at all
        {"steps": "201", "checkpoint_every": "50", "ranks": "1", "microbatches": "1"},
        # the step before the last wrote a checkpoint: drawn, it must follow one (wake-up)
        {"steps": "202", "checkpoint_every": "50"},
        {"steps": "200", "checkpoint_every": "2"},  # every other step after a checkpoint
    ],
)
def test_failure_resume_extrapolated_steps_agree_with_200_simulated(
    raw: dict[str, str], model: str
) -> None:
    lesson, params, prepared, full, want = full_prediction("failure-resume", raw, MODELS[model])
    lumped = resume_lumped.lumped(params, prepared)
    assert_same_metrics(want, lesson.metrics(params, lumped.timeline, None))
    compared = assert_drawn_spans_are_simulated(full, lumped.timeline, full.makespan)
    assert compared < len(full.spans) // 10  # a few steps drawn, the rest one bar per rank
    assert lumped.timeline.makespan == pytest.approx(full.makespan, rel=1e-9)


@pytest.mark.parametrize("model", [*MODELS, "unit"])
@pytest.mark.parametrize(
    "raw",
    [
        {"schedule": "gpipe,1f1b,interleaved,zb-h1"},
        {
            "schedule": "interleaved,1f1b",
            "stages": "8",
            "microbatches": "16",
            "chunks": "4",
            "layers": "32",
        },
        {"schedule": "zb-h1,gpipe", "stages": "16", "microbatches": "5", "layers": "16"},
        {
            "schedule": "1f1b",
            "stages": "4",
            "microbatches": "64",
        },  # some slots lumped in the drawing
    ],
)
def test_pipeline_fast_path_agrees_with_the_program(raw: dict[str, str], model: str) -> None:
    profile = PROFILES["unit"] if model == "unit" else MODELS[model]
    lesson, params, prepared, full, want = full_prediction("pipeline", raw, profile)
    fast = pipeline_lumped.lumped(params, prepared)
    assert_same_metrics(want, fast.metrics or [])
    assert assert_drawn_spans_are_simulated(full, fast.timeline, full.makespan) > 0


def test_pipeline_draws_the_edges_of_a_long_schedule() -> None:
    raw = {"schedule": "1f1b", "stages": "64", "microbatches": "256", "layers": "64"}
    params = get_lesson("pipeline").parse(raw, "predict")
    drawn = pipeline_lumped.lumped(params, PROFILES["unit"]).timeline
    between = [s for s in drawn.spans if s.kind == "lumped"]
    assert len(between) == params.stages and all(s.series == "1f1b" for s in between)


# -- the issue's slow commands, and what is said -------------------------------------------
SLOW = [
    ("zero", "-p", "dp=1048576", "-p", "params=70B"),
    ("zero", "-p", "dp=1048576", "-p", "params=1T", "--hardware", "h100-nvlink"),
    ("zero", "--ranks", "10000"),
    ("zero", "-p", "layers=4096"),
    ("failure-resume", "-p", "steps=100000", "-p", "checkpoint_every=7"),
    ("failure-resume", "-p", "steps=1000000", "-p", "sharding=zero1"),
    ("pipeline", "-p", "schedule=interleaved", "-p", "stages=32", "-p", "microbatches=256",
     "-p", "chunks=2", "-p", "layers=64"),
    ("pipeline", "-p", "schedule=interleaved", "-p", "stages=64", "-p", "microbatches=256",
     "-p", "chunks=4", "-p", "layers=256"),
    ("ring-allreduce", "--ranks", "4096", "-p", "repeat=50", "-p", "size=1TiB"),
    ("ring-allreduce", "--ranks", "64", "-p", "repeat=50"),
]  # fmt: skip


@pytest.mark.parametrize("command", SLOW, ids=lambda c: " ".join(c))
def test_the_slow_commands_of_the_issue_finish_and_say_they_lumped(command: tuple) -> None:
    status, out, err = cli("predict", *command, "--json")
    assert status == 0, err
    facts = {m["name"]: m.get("value") for m in json.loads(out)["metrics"]}
    assert facts["lumped"] is True and facts["lumped_formula"]


@pytest.mark.parametrize("name", LESSONS)
def test_a_lesson_at_its_default_is_simulated_action_by_action(name: str) -> None:
    status, out, err = cli("predict", name, "--json")
    assert status == 0, err
    assert "lumped" not in {m["name"] for m in json.loads(out)["metrics"]}


@pytest.mark.parametrize(
    ("mtbf", "save_cost", "restart_cost", "daly"),
    # Daly, √(2CM)·(1 + √x/3 + x/9) − C with x = C/(2M), worked out apart from the code
    # below 2·MTBF (C = 300 s and 1740 s, M = 900 s); the MTBF itself from C = 2M on.
    [
        ("15m", "5m", "0s", 548.455199184),
        ("15m", "29m", "1m", 799.829546632),
        ("15m", "31m", "0s", 900.0),
        ("1ms", "1h", "1h", 0.001),
    ],
)
def test_daly_for_any_save_cost(mtbf: str, save_cost: str, restart_cost: str, daly: float) -> None:
    """Daly's interval below 2·MTBF, τ = MTBF beyond it; the Monte-Carlo says what it capped."""
    pairs = [f"mtbf={mtbf}", f"save_cost={save_cost}", f"restart_cost={restart_cost}"]
    status, out, err = cli(
        "predict", "failure-resume", *(x for p in pairs for x in ("-p", p)), "--json"
    )
    assert status == 0, err
    doc = json.loads(out)
    m = {d["name"]: d.get("value") for d in doc["metrics"]}
    assert m["daly_interval_s"] == pytest.approx(daly, rel=1e-9)
    assert "monte_carlo_capped" in m  # these regimes are past the uncapped budget


def test_the_monte_carlo_agrees_with_the_expectation_where_it_caps() -> None:
    study = interval.study(300.0, 900.0)  # mtbf=15m, save_cost=5m
    assert study.capped and "shorter" in study.capped
    for sim, exact in zip(study.overhead_simulated, study.overhead_expected, strict=True):
        assert sim == pytest.approx(exact, rel=0.05)
    assert study.simulated_optimal_interval == pytest.approx(study.daly, rel=0.05)


@pytest.mark.parametrize(
    ("lesson", "pair", "bounds"),
    [
        ("failure-resume", "mtbf=1e400", "from 0.001s to 100000h"),
        ("ring-allreduce", "size=1e400", "from 1 B to 1 TiB"),
        ("zero", "gpu_memory=1e400", "from 0 B to 512 TiB"),
        ("zero", "params=1e400", "from 1 to 1000T"),
        ("failure-resume", "steps=1000001", "from 1 to 1000000"),
    ],
)
def test_values_past_any_meaning_are_refused_in_one_line(
    lesson: str, pair: str, bounds: str
) -> None:
    status, out, err = cli("predict", lesson, "-p", pair)
    field = pair.split("=")[0]
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and f"{field} must be" in err and bounds in err, err


# -- arbitrary parameter strings --------------------------------------------------------------
NOISE = ["", "abc", "-1", "0", "1e400", "-1e400", "nan", "inf", "1e308", "1.5", "9" * 30, "1,2"]
# Each lesson at the largest sizes `predict` accepts, for the fuzzer to start from.
LARGEST = {
    "ring-allreduce": {"ranks": "4096", "repeat": "50", "size": "1TiB"},
    "zero": {"ranks": "1048576", "params": "1000T", "layers": "4096", "steps": "5"},
    "why-distribute": {"params": "10T", "gpus": "65536", "gpus_per_node": "64", "top": "64"},
    "failure-resume": {"steps": "1000000", "ranks": "64", "microbatches": "64"},
    "mixed-precision": {
        "ranks": "1048576",
        "steps": "1000000",
        "layers": "96",
        "hidden": "12288",
        "bucket_cap": "1KiB",
    },
    "pipeline": {
        "schedule": "interleaved",
        "stages": "64",
        "microbatches": "256",
        "chunks": "4",
        "layers": "4096",
    },
    "tensor-parallel": {
        "tp": "64",
        "sp": "on",
        "layers": "22",
        "hidden": "8192",
        "heads": "64",
        "seq": "4096",
        "vocab": "65536",
    },
    "inference": {
        "mode": "tp,pp,replicas",
        "ranks": "4",
        "requests": "1000",
        "output_len": "4",
        "prompt_len": "20",
        "layers": "64",
        "heads": "64",
        "hidden": "4096",
        "gpus": "4096",
    },
}


def knob_values(knob: Knob, noisy: bool) -> st.SearchStrategy[str]:
    """Strings for one knob: inside its bounds, at them (the predict maxima too), and,
    when `noisy`, past them and text that is no value at all."""
    noise = st.sampled_from(NOISE)
    if knob.kind in ("choice", "choices"):
        names = st.sampled_from(knob.choices)
        listed = st.lists(names, min_size=1, max_size=4).map(",".join)
        return st.one_of(names, listed, noise) if noisy else names
    if knob.kind == "text":  # a short syntax: its own examples
        examples = st.sampled_from(("auto", *getattr(knob, "examples", ())))
        return st.one_of(examples, noise) if noisy else examples
    if knob.kind == "count":
        digits = st.integers(1, 10**16 if noisy else 10**15).map(str)
        suffixed = st.tuples(st.integers(1, 999), st.sampled_from("kMBT"))
        suffixed = suffixed.map(lambda x: f"{x[0]}{x[1]}")
        return st.one_of(st.just("auto"), digits, suffixed, *([noise] if noisy else []))
    low = knob.minimum if knob.minimum is not None else 0
    edges = [low, knob.maximum, knob.predict_maximum]
    top = max(v for v in [*edges, low + 10] if v is not None)
    near = [v + d for v in edges if v is not None for d in ((-1, 0, 1) if noisy else (0,))]
    if knob.kind == "int":
        at = st.sampled_from([str(int(v)) for v in near])
        inside = st.integers(int(low), int(top)).map(str)
        return st.one_of(inside, at, noise) if noisy else st.one_of(inside, at)
    unit = {"bytes": ["", "KiB", "MiB", "GiB", "TiB"], "duration": ["s", "ms", "min", "h"]}
    number = st.floats(0, float(top) * (2 if noisy else 1), allow_nan=False)
    if knob.kind == "float":  # a plain number, no unit
        return st.one_of(number.map(lambda v: f"{v:g}"), *([noise] if noisy else []))
    typed = st.tuples(number.map(lambda v: f"{v:g}"), st.sampled_from(unit[knob.kind]))
    at = st.sampled_from([f"{v:g}" for v in near])
    return st.one_of(typed.map("".join), at, *([noise] if noisy else []))


@st.composite
def predict_commands(draw: st.DrawFn) -> list[str]:
    """`predict LESSON -p k=v …`: mostly values within bounds (a fifth of the commands
    also get values past them or no value at all), often from the largest sizes."""
    name = draw(st.sampled_from(sorted(LESSONS)))
    noisy = draw(st.integers(0, 4)) == 0
    knobs = LESSONS[name].params.knobs()
    raw = dict(LARGEST[name]) if draw(st.booleans()) else {}
    chosen = draw(st.lists(st.sampled_from(knobs), max_size=4, unique_by=lambda k: k[0]))
    for field, knob in chosen:
        raw[field] = draw(knob_values(knob, noisy))
    args = ["predict", name, *(x for k, v in raw.items() for x in ("-p", f"{k}={v}"))]
    return [*args, "--json"] if draw(st.booleans()) else args


@settings(
    max_examples=examples(120),  # all 120 under HYPOTHESIS_PROFILE=ci (tests/conftest.py)
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(predict_commands())
def test_predict_exits_0_or_2_in_one_line(args: list[str]) -> None:
    """Any predict command ends in exit 0 (strict JSON with --json) or 2 (one line). How
    long each takes is benchmarks/predict_scale.py's to measure (each command in a fresh
    process, medians of several runs); a hang ends at pytest-timeout's bound."""
    status, out, err = cli(*args)  # an exception (a traceback) fails the test
    assert status in (0, 2), (args, status, err)
    event(f"{args[1]}: exit {status}")
    if status == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith("playground: error:"), err
    elif "--json" in args:
        json.loads(out)  # strict JSON
