"""The scheduler's records: a sequence's piece of an iteration, an engine's decision,
an iteration on the plan's clock.

Part of lesson 7's mechanism, pure. An engine (scenarios.inference.scheduler) decides
its next iteration, a Decision of Pieces; the drivers (scenarios.inference.serve) put
it on the clock as an Iteration, or a run of `repeat` alike decode iterations as one;
scenarios.inference.lumps reads such a run back as its iterations. The plan, the
Program and the ranks read these records (.plan, .program, .rank).
Pure: stdlib only (and the lesson's pure modules).
"""

from __future__ import annotations

from typing import NamedTuple

from scenarios.inference.stepmodel import Work


# The records a plan makes per iteration and per sequence in it (tens of thousands in a
# config search) are NamedTuples: immutable like a frozen dataclass, built faster.
class Piece(NamedTuple):
    """One sequence's share of an iteration: positions start..start+count-1, and the
    token sampled from the last of them."""

    request: int
    start: int
    count: int
    blocks: tuple[int, ...]  # its block table once they are written
    first: bool = False  # the request's first token (its prefill)
    done: bool = False  # the request's last token: its answer is complete
    leaves: bool = False  # the sequence leaves the batch after this iteration
    padding: bool = False  # static batching: a finished member, computed for nothing

    @property
    def feeds_back(self) -> bool:
        """Its sampled token is the sequence's next input."""
        return not self.leaves


class Decision(NamedTuple):
    """What an engine runs next, and its KV occupancy while it runs."""

    prefill: bool
    pieces: tuple[Piece, ...]
    newcomers: tuple[int, ...]
    hits: int
    kv: tuple[int, int]
    contiguous: tuple[int, int]
    work: Work  # Work.of its pieces, each emitting a token


class Iteration(NamedTuple):
    """One iteration of one engine, on the plan's clock."""

    engine: int
    prefill: bool
    pieces: tuple[Piece, ...]
    wait_until: float | None  # arrival of its latest newcomer: never start before it
    start: float
    end: float  # its tokens exist (the last stage's end under PP)
    hits: int  # prompt tokens its newcomers found cached
    kv: tuple[int, int]  # paged: (slots written, slots allocated) in blocks in use
    contiguous: tuple[int, int]  # each running sequence holding the model's whole context
    stages: tuple[tuple[float, float], ...] = ()  # (start, end) on each stage
    # A run of `repeat` alike decode iterations (scenarios.inference.serve's lumping):
    # `pieces`, `kv`, `contiguous` and `stages` are its last iteration's, `start` its
    # first's; `bounds` every iteration's stage (start, end) pairs, flattened.
    repeat: int = 1
    bounds: tuple[float, ...] = ()

    @property
    def work(self) -> Work:
        return Work.of((p.start, p.count, True) for p in self.pieces)

    @property
    def tokens_out(self) -> int:
        return sum(1 for p in self.pieces if not p.padding)
