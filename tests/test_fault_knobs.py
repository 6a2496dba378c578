"""Faults from the app's form (issue 40, item 3): each lesson's fault knobs, off by default,
turned into the same fault specs as the CLI's `--fault`, refused naming the knob when they
cannot be honoured, predicted (a slow rank), and run for real from the CLI and from lesson
3's form: a kill at step 12 restarts once and ends bitwise equal to an uninterrupted run.
"""

from __future__ import annotations

import pytest
from test_failure_resume import run
from test_lesson_screen import SIZE, open_lesson, wait_until
from textual.widgets import Collapsible

from playground import session
from playground.usage import param_error_text
from scenarios.params import ParamError
from scenarios.registry import get_lesson

FAULT_KNOBS = {
    "failure-resume": ("fault", "fault_rank", "fault_step"),
    "ring-allreduce": ("slow_rank", "slow_factor"),
    "mixed-precision": ("overflow_step", "overflow_rank"),
}


@pytest.mark.parametrize("name", sorted(FAULT_KNOBS))
def test_fault_knobs_are_off_by_default_in_a_folded_group_and_explained(name: str) -> None:
    lesson = get_lesson(name)
    groups = dict(lesson.params.knob_groups())
    assert tuple(knob for knob, _ in groups["faults"]) == FAULT_KNOBS[name]
    assert lesson.faults(lesson.parse({}, "run")) == []
    for knob in FAULT_KNOBS[name]:
        assert set(lesson.help(knob)) == {"es", "en"}


@pytest.mark.parametrize(
    ("name", "raw", "specs"),
    [
        ("failure-resume", {"fault": "kill"}, ["kill:rank=2,step=12"]),
        ("failure-resume", {"fault": "hang", "fault_rank": "3", "fault_step": "7"},
         ["hang:rank=3,step=7"]),
        # Off, its rank and step are not checked: ranks=2 leaves fault_rank=2 alone.
        ("failure-resume", {"ranks": "2"}, []),
        ("ring-allreduce", {"slow_factor": "3"}, ["slow:rank=1,factor=3"]),
        ("ring-allreduce", {"slow_rank": "0", "slow_factor": "1.5"}, ["slow:rank=0,factor=1.5"]),
        ("mixed-precision", {"overflow_step": "3"}, ["overflow:step=3,rank=0"]),
        ("mixed-precision", {"overflow_step": "2", "overflow_rank": "1"},
         ["overflow:step=2,rank=1"]),
    ],
)  # fmt: skip
def test_each_lessons_faults_of_gives_the_clis_specs(name: str, raw: dict, specs: list) -> None:
    lesson = get_lesson(name)
    params = lesson.parse(raw, "run")
    assert lesson.faults(params) == specs
    # The params round-trip with their faults (the ranks and saved runs read them back).
    assert lesson.parse(params.to_dict(), "run") == params


@pytest.mark.parametrize(
    ("name", "raw", "field", "english", "spanish"),
    [
        ("failure-resume", {"fault": "kill", "fault_rank": "4"}, "fault_rank",
         "must be below ranks=4", "debe ser menor que ranks=4"),
        ("failure-resume", {"fault": "hang", "fault_step": "31"}, "fault_step",
         "must be in 1..30", "debe estar en 1..30"),
        ("failure-resume", {"fault": "crash"}, "fault", "must be one of none, kill, hang",
         "debe ser uno de none, kill, hang"),
        ("ring-allreduce", {"slow_factor": "2", "slow_rank": "4"}, "slow_rank",
         "must be below ranks=4", "debe ser menor que ranks=4"),
        ("ring-allreduce", {"slow_factor": "2", "algorithm": "builtin"}, "slow_factor",
         "algorithm=ring or tree", "algorithm=ring o tree"),
        ("ring-allreduce", {"slow_factor": "0.5"}, "slow_factor", "from 1 to 100",
         "de 1 a 100"),
        ("mixed-precision", {"overflow_step": "9"}, "overflow_step", "must be in 1..8",
         "debe estar en 1..8"),
        ("mixed-precision", {"overflow_step": "3", "overflow_rank": "2"}, "overflow_rank",
         "must be below ranks=2", "debe ser menor que ranks=2"),
        ("mixed-precision", {"overflow_step": "3", "precision": "bf16"}, "overflow_step",
         "add fp16 to precision", "añada fp16 a precision"),
    ],
)  # fmt: skip
def test_bad_fault_knobs_are_refused_naming_the_knob_in_both_languages(
    name: str, raw: dict, field: str, english: str, spanish: str
) -> None:
    for mode in ("run", "predict"):
        with pytest.raises(ParamError) as caught:
            get_lesson(name).parse(raw, mode)  # type: ignore[arg-type]
        assert caught.value.field == field
        for language, needle in (("en", english), ("es", spanish)):
            line = param_error_text(caught.value, language)
            assert needle in line and "\n" not in line, line


