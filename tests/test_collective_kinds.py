"""The registry of collective kinds: one entry per kind, read by every layer.

An uneven all-to-all (each member sends a different amount, `Action.sizes`) is
simulated and checked against its α-β time worked out here by hand; members that
disagree on the sizes are a collective mismatch; a kind nobody registered is a clear
error, not a KeyError; and a kind a test registers itself is simulated, printed and
counted like the built-in ones.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from playground.program_text import token
from runtime.engine.workers import collective_bytes
from runtime.sim import collective_kinds, formulas
from runtime.sim.collective_kinds import CollectiveKind, UnknownCollectiveKind, Wire, lookup
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action, Program, ProgramError
from runtime.sim.simulate import simulate

MODEL = CostModel("test", alpha=1e-3, beta=1e-6, gamma=0.0)
GROUP = (0, 1, 2, 3)
SIZES = (100, 400, 200, 300)  # bytes each member sends in all, in group order


def all_to_all(sizes: tuple[int, ...] = SIZES, *, lie: int | None = None) -> Program:
    """One uneven all-to-all over four ranks (`lie`: a rank that carries other sizes)."""
    program = Program(len(GROUP))
    for rank in GROUP:
        mine = tuple(reversed(sizes)) if rank == lie else sizes
        program.add(
            Action(f"a2a@r{rank}", rank, "all_to_all", group=GROUP, bytes=mine[rank], sizes=mine)
        )
    return program


def test_an_uneven_all_to_all_takes_its_largest_senders_time() -> None:
    """Pairwise exchange: 3 rounds of α, and the largest sender's 400 B of which 3/4 leave
    its rank: 3·1 ms + 400·(3/4)·1 µs = 3.3 ms, on every member."""
    program = all_to_all()
    program.validate()
    spans = simulate(program, MODEL).spans
    assert [s.end for s in spans] == pytest.approx([3.3e-3] * 4, rel=1e-12)
    assert [s.bytes for s in sorted(spans, key=lambda s: s.rank)] == list(SIZES)
    even = all_to_all((400,) * 4)
    assert simulate(even, MODEL).makespan == pytest.approx(3.3e-3, rel=1e-12)


def test_members_that_disagree_on_the_sizes_are_a_mismatch() -> None:
    """Each member's own bytes may differ; the sizes tuple they carry may not."""
    program = all_to_all(lie=2)
    with pytest.raises(ProgramError, match="collective mismatch"):
        simulate(program, MODEL)


def test_sizes_must_name_every_member_and_agree_with_its_bytes() -> None:
    short = Program(2)
    for rank in (0, 1):
        short.add(Action(f"x@r{rank}", rank, "all_to_all", group=(0, 1), bytes=8, sizes=(8,)))
    with pytest.raises(ProgramError, match="one size per member"):
        short.validate()
    wrong = Program(2)
    for rank in (0, 1):
        wrong.add(Action(f"x@r{rank}", rank, "all_to_all", group=(0, 1), bytes=8, sizes=(8, 9)))
    with pytest.raises(ProgramError, match="differs from its bytes"):
        wrong.validate()


def test_an_unknown_kind_is_a_clear_error_not_a_key_error() -> None:
    with pytest.raises(UnknownCollectiveKind, match="'all_to_some'.*all_reduce") as caught:
        lookup("all_to_some")
    assert not isinstance(caught.value, KeyError)
    with pytest.raises(UnknownCollectiveKind):
        collective_kinds.busbw("all_to_some", 4, 100, 1.0)
    with pytest.raises(UnknownCollectiveKind):
        MODEL.collective_formula(Action("x", 0, "all_to_some", group=(0, 1), bytes=8))


def test_the_registry_gives_each_layer_its_figure() -> None:
    assert collective_kinds.busbw("all_to_all", 4, 100, 1.0) == 75.0
    assert collective_bytes("all_reduce", 100, 4) == 150.0
    assert collective_bytes("barrier", 100, 4) == 0.0
    assert token(Action("x", 0, "all_to_all", group=(0, 1), bytes=8)) == "A2A"
    assert collective_kinds.overlaps("all_gather") and not collective_kinds.overlaps("barrier")
    assert not collective_kinds.overlaps("F")


@pytest.fixture
def gather() -> Iterator[CollectiveKind]:
    """A kind of the test's own: a binomial-tree gather to one root."""
    kind = collective_kinds.register(
        CollectiveKind(
            "gather",
            lambda w: formulas.tree_rounds(w.n) * w.alpha + w.nbytes * (w.n - 1) / w.n * w.beta,
            lambda n: (n - 1) / n,
            "GA",
            "#123456",
        )
    )
    yield kind
    collective_kinds.unregister("gather")


def test_a_kind_registered_later_is_simulated_printed_and_counted(gather: CollectiveKind) -> None:
    program = Program(4)
    for rank in GROUP:
        program.add(Action(f"g@r{rank}", rank, "gather", group=GROUP, bytes=4000))
    program.validate()
    # 2 rounds of α + 4000·(3/4) bytes at 1 µs: 2 ms + 3 ms.
    assert simulate(program, MODEL).makespan == pytest.approx(5e-3, rel=1e-12)
    assert gather.time(Wire(4, 4000, 1e-3, 1e-6, 0.0, "ring")) == pytest.approx(5e-3)
    assert program.ranks[0][0].is_collective
    assert token(program.ranks[0][0]) == "GA"
    assert collective_bytes("gather", 4000, 4) == 3000.0
