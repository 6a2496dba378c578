"""The collective kinds: one entry per kind, which everything that treats a kind reads.

Part of the simulator (docs/design.md: runtime/sim's "collective kinds"). A kind says
once what every layer needs of it: its α-β-γ time (runtime.sim.formulas, Thakur,
Rabenseifner & Gropp 2005), its bus-bandwidth factor (nccl-tests'
doc/PERFORMANCE.md, which is also the share of the buffer each rank sends on a
ring), its short token in program text (`playground show`), its colour in the app
and the exports, and whether it may run beside its rank's own work (a non-blocking
collective: drawn on a communication lane). runtime.sim.program, the cost model, the
engine's per-worker figures and the playground's Gantt, timeline, program text and
palette all read this table, so a new kind is one `register` call.

A kind's time reads a `Wire`: the group size, the buffer, the link and the algorithm,
and, where members send different amounts (an uneven all-to-all), the bytes each
member sends (`sizes`, Action.sizes).

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from runtime.sim import formulas


class Wire(NamedTuple):
    """What a collective's time formula reads."""

    n: int  # members of the group
    nbytes: float  # S: the buffer each member holds (its own, where `sizes` differ)
    alpha: float  # seconds per message on the group's slowest link
    beta: float  # seconds per byte on it
    gamma: float  # seconds per byte reduced
    algorithm: str  # "ring", "tree", "rabenseifner", "builtin"
    sizes: tuple[int, ...] | None = None  # bytes each member sends, where they differ


class CollectiveKind(NamedTuple):
    """One kind of collective, as every layer sees it."""

    name: str
    time: Callable[[Wire], float]  # seconds, once every member has arrived
    busbw_factor: Callable[[int], float]  # of n ranks: busbw / algbw, the share S each sends
    token: str  # in program text
    color: str  # in the app and the exports
    overlaps: bool = True  # may run beside its rank's own work (non-blocking)


class UnknownCollectiveKind(ValueError):
    """A kind no one registered: named, with the kinds there are."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"unknown collective kind {name!r}; the known ones: {', '.join(KINDS)} "
            "(runtime.sim.collective_kinds.register adds one)"
        )
        self.name = name


def _all_reduce(w: Wire) -> float:
    if w.algorithm == "tree":
        return formulas.tree_all_reduce_time(w.n, w.nbytes, w.alpha, w.beta, w.gamma)
    if w.algorithm == "rabenseifner":
        return formulas.rabenseifner_all_reduce_time(w.n, w.nbytes, w.alpha, w.beta, w.gamma)
    # "ring" and "builtin": gloo and NCCL use rings for large buffers.
    return formulas.ring_all_reduce_time(w.n, w.nbytes, w.alpha, w.beta, w.gamma)


def _all_to_all(w: Wire) -> float:
    sizes = w.sizes if w.sizes is not None else (w.nbytes,)
    return formulas.pairwise_all_to_all_time(w.n, sizes, w.alpha, w.beta)


def _ring_share(n: int) -> float:
    return (n - 1) / n


# name -> kind, in the order legends list them.
KINDS: dict[str, CollectiveKind] = {}
# Every registered kind's name (a live view: a kind registered later is in it).
COLLECTIVE_KINDS = KINDS.keys()


def register(kind: CollectiveKind) -> CollectiveKind:
    """Add `kind` (or replace the one of its name); returns it."""
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind (a test's own registration)."""
    KINDS.pop(name, None)


def lookup(name: str) -> CollectiveKind:
    """The kind called `name`; UnknownCollectiveKind (not a KeyError) if none is."""
    kind = KINDS.get(name)
    if kind is None:
        raise UnknownCollectiveKind(name)
    return kind


def busbw(name: str, n: int, nbytes: float, seconds: float) -> float:
    """Bus bandwidth (nccl-tests): algbw times the kind's factor, comparable with the
    link's peak whatever the kind and n."""
    return formulas.algbw(nbytes, seconds) * lookup(name).busbw_factor(n)


def overlaps(name: str) -> bool:
    """Whether spans of kind `name` may run beside their rank's own work (False for any
    kind that is not a collective)."""
    kind = KINDS.get(name)
    return kind is not None and kind.overlaps


for _kind in (
    CollectiveKind("all_reduce", _all_reduce, lambda n: 2 * (n - 1) / n, "AR", "#D37295"),
    CollectiveKind(
        "reduce_scatter",
        lambda w: formulas.ring_reduce_scatter_time(w.n, w.nbytes, w.alpha, w.beta, w.gamma),
        _ring_share,
        "RS",
        "#A0CBE8",
    ),
    CollectiveKind(
        "all_gather",
        lambda w: formulas.ring_all_gather_time(w.n, w.nbytes, w.alpha, w.beta),
        _ring_share,
        "AG",
        "#B6992D",  # olive: apart from compute's teal, which an all-gather's overlaps
    ),
    CollectiveKind(
        "broadcast",
        lambda w: formulas.tree_broadcast_time(w.n, w.nbytes, w.alpha, w.beta),
        lambda n: 1.0,
        "BC",
        "#FABFD2",
    ),
    CollectiveKind("all_to_all", _all_to_all, _ring_share, "A2A", "#D4A6C8"),
    # A barrier moves no data: two passes over a binomial tree of empty messages.
    CollectiveKind(
        "barrier",
        lambda w: 2 * formulas.tree_rounds(w.n) * w.alpha,
        lambda n: 0.0,
        "|",
        "#BAB0AC",
        overlaps=False,
    ),
):
    register(_kind)