def test_the_cli_refuses_a_bad_fault_knob_with_one_line(capsys) -> None:
    from playground.cli import main

    assert main(["predict", "failure-resume", "-p", "fault=kill", "-p", "fault_rank=9"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fault_rank=9" in err, err


def test_a_slow_rank_from_the_form_is_predicted_slowed() -> None:
    """`predict` slows the straggler as a run with the same fault does (session.run: the
    prepared model, slowed by the fault's factor)."""
    from runtime.sim.costmodel import slowed
    from runtime.sim.profiles import get_profile

    plain = session.predict("ring-allreduce", {"ranks": "4"}, hardware="cpu-default")
    slow = session.predict(
        "ring-allreduce", {"ranks": "4", "slow_factor": "3"}, hardware="cpu-default"
    )
    assert dict(slow.profile.slow) == {1: 3.0} and not plain.profile.slow
    assert slow.predicted.makespan > plain.predicted.makespan
    lesson, params = slow.lesson, slow.params
    model = slowed(lesson.prepare_model(params, get_profile("cpu-default")), {1: 3.0})
    assert slow.predicted.spans == lesson.predict(params, model)[0].spans


def test_torchrun_refuses_a_fault_knob_before_any_rendezvous(tmp_path, monkeypatch, capsys):
    from scenarios import torchrun

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    out = str(tmp_path / "out")
    assert torchrun.main(["ring-allreduce", "-p", "slow_factor=2", "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "slow:rank=1,factor=2" in err, err


@pytest.mark.ranks
def test_a_kill_knob_from_the_cli_restarts_once_and_ends_bitwise() -> None:
    doc, _ = run("-p", "fault=kill", "-p", "fault_step=12")
    m = doc["m"]
    assert doc["params"]["fault"] == "kill" and doc["params"]["fault_rank"] == 2
    assert m["restarts"] == 1 and m["resumed_from_steps"] == [10]
    assert m["bitwise_equal_to_uninterrupted"] is True
    failures = [mark["label"] for mark in doc["marks"] if mark["kind"] == "failure"]
    assert "rank 2 killed (SIGKILL) in step 12" in failures[0]


@pytest.mark.ranks
async def test_a_kill_set_in_lesson_3s_form_restarts_once_and_ends_bitwise() -> None:
    """The issue's Done-means: in the app, a kill at step 12 from the form restarts once and
    ends `bitwise_equal_to_uninterrupted yes`; the lesson's first challenge is met."""
    from playground.app import PlaygroundApp
    from playground.widgets.param_form import ParamForm

    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot, "failure-resume")
        assert screen.query_one("#group-faults", Collapsible).collapsed  # folded, off
        form = screen.query_one("#form", ParamForm)
        form.set_value("fault", "kill")
        await pilot.pause()
        assert form.values is not None and form.values.faults.specs() == ["kill:rank=2,step=12"]
        await pilot.press("r")
        await wait_until(
            lambda: (
                not screen.running
                and screen.outcome is not None
                and screen.outcome.measured is not None
            ),
            timeout=400,
        )
        outcome = screen.outcome
        metrics = {m.name: m.value for m in outcome.metrics}
        assert metrics["restarts"] == 1 and metrics["lost_steps"] <= 2
        assert metrics["bitwise_equal_to_uninterrupted"] is True
        # The timeline marks the failure (✕) and the restart.
        kinds = [mark.kind for mark in outcome.measured.marks]
        assert "failure" in kinds and "restart" in kinds
        verdicts = {v.challenge.id: v.met for v in screen.verdicts}
        assert verdicts["kill-12"] is True


async def test_a_wrong_fault_knob_unfolds_its_group_and_is_named_under_its_field() -> None:
    """An error line is mounted under its field the first time the field is wrong (the
    form holds none before), unfolds the folded group around it, says the next error in
    the same line, and is hidden once the field is right."""
    from textual.widgets import Static

    from playground.app import PlaygroundApp
    from playground.widgets.param_form import ParamForm

    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot, "mixed-precision")
        form = screen.query_one("#form", ParamForm)
        group = screen.query_one("#group-faults", Collapsible)
        assert group.collapsed and not form.query(".error").exclude("#error-form")
        for typed in ("-5", "abc"):
            form.set_value("overflow_step", typed)
            await pilot.pause()
            [line] = form.query("#error-overflow_step").results(Static)
            assert line.has_class("shown") and f"overflow_step={typed}" in str(line.content)
        assert not group.collapsed
        row = form.query_one("#param-overflow_step").parent
        assert row is not None and row.parent is not None
        siblings = list(row.parent.children)
        assert siblings[siblings.index(row) + 1] is line  # right under its field
        form.set_value("overflow_step", "2")
        await pilot.pause()
        assert not line.has_class("shown") and form.values is not None
