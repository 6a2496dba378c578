"""Every lesson's narrative, told in order in a real terminal: `n` from step 1 to the last.

tmux runs the installed `playground` (tests/tmux_driver.py). Each lesson opens on its
goal (issue 40, item 1: "its goal is on screen when it opens"); then `n` visits its
narrative steps 1, 2, … N in the story's order (item 4), stays on N, `N` goes back one,
Home shows step 1 and End the last, whatever order the timeline's events come in.

Marked `ranks`: the app starts its fork server (a torch process) as it opens. Needs
tmux; skipped, saying so, where it is missing.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from tmux_driver import HAS_TMUX, Tmux, playground_command

from scenarios.registry import NAMES, get_lesson

pytestmark = [
    pytest.mark.ranks,
    pytest.mark.skipif(not HAS_TMUX, reason="tmux is not installed"),
]


def shown_steps(screen: str, total: int) -> list[int]:
    """The narrative steps on screen ("3/5 · …": one, once the screen is drawn)."""
    return [int(n) for n in re.findall(rf"(\d+)/{total} · ", screen)]


def press(tmux: Tmux, key: str, total: int, expected: int, timeout: float = 10.0) -> None:
    """Press `key`; the narrative must come to show step `expected` (the screen is read
    until it does: a loaded machine draws a frame late, or in two halves)."""
    tmux.keys(key, pause=0)
    deadline = time.monotonic() + timeout
    while (steps := shown_steps(tmux.screen(), total)) != [expected]:
        if time.monotonic() > deadline:
            raise AssertionError(f"{key}: step {steps}, not {expected}:\n{tmux.screen()}")
        time.sleep(0.05)


@pytest.mark.parametrize("number", range(len(NAMES)), ids=NAMES)
def test_n_tells_every_narrative_step_in_order(tmp_path: Path, number: int) -> None:
    lesson = get_lesson(NAMES[number])
    total = len(lesson.narrative)
    env = {
        "PLAYGROUND_LANG": "en",
        "PLAYGROUND_CACHE_DIR": os.environ.get("PLAYGROUND_CACHE_DIR", str(tmp_path)),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(playground_command(), env, 120, 40)
    try:
        tmux.wait_for("Lesson 1")
        tmux.keys(*["Down"] * number, "Enter")
        tmux.wait_for("Predicted by")
        tmux.wait_for("Goal:")  # the lesson opens on its goal
        for step in range(1, total + 1):  # 1, 2, … in order: none skipped, none repeated
            press(tmux, "n", total, step)
        tmux.keys("n")  # past the last: it stays there
        time.sleep(0.5)
        assert shown_steps(tmux.screen(), total) == [total], tmux.screen()
        if total > 1:
            press(tmux, "N", total, total - 1)
        press(tmux, "Home", total, 1)
        press(tmux, "End", total, total)
        assert tmux.running(), tmux.screen()
    finally:
        tmux.kill()
