"""Every lesson's challenges in a real terminal: an answer given first, a run, met or not.

tmux runs the installed `playground` (tests/tmux_driver.py). In each lesson the learner
opens the challenges (`g`), types answers before the run, runs (`r`, real ranks) or
predicts (`p`, where the lesson is arithmetic), and the app says which challenge was met
and which answer was wrong (issue 40, items 1 and 2); what was met is in the progress
file, kept in the state directory. One run per lesson where one run can show both (two
challenges answered, one right and one wrong), two quick ones otherwise.

Needs tmux; skipped, saying so, where it is missing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from tmux_driver import HAS_TMUX, Tmux, playground_command

from scenarios.registry import NAMES

pytestmark = [
    pytest.mark.ranks,
    pytest.mark.skipif(not HAS_TMUX, reason="tmux is not installed"),
]

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


@pytest.mark.parametrize("lesson", NAMES)
def test_a_challenge_is_met_by_a_run_and_a_wrong_answer_is_not(tmp_path: Path, lesson: str):
    state = tmp_path / "state"
    env = {
        "PLAYGROUND_LANG": "en",
        "PLAYGROUND_CACHE_DIR": os.environ.get("PLAYGROUND_CACHE_DIR", str(tmp_path)),
        "XDG_STATE_HOME": str(state),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(playground_command(), env, 120, 40)
    try:
        tmux.wait_for("Lesson 1")
        tmux.keys(*["Down"] * NAMES.index(lesson), "Enter")
        tmux.wait_for("Predicted by")
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
        kept = json.loads((state / "playground" / "progress" / f"{lesson}.json").read_text())
        goal_ids = list(kept["challenges"])
        assert any(state_["met"] for state_ in kept["challenges"].values()), kept
        assert goal_ids, kept
        assert tmux.running(), tmux.screen()
    finally:
        tmux.kill()
