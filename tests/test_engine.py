"""The real engine: hand-made collectives on real gloo ranks, the launcher's failure handling."""

from __future__ import annotations

import os
import threading

import pytest

from runtime.engine.faults import Fault
from runtime.engine.launch import LaunchSpec, RunCancelled, RunFailed, launch

pytestmark = pytest.mark.ranks


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_hand_collectives_equal_torch_builtins(n: int) -> None:
    result = launch(LaunchSpec("rank_jobs:check_collectives", n))
    for rank, rank_result in enumerate(result.rank_results):
        assert rank_result["failures"] == [], f"rank {rank}"
        assert rank_result["checked"] == 4 * 6
    assert result.backend == "gloo"


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] != "Z":
                    alive.append(pid)
        except FileNotFoundError:
            pass
    return alive


def test_a_raising_rank_is_named() -> None:
    with pytest.raises(RunFailed) as info:
        launch(LaunchSpec("rank_jobs:raise_on_rank_one", 3))
    assert info.value.rank == 1
    assert "deliberate failure" in info.value.cause
    assert info.value.log_path is not None and info.value.log_path.exists()
    assert "deliberate failure" in info.value.log_path.read_text()


def test_hang_is_detected_and_every_rank_is_gone() -> None:
    """A rank that stops answering ends the run (a detection that never came would hang
    the test until pytest-timeout's bound, not fail an assert on the clock)."""
    pids: list[int] = []
    with pytest.raises(RunFailed) as info:
        launch(
            LaunchSpec(
                "rank_jobs:sleep_forever",
                3,
                faults=[Fault("hang", 2, after_s=0.2)],
            ),
            on_message=lambda m: pids.append(m[3]) if m[0] == "ready" else None,
        )
    assert info.value.rank == 2
    assert "stopped answering" in info.value.cause
    assert len(pids) == 3 and _alive(pids) == []


def test_cancel_stops_every_rank() -> None:
    cancel = threading.Event()
    pids: list[int] = []

    def on_message(message: tuple) -> None:
        if message[0] == "ready":
            pids.append(message[3])
            if len(pids) == 2:
                threading.Timer(0.5, cancel.set).start()

    with pytest.raises(RunCancelled):
        launch(LaunchSpec("rank_jobs:sleep_forever", 2), on_message=on_message, cancel=cancel)
    assert _alive(pids) == []
    assert os.getpid() not in pids
