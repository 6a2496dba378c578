"""Every lesson in a real terminal, as a learner goes through it, in one app per lesson.

tmux runs the installed `playground` (tests/tmux_driver.py). In each lesson, in order:
- it opens on its goal (issue 40, item 1), and `n` visits its narrative steps 1, 2, … N
  in the story's order (item 4), stays on N; `N` goes back one, Home shows step 1 and
  End the last, whatever order the timeline's events come in;
- every panel key (`c` Curves, `m` measured/predicted, `e` export, `w` Workers, `?` help,
  `l` language) at 80×24 and 120×40 keeps the app running (issue 35: a widget that
  raised once ended it with a traceback); at 80×24 the status line is on screen, no
  parameter name runs into its value and no metric name is cut mid-word;
- the challenges (`g`): answers typed before the run, then a real run (`r`) or a
  prediction (`p`, where the lesson is arithmetic), and the app says which challenge was
  met and which answer was wrong (items 1 and 2); what was met is in the progress file,
  kept in the state directory. One run shows both where it can (two challenges answered,
  one right and one wrong), two quick rounds otherwise;
- after a real run (the challenges' own, or `r` where they only predict), every panel
  key again, the small screen again, and the export's HTML on disk.
One app per lesson serves all of it: the app, its fork server and the lesson's run
start once, not once for each thing checked.

Marked `ranks`: the app starts its fork server (a torch process) as it opens, and runs
real ranks. Needs tmux (Debian package `tmux`; `.ci/run` installs it); skipped, saying
so, where it is missing.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from tmux_driver import HAS_TMUX, Tmux, playground_command

from playground import session
from scenarios.registry import NAMES, get_lesson

pytestmark = [
    pytest.mark.ranks,
    pytest.mark.skipif(not HAS_TMUX, reason="tmux is not installed"),
]

SMALL, LARGE = (80, 24), (120, 40)
PANEL_KEYS = ("c", "m", "e", "w", "?", "l")
PREDICTED, DONE = "Predicted by", "Done"

# lesson -> rounds of ([(challenge index, answer typed)], key, [(challenge number, met)]),
# every answer right or wrong at the lesson's defaults.
ROUNDS = {
    # its defaults ask whether a 7B model trains on one 80 GiB GPU (challenge 2: no)
    "why-distribute": [([(0, "12"), (1, "yes")], "p", [(1, False), (2, False)]),
                       ([(0, "16"), (1, "no")], "p", [(1, True), (2, True)])],
    "ring-allreduce": [([(0, "1000")], "r", [(1, False)]), ([(0, "6291456")], "r", [(1, True)])],
    "zero": [([(1, "1.5"), (2, "params")], "r", [(2, True), (3, False)])],
    "failure-resume": [([(3, "600")], "p", [(4, False)]), ([(3, "1138")], "p", [(4, True)])],
    "tensor-parallel": [([(0, "2"), (3, "0")], "r", [(1, True), (4, False)])],
    "pipeline": [([(2, "1f1b"), (3, "0.1")], "r", [(3, True), (4, False)])],
    "mixed-precision": [([(1, "16"), (3, "5")], "r", [(2, True), (4, False)])],
    "inference": [([(0, "ttft"), (1, "1")], "r", [(1, True), (2, False)])],
}  # fmt: skip


# == the narrative ========================================================================
def shown_steps(screen: str, total: int) -> list[int]:
    """The narrative steps on screen ("3/5 · …": one, once the screen is drawn)."""
    return [int(n) for n in re.findall(rf"(\d+)/{total} · ", screen)]


def press_step(tmux: Tmux, key: str, total: int, expected: int, timeout: float = 10.0) -> None:
    """Press `key`; the narrative must come to show step `expected` (the screen is read
    until it does: a loaded machine draws a frame late, or in two halves)."""
    tmux.keys(key, pause=0)
    deadline = time.monotonic() + timeout
    while (steps := shown_steps(tmux.screen(), total)) != [expected]:
        if time.monotonic() > deadline:
            raise AssertionError(f"{key}: step {steps}, not {expected}:\n{tmux.screen()}")
        time.sleep(0.05)


def tell_every_step(tmux: Tmux, total: int) -> None:
    for step in range(1, total + 1):  # 1, 2, … in order: none skipped, none repeated
        press_step(tmux, "n", total, step)
    tmux.keys("n")  # past the last: it stays there
    time.sleep(0.5)
    assert shown_steps(tmux.screen(), total) == [total], tmux.screen()
    if total > 1:
        press_step(tmux, "N", total, total - 1)
    press_step(tmux, "Home", total, 1)
    press_step(tmux, "End", total, total)


# == the panel keys and the small screen ==================================================
def press_and_check(tmux: Tmux, key: str, where: str) -> None:
    # A widget that raises does so on the redraw the key causes: the screen changes (to
    # the redraw, or to the traceback the pane keeps), and a moment later the app is
    # still there or it is not. A key that changes nothing is given 0.3 s.
    # A crash that came later still fails the test: at the next key, or at the status
    # line read after the keys (wait_for stops at a dead pane).
    before = tmux.screen()
    tmux.keys(key, pause=0)
    tmux.changed(before, timeout=0.3)
    time.sleep(0.1)
    assert tmux.running(), f"{key!r} {where} ended the app:\n{tmux.screen()}"
    if key == "?":  # the help screen (its key list says "Home End"), closed again
        tmux.wait_for("Home End", timeout=15)  # open before Esc: else Esc leaves the lesson
        tmux.keys("Escape", pause=0.2)
        deadline = time.monotonic() + 15
        while "Home End" in tmux.screen() and time.monotonic() < deadline:
            time.sleep(0.1)


def press_panel_keys(tmux: Tmux, when: str) -> None:
    """Every panel key at 80x24, then at 120x40 (`l` twice: the language ends as it began),
    and the window at 80x24 again."""
    for width, height in (SMALL, LARGE):
        tmux.resize(width, height)
        for key in PANEL_KEYS:
            press_and_check(tmux, key, f"{when} at {width}x{height}")
    tmux.resize(*SMALL)


def form_violations(screen: str, names: list[str]) -> list[str]:
    """Tokens of the form where a parameter name runs into its value (`checkpoint_every5`)."""
    bad = []
    for line in screen.splitlines():
        cells = line.split("│")
        if len(cells) < 3 or line.find("│") > 1:
            continue  # the form's box starts at the left edge; below it, other panels
        for token in cells[1].split():
            if token not in names and any(token.startswith(n) for n in names):
                bad.append(token)
    return bad


def cut_metric_names(screen: str, metric_names: set[str]) -> list[str]:
    """Pieces of metric names broken mid-word: a strict prefix of a name that does not end
    at one of its separators (`.`, `_`)."""
    bad = []
    for token in re.split(r"[\s│╭╮╰╯─]+", screen):
        if not ("_" in token or "." in token) or token in metric_names:
            continue
        if any(m.startswith(token) and token[-1] not in "._" for m in metric_names):
            bad.append(token)
    return bad


def check_small_screen(tmux: Tmux, lesson: str, status: str) -> None:
    # The export's notice (a toast of a few seconds) may lie over the status a moment.
    try:
        tmux.wait_for(status, timeout=10)
    except AssertionError as exc:
        raise AssertionError(f"the status line is off screen at 80x24: {exc}") from None
    screen = tmux.settle()
    names = [name for name, _ in get_lesson(lesson).params.knobs()]
    assert form_violations(screen, names) == [], screen
    metric_names = {m.name for m in session.predict(lesson, {}).metrics}
    assert cut_metric_names(screen, metric_names) == [], screen


# == the challenges =======================================================================
def in_box(tmux: Tmux, typed: str, timeout: float = 15.0) -> None:
    """Wait until a line of the screen holds `typed` alone between the box's borders."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in tmux.screen().splitlines():
            if typed in [cell.strip() for cell in line.split("│")]:
                return
        time.sleep(0.1)
    raise AssertionError(f"{typed!r} is not in the answer box:\n{tmux.screen()}")


