"""The template lesson, copied as a new lesson would be: renamed, registered, run, predicted.

docs/adding-a-lesson.md's recipe, end to end: scenarios/_template/ is copied into a
temporary folder as the package `lesson_copy`, its NAME changed to `lesson-copy`, and
registered (scenarios.registry.register); then it runs on 2 real gloo ranks through
playground.session.run, the path `playground run` takes, and is predicted through
session.predict. The ranks' all-reduced result is checked against a single-process
reference computed here; the prediction and the run both report the headline metric.

The ranks import the copy as they start, so the temporary folder must be on their
sys.path. Ranks forked from the fork server (runtime.engine.spawn) get the server's
sys.path, fixed when it started (maybe by an earlier test, before this folder
existed); spawned ranks (PLAYGROUND_START=spawn) get this process's sys.path as it
is when they start. So this test spawns them. A copy of the template for a real
lesson lives under scenarios/ and needs none of this.

Everything made here is undone: the folder (tmp_path), sys.path, the modules
imported from the copy, and the registration.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from playground import session
from scenarios import registry
from scenarios.metrics import find

TEMPLATE = Path(__file__).resolve().parents[1] / "scenarios" / "_template"
PACKAGE, NAME = "lesson_copy", "lesson-copy"


@pytest.fixture
def lesson_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The template copied as package `lesson_copy`, named `lesson-copy`, registered."""
    target = tmp_path / PACKAGE
    shutil.copytree(TEMPLATE, target, ignore=shutil.ignore_patterns("__pycache__"))
    lesson_py = target / "lesson.py"
    text = lesson_py.read_text()
    assert 'NAME = "template"' in text  # the one line a copy must change
    lesson_py.write_text(text.replace('NAME = "template"', f'NAME = "{NAME}"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PLAYGROUND_START", "spawn")  # the ranks see sys.path as it is now
    registry.register(NAME, PACKAGE)
    try:
        yield registry.get_lesson(NAME)
    finally:
        registry.unregister(NAME)
        for module in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[module]


def test_the_copy_is_found_by_name_and_listed_nowhere(lesson_copy) -> None:
    assert lesson_copy.name == NAME
    assert lesson_copy.rank_entry == f"{PACKAGE}.rank:run_rank"
    assert NAME in registry.LESSONS and NAME not in list(registry.LESSONS)
    assert "template" in registry.LESSONS and "template" not in registry.NAMES
    assert list(registry.LESSONS) == list(registry.NAMES)  # what lessons() lists
    with pytest.raises(ValueError):
        registry.register("zero", PACKAGE)  # a course lesson cannot be replaced


@pytest.mark.ranks
def test_the_copy_runs_on_real_ranks_and_matches_one_process(lesson_copy) -> None:
    raw = {"ranks": "2", "dim": "64", "steps": "3"}
    predicted = session.predict(NAME, raw, hardware="cpu-default")
    before = find(predicted.metrics, "step_s")
    assert before is not None and before.value is None and before.predicted > 0

    outcome = session.run(NAME, raw, backend="gloo", hardware="cpu-default")
    step = find(outcome.metrics, "step_s")
    assert step is not None and step.value > 0 and step.predicted > 0
    # One compute and one all-reduce span per rank and step, measured and predicted.
    assert len(outcome.measured.spans) == len(outcome.predicted.spans) == 2 * 2 * 3

    # The numerics: every rank holds Σ_r tanh(X_r·W), as one process computes it.
    from lesson_copy.rank import reference  # torch, in this test process only

    expected = reference(2, 64).double().sum().item()
    checksums = find(outcome.metrics, "checksum").value
    assert checksums == pytest.approx([expected, expected], rel=1e-5, abs=1e-4)
    assert find(outcome.metrics, "max_abs_diff_vs_reference").value <= 1e-4
    assert find(outcome.metrics, "equals_reference").value is True
