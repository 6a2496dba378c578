"""One calibration at a time per cache folder (runtime.fit.calibration_lock).

A first `run` at a world size waits for the calibration under way, then uses what that
one saved rather than calibrating a second time beside it. Real ranks: marked `ranks`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from runtime.fit import calibration, calibration_lock
from runtime.sim.profiles import PROFILES

pytestmark = pytest.mark.ranks


def test_a_first_run_waits_for_the_calibration_under_way_and_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(cache))
    env = {**os.environ, "PLAYGROUND_LANG": "en"}
    # What "the other calibration" saves: a model no calibration here would make.
    saved = replace(PROFILES["cpu-default"], name="saved while the run waited")
    command = [sys.executable, "-m", "playground.cli", "run", "ring-allreduce", "--ranks", "2"]
    with calibration_lock.exclusive():  # a calibration under way
        run = subprocess.Popen(
            [*command, "--json"], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            time.sleep(2)
            assert run.poll() is None, run.communicate()  # no run without a calibration
            calibration.save(saved, calibration.backend_hint("auto"), 2)
        except BaseException:
            run.kill()
            raise
    out, err = run.communicate(timeout=180)
    assert run.returncode == 0, err
    assert json.loads(out)["profile"]["name"].startswith(saved.name)
    assert (cache / calibration_lock.LOCK_NAME).exists()
