"""Numbers moved through the hand-written mechanisms, in one process and in seconds:
the ring's reduce-scatter and all-gather Actions (runtime.engine.collectives) carry
each chunk where torch's collectives put it, and ZeRO's predicted shards
(scenarios.zero.memory) partition every unit exactly, larger shards first."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.engine.collectives import ring_all_gather, ring_reduce_scatter
from runtime.sim.formulas import even_split
from scenarios.zero.memory import predicted_rank_bytes, unit_numels
from scenarios.zero.params import ZeroParams

FP32 = 4


def run_ring(actions: dict[int, list], buffers: dict[int, np.ndarray]) -> None:
    """Execute ring Actions step by step, every rank at once: each sends its send_chunk
    to dst and takes src's into its recv_chunk, summing into it when the step reduces."""
    group = sorted(actions)
    numel = len(next(iter(buffers.values())))
    bounds = np.cumsum([0, *even_split(numel, len(group))])
    for k in range(len(actions[group[0]])):
        sent = {}
        for rank in group:
            a = actions[rank][k]
            c = a.arg("send_chunk")
            assert a.bytes == (bounds[c + 1] - bounds[c]) * FP32  # the bytes it says it sends
            sent[(rank, a.dst)] = buffers[rank][bounds[c] : bounds[c + 1]].copy()
        for rank in group:
            a = actions[rank][k]
            c = a.arg("recv_chunk")
            incoming = sent[(a.src, rank)]
            assert len(incoming) == bounds[c + 1] - bounds[c], "received a chunk of another size"
            part = buffers[rank][bounds[c] : bounds[c + 1]]
            part[:] = part + incoming if a.reduce else incoming


@pytest.mark.parametrize(
    ("n", "numel"), [(n, numel) for n in (2, 3, 4, 5) for numel in (n, 7, 10, 64) if numel >= n]
)
def test_ring_reduce_scatter_then_all_gather_is_an_all_reduce(n: int, numel: int) -> None:
    rng = np.random.default_rng(n * 100 + numel)
    data = {r: rng.integers(-50, 50, numel).astype(np.float64) for r in range(n)}
    total = sum(data.values())
    buffers = {r: v.copy() for r, v in data.items()}
    group = list(range(n))
    run_ring(ring_reduce_scatter(group, numel, FP32), buffers)
    bounds = np.cumsum([0, *even_split(numel, n)])
    for i in group:  # torch's reduce_scatter_tensor: position i owns reduced chunk i
        np.testing.assert_array_equal(
            buffers[i][bounds[i] : bounds[i + 1]], total[bounds[i] : bounds[i + 1]]
        )
    run_ring(ring_all_gather(group, numel, FP32), buffers)
    for r in group:
        np.testing.assert_array_equal(buffers[r], total)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_ring_all_gather_starts_from_torchs_ownership(n: int) -> None:
    numel = 3 * n + 1
    bounds = np.cumsum([0, *even_split(numel, n)])
    whole = np.arange(1, numel + 1, dtype=np.float64)
    buffers = {}
    for i in range(n):  # each holds only its own chunk, as after a reduce-scatter
        b = np.zeros(numel)
        b[bounds[i] : bounds[i + 1]] = whole[bounds[i] : bounds[i + 1]]
        buffers[i] = b
    run_ring(ring_all_gather(list(range(n)), numel, FP32), buffers)
    for i in range(n):
        np.testing.assert_array_equal(buffers[i], whole)


@pytest.mark.parametrize("ranks", [3, 5])
@pytest.mark.parametrize("stage", ["zero1", "zero2", "zero3"])
def test_zero_shards_partition_every_unit_larger_first(ranks: int, stage: str) -> None:
    params = ZeroParams.parse({"ranks": str(ranks), "stage": stage}, "run")
    numels = unit_numels(params)
    assert any(n % ranks for n in numels), "a case where the shards cannot all be equal"
    expected = [sum(even_split(n, ranks)[r] for n in numels) for r in range(ranks)]
    assert sum(expected) == sum(numels) and expected == sorted(expected, reverse=True)
    out = predicted_rank_bytes(params, stage)
    if stage == "zero3":  # every parameter on exactly one rank
        assert out["params"] == [e * FP32 for e in expected]
    # Adam's two moments of each rank's shard (the per-tensor state is alike on all)
    moments = [o - out["optimizer"][-1] for o in out["optimizer"]]
    assert moments == [(e - expected[-1]) * 2 * FP32 for e in expected]