def answer_first(tmux: Tmux, answers: list[tuple[int, str]]) -> None:
    """`g`, then each answer typed on its challenge (the screen opens on the first one
    not met: the first, here, as none is met before a round's run), then Esc."""
    tmux.keys("g")
    tmux.wait_for("Enter keeps your answer", timeout=15)
    at = 0
    for index, typed in answers:
        tmux.keys(*["Down"] * (index - at))
        at = index
        tmux.keys(typed)
        # The box draws the typed answer a moment later on a loaded machine (its fork
        # server importing torch beside it); an Enter sent before has found it empty.
        in_box(tmux, typed)
        tmux.keys("Enter")
        tmux.wait_for(f"your answer {typed}: waits for the run", timeout=10)
    tmux.keys("Escape")
    tmux.wait_for("Goal:", timeout=10)


def play_rounds(tmux: Tmux, lesson: str) -> None:
    for answers, key, expected in ROUNDS[lesson]:
        answer_first(tmux, answers)
        tmux.keys(key)
        for number, met in expected:
            said = f"Challenge {number} {'met' if met else 'not met'}"
            tmux.wait_for(said, timeout=300 if key == "r" else 30)
        screen = tmux.screen()
        for number, met in expected:
            if not met:
                assert f"Challenge {number} met" not in screen, screen
        time.sleep(0.2)


# == one lesson, start to end =============================================================
@pytest.mark.parametrize("lesson", NAMES)
def test_a_learner_goes_through_the_lesson_in_a_real_terminal(tmp_path: Path, lesson: str):
    state = tmp_path / "state"
    env = {
        "PLAYGROUND_LANG": "en",
        "PLAYGROUND_EXPORT_DIR": str(tmp_path),
        "PLAYGROUND_CACHE_DIR": os.environ.get("PLAYGROUND_CACHE_DIR", str(tmp_path)),
        "XDG_STATE_HOME": str(state),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(playground_command(), env, *LARGE)
    try:
        tmux.wait_for("Lesson 1")
        tmux.keys(*["Down"] * NAMES.index(lesson), "Enter")
        tmux.wait_for(PREDICTED)
        tmux.wait_for("Goal:")  # the lesson opens on its goal
        tell_every_step(tmux, len(get_lesson(lesson).narrative))

        tmux.resize(*SMALL)
        check_small_screen(tmux, lesson, PREDICTED)
        press_panel_keys(tmux, "before the run")

        tmux.resize(*LARGE)
        play_rounds(tmux, lesson)
        if all(key != "r" for _, key, _ in ROUNDS[lesson]):  # the challenges only predict
            tmux.keys("r")
        tmux.wait_for(DONE, timeout=150)

        press_panel_keys(tmux, "after the run")  # `l` pressed twice: English again
        check_small_screen(tmux, lesson, DONE)
        assert tmux.running(), f"the app ended after the keys:\n{tmux.screen()}"
        assert len(list(tmp_path.glob(f"playground-{lesson}-*.html"))) >= 1
        kept = json.loads((state / "playground" / "progress" / f"{lesson}.json").read_text())
        assert kept["challenges"], kept
        assert any(state_["met"] for state_ in kept["challenges"].values()), kept
    finally:
        tmux.kill()
