"""`playground cloud launch` and `cloud results` (issue 41, item 2) against a fake `sky` on PATH
that records its calls and can finish, fail or hang: `sky down -y CLUSTER` is called and
waited for on every way out (finished, failed, at the budget, at the time limit, on
SIGINT/SIGTERM/SIGHUP), never when refused, and the ledger gets one line saying how it ended.
The guard's clock is sped up (PLAYGROUND_BUDGET_CLOCK) so that hours pass in a second."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path

import pytest
from cli_server import CliProcess, run_cli

from scenarios.why_distribute import ledger

FAKE_SKY = """#!/bin/sh
# A stand-in for SkyPilot's `sky`: each call is one line of $FAKE_SKY_LOG.
echo "$*" >> "$FAKE_SKY_LOG"
case "$1" in
  api) exit 0 ;;  # `sky api start`: SkyPilot's local server, outside the guarded job
  launch)
    case "$FAKE_SKY_MODE" in
      hang) exec sleep 317 ;;
      fail) exit 7 ;;
      *) exit 0 ;;
    esac ;;
  down)
    sleep 0.3  # a teardown takes time: the guard must wait for it
    echo "down finished" >> "$FAKE_SKY_LOG"
    exit "${FAKE_SKY_DOWN_STATUS:-0}" ;;
