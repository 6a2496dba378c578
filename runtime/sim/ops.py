"""The simulator's ops: each Action compiled to the numbers its event loop needs, and the Run.

Part of the simulator (docs/design.md's second engine). runtime.sim.simulate compiles
each Action into one op; runtime.sim.eventloop runs them, one handler per op type. A
lesson that predicts at a scale where building every Action would be slow (a 64-stage
pipeline of 256 microbatches) compiles one Action of each shape and repeats its ops.

Ops are NamedTuples: immutable, cheap to build and to repeat along a row, their
fields named. `link` and `channel` are any hashable keys: messages on one link queue
one after another; on one channel they pair in order. `group` is a collective group's
id (its index in the compiler's list of groups); `signature` is what the members of a
group must agree on (the kind and the bytes, or each member's sizes).

`Run` is what running them gives (runtime.sim.eventloop.run_ops): where each op started
and ended, and where each rank stopped.

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple


class Compute(NamedTuple):
    """A compute: `seconds` with a core to itself (shared: runtime.sim.coresharing)."""

    seconds: float


class Synced(NamedTuple):
    """A compute that runs collectives inside it (FSDP2's forward all-gathers unit by
    unit): computed as a Compute, then it ends on every member of `group` together, when
    the last member's compute has."""

    seconds: float
    group: int
    signature: Hashable


class Io(NamedTuple):
    """Busy for `seconds` without holding a core: a checkpoint's write waits on the disk."""

    seconds: float


class Send(NamedTuple):
    """A message that takes `link` for alpha + bytes·beta once the link is free, and pairs
    on `channel`. `issue`: None blocks the sender until it arrives; else the seconds the
    sender is held while it issues a non-blocking send."""

    link: Hashable
    alpha: float
    bytes_beta: float
    channel: Hashable
    issue: float | None


class Recv(NamedTuple):
    """Until the next message on `channel` has arrived, then `reduce` seconds reducing it."""

    channel: Hashable
    reduce: float


class SendRecv(NamedTuple):
    """A ring step: posts its message as a Send (eager) and ends as a Recv."""

    link: Hashable
    alpha: float
    bytes_beta: float
    out_channel: Hashable
    in_channel: Hashable
    reduce: float


class Collective(NamedTuple):
    """A blocking collective: it ends `seconds` after the last member of `group` arrived."""

    group: int
    seconds: float
    signature: Hashable


class Launch(NamedTuple):
    """A non-blocking collective (a DDP bucket's all-reduce): the rank goes on at once; it
    starts when every member launched it and each member's communication stream is free
    (its non-blocking collectives run one after another, in launch order), and ends
    `seconds` later; a member's op spans its launch to that end."""

    group: int
    seconds: float
    signature: Hashable


class Drain(NamedTuple):
    """Until every non-blocking collective the rank launched has ended."""


class Idle(NamedTuple):
    """Idle until `seconds` after the end of the rank's op `back` places earlier (a server
    waiting for a request's arrival, from where its run started)."""

    seconds: float
    back: int


Op = Compute | Synced | Io | Send | Recv | SendRecv | Collective | Launch | Drain | Idle

# Ops after which their rank has blocked: the compute after one pays the model's wake-up
# (runtime.sim.corrections.Corrections.wake).
BLOCKING: frozenset[type] = frozenset({Recv, SendRecv, Collective, Drain, Idle, Io})
# Ops that compute on a core (the wake-up is added to their seconds).
COMPUTING: frozenset[type] = frozenset({Compute, Synced})


class CollectiveMismatch(Exception):
    """Members of a group issued different collectives: (rank, op index) of each."""

    def __init__(self, heads: list[tuple[int, int]]):
        super().__init__("collective mismatch")
        self.heads = heads


@dataclass
class Run:
    """Where each op started and ended, and where each rank stopped."""

    starts: list[list[float]]
    ends: list[list[float]]
    order: list[int]  # the rank of each op, in the order ops ended
    pc: list[int]  # ops each rank ended (all of them, unless it is stuck)
    registered: dict[int, tuple[int, int]]  # rank -> the collective it waits in
    arrivals: dict[tuple[int, int], dict[int, float]]  # collective -> who arrived when
    # Non-blocking collectives some member never launched: key -> who launched it.
    launched: dict[tuple[int, int], dict[int, float]] = field(default_factory=dict)

    def stuck(self) -> list[int]:
        return [
            r
            for r, (done, row) in enumerate(zip(self.pc, self.starts, strict=True))
            if done < len(row)
        ]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection meanwhile: a simulation allocates no cycles, and the
    passes over its records would cost a large prediction a noticeable share."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
