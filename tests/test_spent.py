"""runtime.engine.comm.Spent: a finished p2p request is waited for, kept a while, then freed
oldest first (gloo held a rank a scheduler tick when one was freed at once:
benchmarks/p2p_release.py); the lessons free at once for now."""

from __future__ import annotations

import weakref

from runtime.engine.comm import SPENT_KEPT, Comm, Spent


class FakeWork:
    """Stands for a torch.distributed.Work: only its wait and its lifetime matter here."""

    def __init__(self) -> None:
        self.waited = False

    def wait(self) -> None:
        self.waited = True


def _waited_and_alive(spent: Spent, count: int) -> tuple[list[bool], list[bool]]:
    works = [FakeWork() for _ in range(count)]
    refs = [weakref.ref(w) for w in works]
    for work in works:
        spent.wait(work)
    waited = [w.waited for w in works]
    del works, work
    return waited, [ref() is not None for ref in refs]


def test_a_finished_request_is_kept_until_newer_ones_push_it_out():
    waited, alive = _waited_and_alive(Spent(2), 3)
    assert waited == [True, True, True]
    assert alive == [False, True, True]  # the oldest freed when the third came


def test_kept_zero_frees_each_request_once_waited():
    waited, alive = _waited_and_alive(Spent(0), 3)
    assert waited == [True, True, True]
    assert alive == [False, False, False]


def test_a_comm_frees_its_requests_at_once_until_calibration_follows():
    # Kept, calibration sped up more than the lessons' runs (runtime.engine.comm's docstring).
    assert SPENT_KEPT == 0
    assert Comm().spent._works.maxlen == 0
