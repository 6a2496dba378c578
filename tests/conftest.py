"""Shared test setup: a private calibration cache and run directory per test session,
Hypothesis's profiles, a heap that stays cheap to collect, and the environment's tools."""

from __future__ import annotations

import gc
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Before any test imports the launcher: calibrations and rank logs of the suite
# stay out of the user's cache.
_SESSION_DIR = tempfile.mkdtemp(prefix="playground-tests-")
os.environ.setdefault("PLAYGROUND_CACHE_DIR", os.path.join(_SESSION_DIR, "cache"))
os.environ.setdefault("PLAYGROUND_RUNS_DIR", os.path.join(_SESSION_DIR, "runs"))
# Challenge progress, the budget ledger and anything else kept under the state dir: the
# session's own, never the user's ~/.local/state.
os.environ.setdefault("XDG_STATE_HOME", os.path.join(_SESSION_DIR, "state"))

# Hypothesis: HYPOTHESIS_PROFILE=ci (.ci/run sets it) runs every costly property with all
# its examples; the default, "dev", runs a third of them (at least 10), so that
# `pytest -m "not ranks"` stays a quick loop. Neither has a deadline: this shared 2-core
# machine stalls for seconds at times, and a property that times itself says so.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, print_blob=True)
settings.load_profile(PROFILE)


def examples(full: int) -> int:
    """How many examples a costly property runs under this session's profile: `full`
    under "ci", a third of it (at least 10) otherwise."""
    return full if PROFILE == "ci" else max(10, full // 3)


# pytest-xdist (`pytest -n N`, `--dist loadgroup` from addopts): the tests spread over
# the workers, rank tests too (they mostly wait: for a rank to start, a heartbeat, a
# frame). The lab's tests share the machine's network namespaces and check that none of
# theirs is left: they form one group, so they run one at a time, in one worker
# (tests/test_lab_*.py mark themselves).
LAB = "lab"


@pytest.fixture(autouse=True, scope="module")
def _frozen_heap() -> Iterator[None]:
    """What the modules before left alive (torch, plotly, the Pilot tests' apps: half a
    million objects by the end of a session) is collected once and frozen as each module
    starts: the collections the tests run then traverse their own objects only (a full
    collection of that heap took ~0.3 s, and predict's fuzzing collects per example).
    Garbage is collected before each freeze; objects that are alive stay so."""
    gc.collect()
    gc.freeze()
    yield


def tool(name: str) -> str:
    """The console script `name` (playground, torchrun, lint-imports, ruff) of this
    interpreter's environment, found next to `sys.executable`, never on PATH: a suite run
    as `.venv/bin/python -m pytest` without the environment activated finds the same
    tools. Every one the tests use is a dependency, so a missing one fails loudly."""
    path = Path(sys.executable).with_name(name)
    assert path.is_file(), f"{name} is not installed next to {sys.executable}"
    return str(path)


@pytest.fixture
def english(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYGROUND_LANG", "en")


def metric_of(doc: dict, name: str, series: str | None = None) -> dict:
    """The metric `name` (of `series`) in a `--json` document's typed metrics list."""
    for metric in doc["metrics"]:
        if metric["name"] == name and metric.get("series") == series:
            return metric
    raise KeyError(f"no metric {name!r} of series {series!r}")
