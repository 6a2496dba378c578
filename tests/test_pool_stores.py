"""A rank pool's FileStore outlives a SIGKILLed process (it cannot unlink it): the next
pool to start removes the stores of processes that are gone, and only those
(runtime.engine.pool.sweep_stale_stores, runtime.engine.owners)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.engine.launch import LaunchSpec
from runtime.engine.owners import owner_alive, started_at
from runtime.engine.pool import RankPool, sweep_stale_stores

TESTS = Path(__file__).resolve().parent


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_this_process_is_its_own_live_owner_and_a_reused_pid_is_not() -> None:
    assert started_at(os.getpid()) is not None and started_at(_dead_pid()) is None
    assert owner_alive(os.getpid(), made=time.time())
    # A file made long before this process started: its pid was another process's.
    assert not owner_alive(os.getpid(), made=1_000_000.0)
    assert not owner_alive(_dead_pid(), made=time.time())


def test_only_the_stores_of_processes_gone_are_swept(tmp_path: Path) -> None:
    live = tmp_path / f".pool-{os.getpid()}-live.store"
    dead = tmp_path / f".pool-{_dead_pid()}-dead.store"
    reused = tmp_path / f".pool-{os.getpid()}-reused.store"
    older = tmp_path / ".pool-abc123.store"  # an older version's name: no pid, kept
    other = tmp_path / "run-1"  # a run's folder: never the sweep's
    for path in (live, dead, reused, older):
        path.write_bytes(b"")
    other.mkdir()
    os.utime(reused, (1_000_000.0, 1_000_000.0))  # before this process started
    assert sorted(sweep_stale_stores(tmp_path)) == sorted([dead, reused])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, older.name, other.name])


@pytest.mark.ranks
def test_a_pool_killed_with_its_process_is_swept_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAYGROUND_RUNS_DIR", str(tmp_path))
    code = (
        "from runtime.engine.launch import LaunchSpec\n"
        "from runtime.engine.pool import RankPool\n"
        "pool = RankPool()\n"
        "pool.launch(LaunchSpec('rank_jobs:seeded_sum', 2))\n"
        "print('warm', flush=True)\n"
        "import time; time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    owner = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None and owner.stdout.readline() == b"warm\n"
        left = list(tmp_path.glob(f".pool-{owner.pid}-*.store"))
        assert len(left) == 1
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert left[0].exists()  # killed: nothing could unlink it
    with RankPool() as pool:
        pool.launch(LaunchSpec("rank_jobs:seeded_sum", 2))
        assert not left[0].exists()
        assert len(list(tmp_path.glob(f".pool-{os.getpid()}-*.store"))) == 1
    assert list(tmp_path.glob(".pool-*.store")) == []
