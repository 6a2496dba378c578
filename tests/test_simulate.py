"""The simulator against the alpha-beta formulas of REFERENCES.md, and its deadlock report."""

from __future__ import annotations

import math

import pytest

from runtime import collectives, formulas
from runtime.costmodel import CostModel
from runtime.profiles import get_profile
from runtime.program import Action, Program, ProgramError
from runtime.simulate import DeadlockError, simulate

MODEL = CostModel("test", alpha=1e-5, beta=1e-9, gamma=5e-10)


def program_of(n: int, schedule: dict[int, list[Action]]) -> Program:
    program = Program(n)
    for rank in range(n):
        program.extend(schedule.get(rank, []))
    program.validate()
    return program


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 16])
@pytest.mark.parametrize("numel", [1, 1000, 1001, 2**20 + 3])
def test_ring_all_reduce_matches_formula(n: int, numel: int) -> None:
    program = program_of(n, collectives.ring_all_reduce(list(range(n)), numel, 4))
    predicted = simulate(program, MODEL).makespan
    size = numel * 4
    exact = formulas.ring_all_reduce_time(n, size, MODEL.alpha, MODEL.beta, MODEL.gamma)
    # Uneven chunks cost at most one element more per step than the formula's S/n.
    assert predicted == pytest.approx(
        exact, rel=1e-9, abs=2 * (n - 1) * 4 * (MODEL.beta + MODEL.gamma)
    )


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_tree_all_reduce_matches_formula_for_powers_of_two(n: int) -> None:
    size = 4096
    program = program_of(n, collectives.tree_all_reduce(list(range(n)), size))
    exact = formulas.tree_all_reduce_time(n, size, MODEL.alpha, MODEL.beta, MODEL.gamma)
    assert simulate(program, MODEL).makespan == pytest.approx(exact, rel=1e-12)


def test_ring_bytes_per_rank_are_2s_n_minus_1_over_n() -> None:
    n, numel = 4, 1024
    program = program_of(n, collectives.ring_all_reduce(list(range(n)), numel, 4))
    for rank_actions in program.ranks:
        assert sum(a.bytes for a in rank_actions) == formulas.ring_all_reduce_bytes_per_rank(
            n, numel * 4
        )


def test_ring_chunks_end_where_torch_puts_them() -> None:
    """After reduce-scatter, position i owns chunk i (reduce_scatter_tensor's convention)."""
    n = 5
    rs = collectives.ring_reduce_scatter(list(range(n)), 100, 4)
    for rank in range(n):
        assert rs[rank][-1].arg("recv_chunk") == rank


def test_deadlock_names_ranks_and_actions() -> None:
    program = Program(2)
    program.add(Action("a0", 0, "recv", src=1, bytes=8))
    program.add(Action("a1", 0, "send", dst=1, bytes=8))
    program.add(Action("b0", 1, "recv", src=0, bytes=8))
    program.add(Action("b1", 1, "send", dst=0, bytes=8))
    program.validate()  # pairing is fine; only the order deadlocks
    with pytest.raises(DeadlockError) as info:
        simulate(program, MODEL)
    message = str(info.value)
    assert "rank 0 at a0" in message and "rank 1 at b0" in message
    assert {s.rank for s in info.value.stuck} == {0, 1}


def test_collective_missing_member_is_a_deadlock() -> None:
    program = Program(3)
    for rank in (0, 1):
        program.add(Action(f"ar@{rank}", rank, "all_reduce", bytes=64, group=(0, 1, 2)))
    program.add(Action("c@2", 2, "compute", cost_key="compute"))
    model = CostModel("m", 0, 0, 0, compute={"compute": 1.0})
    with pytest.raises(DeadlockError, match=r"rank\(s\) \[2\]"):
        simulate(program, model)


def test_collective_waits_for_the_late_rank() -> None:
    program = Program(2)
    program.add(Action("c@0", 0, "F", cost_key="F"))
    program.add(Action("ar@0", 0, "all_reduce", bytes=0, group=(0, 1)))
    program.add(Action("ar@1", 1, "all_reduce", bytes=0, group=(0, 1)))
    timeline = simulate(program, get_profile("unit"))
    spans = timeline.by_action()
    assert spans["ar@1"].start == 0 and spans["ar@1"].end == 1.0
    assert spans["ar@0"].start == 1.0 and spans["ar@0"].end == 1.0


def test_collective_mismatch_is_reported() -> None:
    program = Program(2)
    program.add(Action("x@0", 0, "all_reduce", bytes=8, group=(0, 1)))
    program.add(Action("x@1", 1, "all_gather", bytes=8, group=(0, 1)))
    with pytest.raises(ProgramError, match="mismatch"):
        simulate(program, MODEL)


def test_validate_rejects_unpaired_messages() -> None:
    program = Program(2)
    program.add(Action("s", 0, "send", dst=1, bytes=8))
    with pytest.raises(ProgramError, match="rank 0 sends 1 message"):
        program.validate()


def test_validate_rejects_duplicate_ids_and_bad_peers() -> None:
    program = Program(2)
    program.add(Action("same", 0, "F"))
    program.add(Action("same", 1, "F"))
    with pytest.raises(ProgramError, match="duplicate"):
        program.validate()
    program = Program(2)
    program.add(Action("s", 0, "send", dst=5))
    with pytest.raises(ProgramError, match="outside"):
        program.validate()


def test_core_sharing_slows_compute() -> None:
    program = Program(4)
    for rank in range(4):
        program.add(Action(f"f@{rank}", rank, "F", cost_key="F"))
    shared = CostModel("cpu", 0, 0, 0, compute={"F": 1.0}, cores=2)
    assert simulate(program, shared).makespan == 2.0
    assert simulate(program, get_profile("unit")).makespan == 1.0


def test_spans_pair_one_to_one_with_actions() -> None:
    program = program_of(4, collectives.ring_all_reduce(list(range(4)), 64, 4))
    timeline = simulate(program, MODEL)
    assert sorted(s.action_id for s in timeline.spans) == sorted(a.id for a in program.actions())


def test_messages_on_one_link_queue() -> None:
    program = Program(2)
    program.add(Action("s1", 0, "send", dst=1, bytes=1000))
    program.add(Action("s2", 0, "send", dst=1, bytes=1000))
    program.add(Action("r1", 1, "recv", src=0, bytes=1000))
    program.add(Action("r2", 1, "recv", src=0, bytes=1000))
    spans = simulate(program, MODEL).by_action()
    one = MODEL.alpha + 1000 * MODEL.beta
    assert spans["r2"].end == pytest.approx(2 * one)
    assert math.isclose(spans["s2"].end, 2 * one)
