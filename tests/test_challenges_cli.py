"""Challenges met from the command line, and the kill challenge asking for its own kill.

`playground run` and `predict` check a lesson's challenges after their report, as the
app does, and keep what they met in the learner's progress (playground.challenges.record):
said on stdout after the text report, on stderr beside `--json`. The kill challenge of
lesson 3 is met only by the kill it names (rank 2, step 12), not by any restart.
No ranks here: predictions, and Facts built from a lesson's real params.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground import progress as store
from playground.challenges import goal_of
from playground.cli import main
from scenarios.goals import Facts
from scenarios.metrics import Metric
from scenarios.registry import get_lesson


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PLAYGROUND_LANG", "en")
    return tmp_path / "state"


def test_a_prediction_from_the_cli_meets_a_challenge_and_keeps_it(capsys) -> None:
    assert main(["predict", "mixed-precision", "-p", "value=1e-8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "✓ Challenge 1 met: Find a number fp16 flushes to zero but bf16 keeps."
    assert store.load("mixed-precision").state("flush").met


def test_beside_json_the_challenges_go_to_stderr(capsys) -> None:
    assert main(["predict", "mixed-precision", "-p", "value=1e-8", "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout is one document
    assert "Challenge 1 met" in captured.err


def test_a_prediction_that_does_not_satisfy_it_meets_nothing(capsys) -> None:
    assert main(["predict", "mixed-precision", "-p", "value=1"]) == 0
    assert "Challenge" not in capsys.readouterr().out
    assert not store.load("mixed-precision").state("flush").met


def test_a_progress_file_that_is_not_ours_is_said_and_the_prediction_stands(
    _state: Path, capsys
) -> None:
    path = store.path_of("mixed-precision")
    path.parent.mkdir(parents=True)
    path.write_text("[1, 2]")
    assert main(["predict", "mixed-precision", "-p", "value=1e-8"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert "progress" in last and "--reset mixed-precision" in last
    assert path.read_text() == "[1, 2]"  # left as it was


def _kill_facts(**faults: str) -> Facts:
    lesson = get_lesson("failure-resume")
    params = lesson.parse(faults, "run")
    metrics = (
        Metric("restarts", "count", 1),
        Metric("lost_steps", "count", 1),
        Metric("bitwise_equal_to_uninterrupted", "flag", True),
    )
    return Facts(params, metrics, ran=True)


@pytest.mark.parametrize(
    ("faults", "met"),
    [
        ({"fault": "kill", "fault_rank": "2", "fault_step": "12"}, True),
        ({"fault": "kill", "fault_rank": "1", "fault_step": "12"}, False),
        ({"fault": "kill", "fault_rank": "2", "fault_step": "11"}, False),
        ({"fault": "hang", "fault_rank": "2", "fault_step": "12"}, False),
    ],
)
def test_the_kill_challenge_is_met_only_by_the_kill_it_names(faults: dict, met: bool) -> None:
    goal = goal_of(get_lesson("failure-resume"))
    assert goal is not None
    kill = next(c for c in goal.challenges if c.id == "kill-12")
    assert bool(kill.check(_kill_facts(**faults))) is met
