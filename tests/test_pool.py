"""Warm ranks (runtime.engine.pool): a job on kept ranks is a cold launch's job, and a pool that
saw a failure, a cancel or a new world size is gone, every process of it.

Behaviour, not timings: "starts sooner" is checked as "ran on the same processes and
spawned none" (benchmarks/time_to_result.py measures how much sooner).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_engine import _alive
from test_trust import LOOPBACK_V4, LOOPBACK_V6, listening_addresses

from playground import session
from runtime.engine.faults import Fault
from runtime.engine.launch import LaunchResult, LaunchSpec, RunCancelled, RunFailed, launch
from runtime.engine.pool import RankPool, poolable
from runtime.engine.restart import Attempt

# A small pipeline (2 stages, both schedules): real MiniGPT gradients and losses.
PIPELINE = {
    "stages": "2",
    "microbatches": "2",
    "layers": "2",
    "hidden": "16",
    "seq": "8",
    "vocab": "16",
    "microbatch_size": "2",
}
TIMINGS = {"compute_costs", "p2p", "cpu_s"}  # measured durations: never equal twice


def lesson_spec(name: str, raw: dict[str, str]) -> LaunchSpec:
    lesson, params = session.resolve(name, raw, "run")
    program = lesson.build(params)
    return LaunchSpec(lesson.rank_entry, params.world_size, params=params, program=program)


def numerics(value):
    """A rank's result without the durations it measured."""
    if isinstance(value, dict):
        return {k: numerics(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [numerics(v) for v in value]
    return value


def program_of(result: LaunchResult) -> list[tuple[int, str | None]]:
    return sorted((s.rank, s.action_id) for s in result.spans)


class Ready:
    """on_message that keeps the pids the ranks report with `ready`."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def __call__(self, message: tuple) -> None:
        if message[0] == "ready":
            self.pids.append(message[3])


def children() -> set[int]:
    return {proc.pid for proc in mp.active_children()}


def store_files() -> list[Path]:
    return list(Path(os.environ["PLAYGROUND_RUNS_DIR"]).glob(".pool-*.store"))


pytestmark = pytest.mark.ranks


@pytest.fixture(autouse=True)
def _own_runs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's pools keep their stores in a folder of its own: a pool another test
    (or an app it drove) still holds is not this test's to count."""
    monkeypatch.setenv("PLAYGROUND_RUNS_DIR", str(tmp_path / "runs"))


def test_warm_jobs_run_the_cold_program_with_the_same_numerics_on_the_same_processes() -> None:
    spec = lesson_spec("pipeline", PIPELINE)
    cold = launch(spec)
    with RankPool() as pool:
        first_ready, second_ready = Ready(), Ready()
        first = pool.launch(spec, on_message=first_ready)
        pids, before = pool.pids, children()
        second = pool.launch(spec, on_message=second_ready)
        assert not first.warm and second.warm
        assert sorted(second_ready.pids) == sorted(first_ready.pids) == sorted(pids)
        assert pool.pids == pids and children() == before  # no process was spawned
    assert _alive(pids) == []
    for result in (first, second):
        assert program_of(result) == program_of(cold)
        assert numerics(result.rank_results) == numerics(cold.rank_results)
    losses = [r["schedules"]["gpipe"]["losses"] for r in cold.rank_results]
    assert any(losses), "the last stage reports its losses"


def test_every_job_seeds_torch_afresh() -> None:
    spec = LaunchSpec("rank_jobs:seeded_sum", 2)
    cold = launch(spec)
    with RankPool() as pool:
        runs = [pool.launch(spec) for _ in range(3)]
    assert [r.warm for r in runs] == [False, True, True]
    for run in runs:
        assert run.rank_results == cold.rank_results
    # Every job, cold or warm, ran with no full collection to pause it (runtime.engine.worker).
    assert {(r["collecting"], r["frozen"]) for r in cold.rank_results} == {(False, True)}


def rank_gone(pid: int) -> bool:
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # not our child: the fork server's
        return not os.path.exists(f"/proc/{pid}")


def test_a_killed_rank_tears_the_pool_down_and_the_next_run_is_cold() -> None:
    spec = LaunchSpec("rank_jobs:seeded_sum", 2)
    with RankPool() as pool:
        pool.launch(spec)
        old = pool.pids

        # Killed during a job: the job fails, naming the rank; no process of the pool is left.
        def kill_rank_one(message: tuple) -> None:
            if message[0] == "ready" and message[1] == 1:
                os.kill(message[3], signal.SIGKILL)

        with pytest.raises(RunFailed) as info:
            pool.launch(LaunchSpec("rank_jobs:sleep_forever", 2), on_message=kill_rank_one)
        assert info.value.rank == 1 and "SIGKILL" in info.value.cause
        assert pool.pids == [] and _alive(old) == [] and store_files() == []

        again = pool.launch(spec)
        assert not again.warm and set(pool.pids).isdisjoint(old)

        # Killed while the pool waits: the next run does not fail, it starts cold.
        idle = pool.pids
        os.kill(idle[0], signal.SIGKILL)
        # Until it is gone (a rank dying at the very moment a job is sent fails that job
        # instead): reaped by the fork server that started it, or, spawned, ready to be
        # reaped by the pool (WNOWAIT leaves that to it).
        while not rank_gone(idle[0]):
            time.sleep(0.01)
        after = pool.launch(spec)
        assert not after.warm and _alive(idle) == []
        assert after.rank_results == again.rank_results


def test_a_new_world_size_replaces_the_pool() -> None:
    with RankPool() as pool:
        pool.launch(LaunchSpec("rank_jobs:seeded_sum", 2))
        two = pool.pids
        result = pool.launch(LaunchSpec("rank_jobs:seeded_sum", 3))
        assert not result.warm and len(pool.pids) == 3
        assert _alive(two) == []
        assert pool.launch(LaunchSpec("rank_jobs:seeded_sum", 3)).warm
    assert pool.pids == [] and store_files() == []


def test_cancel_tears_the_pool_down() -> None:
    cancel = threading.Event()
    ready = Ready()

    def on_message(message: tuple) -> None:
        ready(message)
        if len(ready.pids) == 2:
            threading.Timer(0.3, cancel.set).start()

    with RankPool() as pool:
        pool.launch(LaunchSpec("rank_jobs:seeded_sum", 2))
        pids = pool.pids
        with pytest.raises(RunCancelled):
            pool.launch(LaunchSpec("rank_jobs:sleep_forever", 2), on_message, cancel)
        assert sorted(ready.pids) == sorted(pids)  # the warm ranks were cancelled...
        assert pool.pids == [] and _alive(pids) == []  # ...and are gone


def test_close_while_a_job_runs_leaves_no_rank() -> None:
    pool = RankPool()
    ready = Ready()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            pool.launch(LaunchSpec("rank_jobs:sleep_forever", 2), on_message=ready)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = threading.Event()
    while len(ready.pids) < 2 and not deadline.wait(0.05):
        pass
    pool.close()
    thread.join(timeout=30)
    assert not thread.is_alive() and errors and isinstance(errors[0], RunFailed | RunCancelled)
    assert _alive(ready.pids) == []


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net")
def test_warm_ranks_listen_on_loopback_only() -> None:
    with RankPool() as pool:
        pool.launch(LaunchSpec("rank_jobs:seeded_sum", 2))
        for address in listening_addresses(pool.pids):
            assert address.split(":")[0] in (LOOPBACK_V4, LOOPBACK_V6), address


@pytest.mark.parametrize(
    "change",
    [
        {"faults": [Fault("kill", 1, after_s=0.5)]},
        {"attempt": Attempt(0, 2, checkpoint_dir="", fired_dir="", origin_file="")},
        {"host": "127.0.0.1"},
    ],
)
def test_faults_restarts_and_hosts_are_refused(change: dict) -> None:
    spec = LaunchSpec("rank_jobs:seeded_sum", 2, **change)
    assert not poolable(spec)
    with RankPool() as pool, pytest.raises(ValueError):
        pool.launch(spec)
    assert pool.pids == []


def test_a_run_with_faults_stays_cold_beside_a_warm_pool() -> None:
    raw = {"ranks": "2", "size": "64KiB"}
    with RankPool() as pool:
        warm = session.run("ring-allreduce", raw, hardware="cpu-default", pool=pool)
        pids = pool.pids
        with pytest.raises(RunFailed):
            session.run(
                "ring-allreduce",
                {"ranks": "2", "size": "32MiB", "repeat": "10"},
                hardware="cpu-default",
                pool=pool,
                faults=["kill:rank=1,after=0.3s"],
            )
        assert pool.pids == pids  # the failed run had its own ranks
        again = session.run("ring-allreduce", raw, hardware="cpu-default", pool=pool)
    assert warm.warm is False and again.warm is True
    assert again.start_s is not None and again.start_s > 0


def test_the_parent_never_imports_torch() -> None:
    """What ranks send back is plain data: unpickling it must not import torch into the
    parent (the app's UI process), on cold or warm ranks."""
    code = (
        "import sys\n"
        "from playground import session\n"
        "from runtime.engine.pool import RankPool\n"
        "ring = {'ranks': '2', 'size': '64KiB'}\n"
        "with RankPool() as pool:\n"
        "    for _ in range(2):\n"
        "        session.run('ring-allreduce', ring, hardware='cpu-default', pool=pool)\n"
        "session.run('zero', {'ranks': '2', 'steps': '1'}, hardware='cpu-default')\n"
        "assert 'torch' not in sys.modules, 'a message from the ranks imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=170)
