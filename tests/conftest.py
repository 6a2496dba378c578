"""Shared test setup: a private calibration cache and run directory per test session."""

from __future__ import annotations

import os
import tempfile

import pytest

# Before any test imports the launcher: calibrations and rank logs of the suite
# stay out of the user's cache.
_SESSION_DIR = tempfile.mkdtemp(prefix="playground-tests-")
os.environ.setdefault("PLAYGROUND_CACHE_DIR", os.path.join(_SESSION_DIR, "cache"))
os.environ.setdefault("PLAYGROUND_RUNS_DIR", os.path.join(_SESSION_DIR, "runs"))


@pytest.fixture
def english(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYGROUND_LANG", "en")


def metric_of(doc: dict, name: str, series: str | None = None) -> dict:
    """The metric `name` (of `series`) in a `--json` document's typed metrics list."""
    for metric in doc["metrics"]:
        if metric["name"] == name and metric.get("series") == series:
            return metric
    raise KeyError(f"no metric {name!r} of series {series!r}")
