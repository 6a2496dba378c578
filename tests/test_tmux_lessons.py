"""Every lesson in a real terminal, as a newcomer tries it: every panel key before and after
a real run, at 80×24 and 120×40, and the app still running after each (issue 35).

tmux runs the installed `playground`; the keys are the lesson screen's panel keys (`c`
Curves, `m` measured/predicted, `e` export, `w` Workers, `?` help, `l` language). After
each key the pane must still hold the running app (a widget that raised once ended it
with a traceback). At 80×24 the screen is also read: the status line is on it, no
parameter name runs into its value, no metric name is cut mid-word.

Needs tmux (Debian package `tmux`; `.ci/run` installs it). Skipped, saying so, where
tmux is missing.
"""

from __future__ import annotations

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
STATUS = {"en": ("Predicted by", "Done"), "es": ("Predicho por", "Hecho")}


def press_and_check(tmux: Tmux, key: str, where: str) -> None:
    # A widget that raises does so on the redraw the key causes: the screen changes (to
    # the redraw, or to the traceback the pane keeps), and a moment later the app is
    # still there or it is not. A key that changes nothing is given 0.3 s, as before.
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
    """Every panel key at 80x24, then at 120x40 (`l` twice: the language ends as it began)."""
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


@pytest.mark.parametrize("number", range(len(NAMES)), ids=NAMES)
def test_every_panel_key_before_and_after_a_run_keeps_the_app(tmp_path: Path, number: int):
    lesson = NAMES[number]
    env = {
        "PLAYGROUND_LANG": "en",
        "PLAYGROUND_EXPORT_DIR": str(tmp_path),
        "PLAYGROUND_CACHE_DIR": os.environ.get("PLAYGROUND_CACHE_DIR", str(tmp_path)),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(playground_command(), env, *SMALL)
    try:
        tmux.wait_for("Lesson 1")
        tmux.keys(*["Down"] * number, "Enter")
        tmux.wait_for(STATUS["en"][0])
        check_small_screen(tmux, lesson, STATUS["en"][0])
        press_panel_keys(tmux, "before the run")
        tmux.keys("r")
        tmux.wait_for(STATUS["en"][1], timeout=150)  # `l` pressed twice: English again
        press_panel_keys(tmux, "after the run")
        check_small_screen(tmux, lesson, STATUS["en"][1])
        assert tmux.running(), f"the app ended after the keys:\n{tmux.screen()}"
        assert len(list(tmp_path.glob(f"playground-{lesson}-*.html"))) >= 1
    finally:
        tmux.kill()
