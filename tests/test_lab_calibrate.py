"""`playground lab nodes … -- calibrate` (issue 41, item 4): inside a node and across the link
measured into one two-level profile (ranks_per_node, inter α/β), cached, and used by the lab's
next run beside the link-limit prediction."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_server import run_cli
from conftest import LAB
from test_lab_nodes import RUN, _ours, needs_namespaces

from playground import lab_calibrate
from runtime.sim.costmodel import CostModel

# The lab's network namespaces are the machine's: under `pytest -n N` the lab's tests run
# one at a time, in one worker (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(LAB)


def test_the_profile_is_kept_per_ranks_a_node_and_link(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path))
    model = CostModel("lab:x", alpha=1e-4, beta=1e-9, gamma=1e-10, ranks_per_node=2,
                      inter_alpha=2e-4, inter_beta=1.6e-8)  # fmt: skip
    assert lab_calibrate.lookup(2, 5e8) is None
    path = lab_calibrate.save(model, 2, 5e8)
    assert path == tmp_path / "lab-calibration.json" and oct(path.stat().st_mode)[-3:] == "600"
    found = lab_calibrate.lookup(2, 5e8)
    assert found is not None and (found.inter_beta, found.ranks_per_node) == (1.6e-8, 2)
    assert lab_calibrate.lookup(2, 2e8) is None and lab_calibrate.lookup(1, 5e8) is None
    path.write_text("[1, 2")  # not JSON: as if never measured, never a traceback
    assert lab_calibrate.lookup(2, 5e8) is None


@pytest.mark.parametrize("entry", ["os:system", "scenarios.pipeline.rank:run_rank"])
def test_the_torchrun_job_runs_the_runtimes_own_jobs_only(tmp_path, entry):
    done = subprocess.run([sys.executable, "-m", "runtime.engine.torchrun_job", entry,
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"}, timeout=60)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "not a runtime job" in done.stderr and not (tmp_path / "out").exists()


def test_phases_skip_the_node_inside_with_one_rank():
    assert [p.name for p in lab_calibrate.phases(2)] == ["intra", "inter"]
    assert [p.name for p in lab_calibrate.phases(1)] == ["inter"]


@pytest.mark.ranks
@needs_namespaces
def test_calibrate_inside_the_nodes_then_a_run_predicted_with_it(tmp_path):
    env = {**os.environ, "PLAYGROUND_LANG": "en", "PLAYGROUND_CACHE_DIR": str(tmp_path)}
    link = 200e6 / 8  # bytes a second each way
    out = run_cli(["lab", "nodes", "--ranks-per-node", "2", "--link", "200Mbit", "--",
                   "calibrate", "--json"], env=env, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    profile = json.loads(out.stdout)
    assert profile["ranks_per_node"] == 2
    # Across: the rate-limited veth (never faster than its limit, and not far below it on
    # a link this slow); inside: the node's loopback, many times faster than the link.
    assert 0.5 * link <= 1 / profile["inter_beta"] <= 1.05 * link, profile["inter_beta"]
    assert 1 / profile["beta"] > 3 * link, profile["beta"]
    assert profile["inter_alpha"] > 0 and profile["details"]["intra_points"]
    assert (tmp_path / "lab-calibration.json").exists() and _ours() == []

    run = run_cli(["lab", "nodes", "--ranks-per-node", "2", "--link", "200Mbit", *RUN,
                   "-p", "size=4MiB"], env=env, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    table = run.stdout.split("The last two columns", 1)[1].splitlines()[1:]
    rows = {line.split()[0]: line.split()[1:] for line in table if line.startswith("  ")}
    measured, _, _, calibrated, _ = rows["busbw_gbps"]
    # Behaviour: the calibrated prediction is there, costed on the measured link.
    assert 0.5 * link / 1e9 <= float(calibrated) <= 1.05 * link / 1e9, rows
    assert float(measured) > 0 and _ours() == []
