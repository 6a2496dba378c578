"""Formulas of docs/references.md, checked with exact values."""

from __future__ import annotations

import pytest

from runtime.sim import collective_kinds, formulas
from runtime.sim.costmodel import CostModel
from runtime.sim.profiles import PROFILES, get_profile
from runtime.sim.program import Action


def test_ring_all_reduce_is_rs_plus_ag() -> None:
    n, s, a, b, g = 8, 2**20, 1e-5, 1e-9, 1e-10
    assert formulas.ring_all_reduce_time(n, s, a, b, g) == pytest.approx(
        2 * (n - 1) * a + 2 * s * (n - 1) / n * b + s * (n - 1) / n * g
    )


def test_busbw_factors_follow_nccl_tests() -> None:
    busbw = collective_kinds.busbw  # each kind's factor (runtime.sim.collective_kinds)
    assert busbw("all_reduce", 4, 100, 1.0) == 150.0
    assert busbw("all_gather", 4, 100, 1.0) == 75.0
    assert busbw("reduce_scatter", 8, 80, 1.0) == 70.0
    assert busbw("broadcast", 8, 80, 1.0) == 80.0


def test_bytes_per_rank_and_rabenseifner() -> None:
    assert formulas.ring_all_reduce_bytes_per_rank(4, 4 * 2**20) == 6 * 2**20
    assert formulas.rabenseifner_all_reduce_time(8, 0, 1.0, 0, 0) == 6.0


def test_even_split() -> None:
    assert formulas.even_split(10, 4) == [3, 3, 2, 2]
    assert formulas.even_split(3, 4) == [1, 1, 1, 0]
    assert sum(formulas.even_split(1001, 7)) == 1001


def test_relative_error() -> None:
    assert formulas.relative_error(1.1, 1.0) == pytest.approx(0.1)
    assert formulas.relative_error(0.0, 0.0) == 0.0


def test_unit_profile_is_exact_and_free() -> None:
    unit = get_profile("unit")
    assert unit.compute["F"] == 1 and unit.compute["B"] == 2
    assert unit.compute["Bi"] + unit.compute["W"] == unit.compute["B"]
    assert unit.p2p_time(0, 1, 10**9) == 0


def test_profiles_are_documented() -> None:
    for name in ("unit", "cpu-default", "a100-nvlink", "h100-nvlink", "rtx4090-pcie"):
        assert PROFILES[name].source
    with pytest.raises(KeyError, match="allowed"):
        get_profile("tpu")


def test_inter_node_links_are_slower() -> None:
    h100 = get_profile("h100-nvlink")
    assert h100.p2p_time(0, 1, 2**30) < h100.p2p_time(0, 8, 2**30)
    wide = Action("ar", 0, "all_reduce", bytes=2**30, group=tuple(range(16)))
    narrow = Action("ar", 0, "all_reduce", bytes=2**30, group=tuple(range(8)))
    assert h100.collective_time(wide) > h100.collective_time(narrow)


def test_compute_cost_from_flops() -> None:
    model = CostModel("m", 0, 0, 0, flops_per_s=1e12)
    action = Action("f", 0, "F", args=(("flops", 2e12),))
    assert model.compute_time(action) == 2.0
    with pytest.raises(KeyError):
        CostModel("m", 0, 0, 0).compute_time(Action("f", 0, "F"))