esac
exit 2
"""
# rsync from the head node: the fake copies what "the cluster" holds ($FAKE_REMOTE).
FAKE_RSYNC = """#!/bin/sh
echo "rsync $*" >> "$FAKE_SKY_LOG"
eval "dest=\\${$#}"
cp -R "$FAKE_REMOTE/." "$dest"
"""


@pytest.fixture
def lab(tmp_path: Path):
    """A planned lab (2× RTX 4090 at a quoted $1/GPU-hour: $2/h, 1 h planned, no setup) and
    the fakes on PATH; returns (folder, env)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sky", FAKE_SKY), ("rsync", FAKE_RSYNC)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PLAYGROUND_LEDGER": str(tmp_path / "ledger.jsonl"),
        "PLAYGROUND_LANG": "en",
        "FAKE_SKY_LOG": str(tmp_path / "sky.log"),
        "FAKE_REMOTE": str(tmp_path / "remote"),
    }
    (tmp_path / "remote").mkdir()
    folder = tmp_path / "lab"
    args = ["cloud", "plan", "ring-allreduce", "--gpu", "rtx4090", "--count", "2", "--price",
            "1", "--hours", "1", "--setup", "0h", "--budget", "2.2", "--out", str(folder)]  # fmt: skip
    out = run_cli(args, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return folder, env


def _cluster(folder: Path) -> str:
    return json.loads((folder / "plan.json").read_text())["cluster"]


def _calls(env: dict[str, str]) -> list[str]:
    path = Path(env["FAKE_SKY_LOG"])
    return path.read_text().splitlines() if path.exists() else []


def _launch(folder: Path, env: dict[str, str], *args: str, clock: str = "1", **more: str):
    return run_cli(["cloud", "launch", str(folder), *args],
                   env={**env, "PLAYGROUND_BUDGET_CLOCK": clock, **more}, timeout=60)  # fmt: skip


def _last(env: dict[str, str]) -> ledger.Entry:
    book = ledger.read(Path(env["PLAYGROUND_LEDGER"]))
    assert not book.bad and not book.open_reservations
    return book.entries[-1]


def _downed(folder: Path, env: dict[str, str]) -> None:
    """`sky down -y CLUSTER` called once, and finished before the command returned."""
    calls = _calls(env)
    assert calls.count(f"down -y {_cluster(folder)}") == 1, calls
    assert calls[-1] == "down finished", calls


def test_a_finished_launch_brings_the_run_back_and_tears_down(lab):
    folder, env = lab
    Path(env["FAKE_REMOTE"], "run.json").write_text("{}")
    out = _launch(folder, env)
    assert out.returncode == 0, out.stderr
    assert "Finished" in out.stdout and "playground replay" in out.stdout
    calls = _calls(env)
    assert calls[0] == "api start"
    assert calls[1] == f"launch -y -c {_cluster(folder)} {folder / 'task.yaml'}"
    assert calls[2].startswith(f"rsync -a {_cluster(folder)}:~/playground-run/")
    _downed(folder, env)
    assert (folder / "run" / "run.json").exists()
    entry = _last(env)
    assert (entry.status, entry.how) == ("finished", "exit 0, down ok")


def test_over_budget_is_refused_with_exit_3_and_no_sky_call(lab):
    folder, env = lab
    ledger.append("an earlier lab", 4.0, 4.0, "finished", Path(env["PLAYGROUND_LEDGER"]))
    out = _launch(folder, env)
    assert out.returncode == 3 and "Refused: $1.00 over." in out.stdout
    assert _calls(env) == [] and _last(env).status == "refused"


def test_a_failed_launch_is_torn_down_and_recorded(lab):
    folder, env = lab
    out = _launch(folder, env, FAKE_SKY_MODE="fail")
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "exit 7" in out.stderr
    _downed(folder, env)
    assert (_last(env).status, _last(env).how) == ("failed", "exit 7, down ok")


def test_at_the_budget_the_cluster_is_torn_down(lab):
    folder, env = lab
    # Ten billed hours a real second: $2/h reaches the $2.20 budget after 1.1 h, 0.11 s,
    # before the time limit (1.25 h).
    out = _launch(folder, env, clock="36000", FAKE_SKY_MODE="hang")
    assert out.returncode == 3 and "the $2.20 budget" in out.stdout, out.stdout + out.stderr
    _downed(folder, env)
    entry = _last(env)
    assert (entry.status, entry.how) == ("killed", "budget, down ok")
    assert entry.actual_usd >= 2.2  # billed until `sky down` had finished


def test_at_the_time_limit_the_cluster_is_torn_down(lab, tmp_path):
    folder, env = lab
    # The same lab at $0.10/GPU-hour: the budget is far away, the 1.25 h limit is not.
    out = _launch(folder, env, "--price", "0.1", clock="36000", FAKE_SKY_MODE="hang")
    assert out.returncode == 3 and "1.25 h" in out.stdout, out.stdout + out.stderr
    _downed(folder, env)
    assert (_last(env).status, _last(env).how) == ("killed", "time limit, down ok")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_tears_the_cluster_down_first(lab, sig):
    folder, env = lab
    proc = CliProcess(["cloud", "launch", str(folder)], env={**env, "FAKE_SKY_MODE": "hang"})
    deadline = time.monotonic() + 20
    while not any(c.startswith("launch") for c in _calls(env)):
        assert time.monotonic() < deadline, "sky launch never started"
        time.sleep(0.02)
    time.sleep(0.1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, err
    assert f"stopped by {signal.Signals(sig).name}" in err
    _downed(folder, env)
    entry = _last(env)
    assert (entry.status, entry.how) == ("interrupted", f"{signal.Signals(sig).name}, down ok")


def test_a_failed_teardown_says_the_cluster_may_still_bill(lab):
    folder, env = lab
    out = _launch(folder, env, FAKE_SKY_DOWN_STATUS="1")
    assert out.returncode == 1 and f"sky down -y {_cluster(folder)}" in out.stderr
    assert "still be billing" in out.stderr
    assert _last(env).how.endswith("down failed")


def test_an_edited_task_or_no_sky_is_refused_before_anything(lab):
    folder, env = lab
    task = folder / "task.yaml"
    task.write_text(task.read_text().replace("RTX4090:1", "H100:8"))
    out = _launch(folder, env)
    assert out.returncode == 2 and "changed after the plan" in out.stderr
    assert out.stderr.count("\n") == 1 and _calls(env) == []
    assert not Path(env["PLAYGROUND_LEDGER"]).exists()
    out = _launch(folder / "nowhere", {**env, "PLAYGROUND_LANG": "es"})
    assert out.returncode == 2 and "cloud plan" in out.stderr and out.stderr.count("\n") == 1


def test_without_sky_on_path_it_says_how_to_get_it(lab):
    folder, env = lab
    out = _launch(folder, env, PATH="/usr/bin:/bin")
    assert out.returncode == 2 and "[cloud]" in out.stderr and out.stderr.count("\n") == 1


def test_a_stale_table_needs_a_fresh_price_to_launch(tmp_path, lab):
    from datetime import date

    from scenarios.why_distribute.prices import price_table

    if not price_table().stale(date.today()):
        pytest.skip("the price table is fresh today")
    _, env = lab
    folder = tmp_path / "table-priced"
    args = ["cloud", "plan", "ring-allreduce", "--gpu", "rtx4090", "--count", "2", "--out",
            str(folder)]  # fmt: skip
    assert run_cli(args, env=env, timeout=60).returncode == 0
    out = _launch(folder, env)
    assert out.returncode == 2 and "--allow-stale" in out.stderr and _calls(env) == []
    assert _launch(folder, env, "--price", "0.3").returncode == 0


def test_results_without_a_run_says_so(lab):
    folder, env = lab
    out = run_cli(["cloud", "results", str(folder)], env=env, timeout=60)
    assert out.returncode == 1 and "no run in" in out.stderr
    assert not (folder / "run").exists()
