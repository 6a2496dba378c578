"""Each lesson's goal and challenges, the learner's progress, the legend and the help (issue 40).

No ranks here: the challenges a prediction meets (the lessons' arithmetic) are checked on
real predictions, right and wrong answers alike; the progress file is read as untrusted;
`playground progress` lists and resets; the Gantt's every glyph has its legend words,
and the help lists every key the lesson screen binds. The lesson screen is driven with
Pilot: it opens on its goal, and `n` walks every narrative step in order.
The runs that meet the other challenges are in tests/test_tmux_lessons.py.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from textual.widgets import Static

from playground import progress as store
from playground import session
from playground.app import PlaygroundApp
from playground.challenges import answer, check, goal_of
from playground.cli import main
from playground.i18n import catalog
from playground.screens.help import KEYS
from playground.screens.lesson import LessonScreen
from playground.widgets.gantt_draw import MARK_GLYPHS
from playground.widgets.legend import legend_content
from playground.widgets.narrative import step_starts
from scenarios.goals import AnswerError, Facts
from scenarios.registry import NAMES, get_lesson


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.mark.parametrize("name", NAMES)
def test_every_lesson_declares_its_goal_in_both_languages(name: str) -> None:
    goal = goal_of(get_lesson(name))
    assert goal is not None
    assert 2 <= len(goal.outcomes) <= 4 and 4 <= len(goal.challenges) <= 8
    assert any(c.ask is not None for c in goal.challenges)  # the learner predicts first
    assert 70 <= sum(minutes for _, minutes in goal.timings) <= 80  # a 70-80 minute lesson


# (lesson, params, challenge, right answer, wrong answer): the lessons' arithmetic.
PREDICTED = [
    ("why-distribute", {}, "bytes-per-param", "16", "12"),
    ("why-distribute", {"params": "7B"}, "seven-b", "no", "yes"),
    ("why-distribute", {"params": "70B", "gpus": "64", "gpu": "h100-80gb"},
     "seventy-b-pressure", "memory", "none"),
    ("zero", {"params": "7B", "precision": "mixed", "ranks": "8", "gpu_memory": "24GB"},
     "fits-24gb", "zero3", "zero2"),
    ("zero", {"params": "70B", "precision": "mixed", "ranks": "8", "gpu_memory": "80GB"},
     "seventy-b", "no", "yes"),
    ("failure-resume", {}, "young", "1138", "600"),
]  # fmt: skip


def _verdict(name: str, raw: dict, challenge_id: str, typed: str | None):
    outcome = session.predict(name, raw)
    goal = goal_of(outcome.lesson)
    progress = store.LessonProgress(1, name)
    challenge = goal.challenge(challenge_id)
    if typed is not None:
        answer(progress, challenge, typed)
    facts = Facts(outcome.params, tuple(outcome.metrics), ran=False)
    verdicts = check(goal, progress, facts)
    return next(v for v in verdicts if v.challenge is challenge), progress


@pytest.mark.parametrize(("name", "raw", "challenge", "right", "wrong"), PREDICTED)
def test_a_prediction_meets_an_arithmetic_challenge_only_with_the_right_answer(
    name: str, raw: dict, challenge: str, right: str, wrong: str
) -> None:
    verdict, progress = _verdict(name, raw, challenge, right)
    assert verdict.met is True and progress.state(challenge).met
    assert verdict.yours == right and verdict.measured is not None
    assert not progress.state(challenge).pending  # the prediction used the answer
    verdict, progress = _verdict(name, raw, challenge, wrong)
    assert verdict.met is False and not progress.state(challenge).met
    assert verdict.yours == wrong


def test_an_answer_is_asked_before_and_other_params_do_not_count() -> None:
    verdict, _ = _verdict("why-distribute", {}, "bytes-per-param", None)
    assert verdict.met is None  # no answer given first: not checked
    verdict, _ = _verdict("why-distribute", {"question": "minigpt"}, "seven-b", "no")  # not 7B
    assert verdict.met is False


def test_a_challenge_of_a_run_is_not_met_by_a_prediction_nor_by_a_saved_file() -> None:
    outcome = session.predict("ring-allreduce", {})
    goal = goal_of(outcome.lesson)
    progress = store.LessonProgress(1, "ring-allreduce")
    answer(progress, goal.challenge("bytes-4"), "6291456")
    facts = Facts(outcome.params, tuple(outcome.metrics), ran=False)
    assert all(v.met is None for v in check(goal, progress, facts))
    assert progress.state("bytes-4").pending  # still waits for a run
    predicted = Facts(outcome.params, tuple(outcome.metrics), ran=False)
    opened = check(goal_of(get_lesson("why-distribute")), store.LessonProgress(1, "x"),
                   predicted, prediction_counts=False)  # fmt: skip
    assert all(v.met is None for v in opened)


def test_an_answer_that_is_not_one_is_refused_in_both_languages() -> None:
    goal = goal_of(get_lesson("pipeline"))
    progress = store.LessonProgress(1, "pipeline")
    with pytest.raises(AnswerError) as number:
        answer(progress, goal.challenge("bubble"), "a third")
    assert "number" in number.value.texts["en"] and "número" in number.value.texts["es"]
    with pytest.raises(AnswerError) as choice:
        answer(progress, goal.challenge("inflight"), "zb-h1")
    assert "gpipe, 1f1b" in choice.value.texts["en"] and "gpipe" in choice.value.texts["es"]
    assert progress.state("inflight").answer is None
    seven_b = goal_of(get_lesson("why-distribute")).challenge("seven-b")
    assert answer(store.LessonProgress(1, "why-distribute"), seven_b, " Sí ") == "yes"


def test_progress_is_saved_private_and_read_back(_state: Path) -> None:
    progress = store.LessonProgress(1, "zero")
    progress.state("comm").met = True
    path = store.save(progress)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert store.load("zero").state("comm").met
    assert store.reset("zero") and not store.reset("zero")
    assert store.load("zero").challenges == {}


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b'{"version": 1, "lesson": "zero", "challenges": {"comm": {"answer": "\\u001b[2J"}}}',
        b'{"version": 1, "lesson": "pipeline", "challenges": {}}',
        b'{"version": 9, "lesson": "zero"}',
        b'{"version": 1, "lesson": "zero", "extra": 1}',
        b'{"version": 1, "lesson": "zero", "challenges": {"comm": {"answer": "'
        + b"9" * 99
        + b'"}}}',
        b" " * (store.LIMIT + 1),
    ],
)
def test_a_progress_file_that_is_not_ours_is_refused_in_one_line(_state: Path, content: bytes):
    path = store.path_of("zero")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(store.ProgressError) as refused:
        store.load("zero")
    for text in (str(refused.value), refused.value.es):
        assert "\n" not in text and "\x1b" not in text and "--reset zero" in text


def test_a_progress_file_that_is_a_device_is_refused(_state: Path) -> None:
    path = store.path_of("zero")
    path.parent.mkdir(parents=True)
    os.symlink("/dev/zero", path)
    with pytest.raises(store.ProgressError):
        store.load("zero")


def test_the_progress_command_lists_and_resets(capsys: pytest.CaptureFixture[str]) -> None:
    kept = store.LessonProgress(1, "pipeline")
    kept.state("inflight").met = True
    store.save(kept)
    assert main(["progress"]) == 0
    out = capsys.readouterr().out
    assert "pipeline: 1/5" in out and "✓ 3." in out
    assert main(["progress", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    lessons = {entry["lesson"]: entry for entry in doc["lessons"]}
    assert set(lessons) == set(NAMES) and lessons["pipeline"]["met"] == 1
    assert main(["progress", "--reset", "pipeline"]) == 0
    assert "forgotten" in capsys.readouterr().out
    assert main(["progress", "--reset", "no-such"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "use one of" in err


def test_every_glyph_of_the_timeline_has_its_legend_in_both_languages() -> None:
    for language in ("en", "es"):
        for kind in MARK_GLYPHS:
            assert f"app.legend_mark_{kind}" in catalog(language), (language, kind)
        text = str(legend_content(language, ["F", "all_reduce"]))
        for glyph, _style in MARK_GLYPHS.values():
            assert glyph in text
        for label in ("r0 ·p", "r0 ~c", "r0 ~pc", "all_reduce"):
            assert label in text


# How the help writes a Textual key name.
SHOWN = {
    "escape": "Esc", "left": "←", "right": "→", "plus": "+", "equals_sign": "+",
    "minus": "−", "shift+left": "⇧←", "shift+right": "⇧→", "home": "Home", "end": "End",
    "question_mark": "?", "pagedown": "PgDn", "pageup": "PgUp",
}  # fmt: skip


def test_the_help_lists_every_key_the_lesson_and_the_app_bind() -> None:
    shown = {token for keys, _ in KEYS for token in keys.split()}
    bound = {b.key for b in [*LessonScreen.BINDINGS, *PlaygroundApp.BINDINGS]}
    bound.add(PlaygroundApp.COMMAND_PALETTE_BINDING)
    for keys in bound:
        for key in keys.split(","):
            assert SHOWN.get(key, key) in shown, key
    for _, entries in KEYS:
        for entry in entries:
            assert entry in catalog("en") and entry in catalog("es")


@pytest.mark.parametrize("name", NAMES)
async def test_a_lesson_opens_on_its_goal_and_n_tells_every_step_in_order(name: str) -> None:
    app = PlaygroundApp(language="en")
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_lesson(name)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        narrative = screen.query_one("#narrative", Static)
        text = str(narrative.content)
        assert "Goal" in text and "Challenges (0/" in text
        steps = len(screen.lesson.narrative)
        gantt = screen.gantt
        spans = [s for row in gantt.rows if not row.predicted for s in row.spans] or [
            s for row in gantt.rows for s in row.spans
        ]
        starts = step_starts(screen.lesson, screen.actions, spans)
        seen = []
        for index in range(steps + 1):  # one more: it stays on the last
            await pilot.press("n")
            seen.append(str(narrative.content).split(" · ", 1)[0])
            if index < steps and starts[index] is not None:  # the cursor at its first event
                assert gantt.cursor == pytest.approx(starts[index])
        assert seen == [f"{k}/{steps}" for k in range(1, steps + 1)] + [f"{steps}/{steps}"]
        await pilot.press("N")
        assert str(narrative.content).startswith(f"{steps - 1}/{steps}")
        await pilot.press("home")
        assert str(narrative.content).startswith(f"1/{steps}")
        await pilot.press("end")
        assert str(narrative.content).startswith(f"{steps}/{steps}")
        await pilot.press("k")  # the legend, under the timeline
        legend = screen.query_one("#legend", Static)
        assert legend.display and "r0 ~pc" in str(legend.content)
        await pilot.press("k")
        assert not legend.display
