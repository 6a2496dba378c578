"""Lesson 1's Program run on numbers, in one process: every iteration's ring steps, as
scenarios.ring_allreduce.program builds them for the ranks, moved between numpy buffers
with the chunk arithmetic the ranks use (runtime.engine.comm splits a buffer with
formulas.even_split into the action's `parts` and sends `send_chunk`, receives into
`recv_chunk`, adding when the step reduces). Every rank must end with the sum of all
ranks' inputs, for 2-8 ranks and sizes n does not divide, fewer elements than ranks
included. No process is started: it is the fast check that the schedule's chunk offsets
(runtime.engine.collectives) make an all-reduce, and the mutation check
(benchmarks/mutants.py) relies on it."""

from __future__ import annotations

from itertools import groupby

import numpy as np
import pytest

from runtime.sim.formulas import even_split
from runtime.sim.program import Action
from scenarios.ring_allreduce.params import RingParams
from scenarios.ring_allreduce.program import build

ITEMSIZE = 4  # float32, the lesson's default dtype
# Elements per rank: fewer than the ranks (some chunks empty), one off a multiple of
# them on each side, a prime, and a size of the lesson's own order (4099 is prime too).
SIZES = (1, 5, 7, 13, 4099)


def chunk_bounds(numel: int, parts: int) -> list[tuple[int, int]]:
    """Where each chunk of a buffer of `numel` elements lies, as comm.Comm splits it."""
    ends = np.cumsum(even_split(numel, parts)).tolist()
    return list(zip([0, *ends[:-1]], ends, strict=True))


def run_sendrecvs(steps: dict[int, list[Action]], buffers: dict[int, np.ndarray]) -> None:
    """Every rank's k-th sendrecv at once (a ring step is a lockstep exchange): each sends
    its `send_chunk` to `dst`; each takes what `src` sent this step into its `recv_chunk`,
    summed into it when the action reduces. A message nobody receives, or one received
    by someone it was not sent to, fails."""
    ranks = sorted(steps)
    counts = {len(steps[r]) for r in ranks}
    assert len(counts) == 1, f"ranks run different numbers of ring steps: {counts}"
    for k in range(counts.pop()):
        sent: dict[tuple[int, int], np.ndarray] = {}
        for rank in ranks:
            action = steps[rank][k]
            lo, hi = chunk_bounds(len(buffers[rank]), action.arg("parts"))[action.arg("send_chunk")]
            assert action.bytes == (hi - lo) * ITEMSIZE, f"{action.id} says it sends other bytes"
            sent[(rank, action.dst)] = buffers[rank][lo:hi].copy()
        for rank in ranks:
            action = steps[rank][k]
            lo, hi = chunk_bounds(len(buffers[rank]), action.arg("parts"))[action.arg("recv_chunk")]
            incoming = sent.pop((action.src, rank))
            assert action.recv_bytes == (hi - lo) * ITEMSIZE, f"{action.id} expects other bytes"
            assert len(incoming) == hi - lo, f"{action.id}: a chunk of another size arrived"
            if action.reduce:
                buffers[rank][lo:hi] += incoming
            else:
                buffers[rank][lo:hi] = incoming
        assert not sent, f"step {k}: sent but never received: {sorted(sent)}"


def hand_ring_iterations(ranks: int, numel: int, repeat: int) -> list[dict[int, list[Action]]]:
    """The ring's sendrecv actions of each iteration of the lesson's Program (warm-up ones
    included, where it has them), per rank, in the order the rank runs them (the barriers
    and torch's reference left out)."""
    params = RingParams.parse(
        {"ranks": str(ranks), "size": str(numel * ITEMSIZE), "repeat": str(repeat)}, "run"
    )
    program = build(params)
    iterations: dict[int, dict[int, list[Action]]] = {}
    for rank, actions in enumerate(program.ranks):
        for step, group in groupby(actions, key=lambda a: a.step):
            iterations.setdefault(step, {})[rank] = [a for a in group if a.kind == "sendrecv"]
    assert len(iterations) >= repeat
    return [iterations[step] for step in sorted(iterations)]


@pytest.mark.parametrize("numel", SIZES)
@pytest.mark.parametrize("ranks", range(2, 9))
def test_the_programs_ring_sums_every_ranks_numbers(ranks: int, numel: int) -> None:
    rng = np.random.default_rng(1000 * ranks + numel)
    iterations = hand_ring_iterations(ranks, numel, repeat=2)
    for steps in iterations:
        assert set(steps) == set(range(ranks))
        # 2(n-1) steps: n-1 of reduce-scatter, then n-1 of all-gather
        assert [a.reduce for a in steps[0]] == [True] * (ranks - 1) + [False] * (ranks - 1)
        # Integers, so that the sum is exact whatever order the ring adds in.
        inputs = {r: rng.integers(-1000, 1000, numel) for r in range(ranks)}
        buffers = {r: x.copy() for r, x in inputs.items()}
        run_sendrecvs(steps, buffers)
        total = sum(inputs.values())
        for r in range(ranks):
            np.testing.assert_array_equal(buffers[r], total, err_msg=f"rank {r} of {ranks}")


def test_a_small_ring_written_out() -> None:
    """3 ranks, 4 elements: chunks of 2, 1, 1. Rank i holds [10^i, 2·10^i, 3·10^i, 4·10^i];
    the sum is [111, 222, 333, 444] on every rank."""
    steps = hand_ring_iterations(3, 4, repeat=1)[-1]  # the timed iteration
    buffers = {r: np.array([1, 2, 3, 4]) * 10**r for r in range(3)}
    run_sendrecvs(steps, buffers)
    for r in range(3):
        assert buffers[r].tolist() == [111, 222, 333, 444]
    # After the reduce-scatter, position i holds the reduced chunk i (torch's ownership)
    buffers = {r: np.array([1, 2, 3, 4]) * 10**r for r in range(3)}
    run_sendrecvs({r: steps[r][:2] for r in range(3)}, buffers)
    assert buffers[0][0:2].tolist() == [111, 222]
    assert buffers[1][2:3].tolist() == [333]
    assert buffers[2][3:4].tolist() == [444]
