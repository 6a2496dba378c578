"""Hand-made collectives over send/recv: the real engine's side of runtime.engine.collectives.

runtime.engine.collectives writes each algorithm as Actions (pure data); this module
executes those Actions on a tensor with torch.distributed point-to-point calls
and counts the bytes each rank really puts on the wire. The public helpers
(`ring_all_reduce`, `ring_reduce_scatter`, `ring_all_gather`, `tree_broadcast`,
`tree_all_reduce`) are checked against torch's built-in collectives in the
engine tests. Reduction is a sum.

A ring step (sendrecv) posts its isend and irecv together, as MPI_Sendrecv
does, so gloo and NCCL cannot deadlock on it. The step ends when the incoming
chunk has arrived (and is reduced); its own send may still be on the wire,
like an eager send, so a rank is not held back by a slow right neighbour.
A chunk is never written while a send still reads it (`_settle`).

Every wait on a gloo send or receive goes through `Spent`, which can keep a
finished request a while before it is freed. Freed right after its wait returns, a
request holds its rank until gloo's own thread lets go of it, a scheduler tick
whenever that thread waits for a core (`python benchmarks/p2p_release.py` measures
both ways). The lessons still free at once (SPENT_KEPT 0): keeping requests speeds
calibration's small ring steps up more than the lessons' own runs, so the prediction
before a run would come out short; adopting it waits for the calibration to be
fitted again against the lessons.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from runtime.engine import collectives
from runtime.sim.formulas import even_split
from runtime.sim.program import Action

# Finished requests kept before they are freed, the oldest first: none yet (see the
# docstring); benchmarks/p2p_release.py keeps KEEP_MEASURED.
SPENT_KEPT = 0
KEEP_MEASURED = 64


class Spent:
    """Where finished p2p requests go (see the module's docstring): `wait` waits for a
    request, then keeps it among the last `kept` (the oldest freed in its place; with
    `kept` 0, the lessons' default, each is freed at once). Every executor that waits on
    gloo's sends and receives uses one."""

    def __init__(self, kept: int = SPENT_KEPT) -> None:
        self._works: deque[torch.distributed.Work] = deque(maxlen=kept)

    def wait(self, work: torch.distributed.Work) -> None:
        work.wait()
        self._works.append(work)


class Comm:
    """Executes p2p and collective Actions on one flat tensor, counting bytes."""

    def __init__(self) -> None:
        self.bytes_sent = 0
        self.bytes_received = 0
        self._scratch: dict[tuple[int, torch.dtype, torch.device, int], torch.Tensor] = {}
        self._preposted: dict[str, tuple[torch.distributed.Work | None, torch.Tensor]] = {}
        self._flip = False
        # Sends of ring steps still on the wire, by the chunk they read from.
        self._in_flight: list[tuple[int, torch.distributed.Work]] = []
        self.spent = Spent()

    def _settle(self, chunk: int | None = None) -> None:
        """Wait for in-flight sends (of one chunk, or all of them)."""
        keep = []
        for sent_chunk, work in self._in_flight:
            if chunk is None or sent_chunk == chunk:
                self.spent.wait(work)
            else:
                keep.append((sent_chunk, work))
        self._in_flight = keep

    def reset_counters(self) -> None:
        self.bytes_sent = 0
        self.bytes_received = 0

    def _tmp(self, numel: int, like: torch.Tensor, slot: int = 0) -> torch.Tensor:
        key = (numel, like.dtype, like.device, slot)
        if key not in self._scratch:
            self._scratch[key] = torch.empty(numel, dtype=like.dtype, device=like.device)
        return self._scratch[key]

    def _count(self, sent: torch.Tensor | None, received: torch.Tensor | None) -> None:
        if sent is not None:
            self.bytes_sent += sent.numel() * sent.element_size()
        if received is not None:
            self.bytes_received += received.numel() * received.element_size()

    def _chunks(self, action: Action, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tensor.split(even_split(tensor.numel(), action.arg("parts")))

    def _post_recv(
        self, action: Action, tensor: torch.Tensor
    ) -> tuple[torch.distributed.Work | None, torch.Tensor]:
        """Post the receive of a ring step: into a scratch buffer when it reduces, else in place."""
        recv_chunk = action.arg("recv_chunk")
        target = self._chunks(action, tensor)[recv_chunk]
        if action.reduce:
            # Two scratch buffers alternate, so a pre-posted receive never lands in
            # the buffer the current step is still adding from.
            self._flip = not self._flip
            incoming = self._tmp(target.numel(), target, slot=int(self._flip))
        else:
            self._settle(recv_chunk)  # never write a chunk a send still reads
            incoming = target
        request = dist.irecv(incoming, action.src) if incoming.numel() else None
        return request, incoming

    def execute(
        self, action: Action, tensor: torch.Tensor, after: Action | None = None
    ) -> float | None:
        """Run one action on `tensor`; `after` is the next action, to pre-post its receive.
        Returns the seconds spent reducing what arrived (the local compute of a ring step,
        which a slowed rank slows: runtime.engine.worker), None when it reduced nothing."""
        kind = action.kind
        reduced = None
        if kind == "sendrecv":
            chunks = self._chunks(action, tensor)
            outgoing = chunks[action.arg("send_chunk")]
            target = chunks[action.arg("recv_chunk")]
            request, incoming = self._preposted.pop(action.id, None) or self._post_recv(
                action, tensor
            )
            # Empty chunks (fewer elements than ranks) are skipped by both ends alike.
            if outgoing.numel():
                self._in_flight.append((action.arg("send_chunk"), dist.isend(outgoing, action.dst)))
            if after is not None and after.kind == "sendrecv" and after.src == action.src:
                # Post the next step's receive now, so the left neighbour's next chunk
                # can flow while this one is reduced (gloo's own ring overlaps the same way).
                self._preposted[after.id] = self._post_recv(after, tensor)
            if request is not None:
                self.spent.wait(request)
            if action.reduce:
                began = time.perf_counter()
                target.add_(incoming)
                reduced = time.perf_counter() - began
            self._count(outgoing, incoming)
        elif kind == "send":
            self._settle()
            self.spent.wait(dist.isend(tensor, action.dst))
            self._count(tensor, None)
        elif kind == "recv":
            self._settle()
            incoming = self._tmp(tensor.numel(), tensor) if action.reduce else tensor
            self.spent.wait(dist.irecv(incoming, action.src))
            if action.reduce:
                began = time.perf_counter()
                tensor.add_(incoming)
                reduced = time.perf_counter() - began
            self._count(None, incoming)
        elif kind == "all_reduce":
            self._settle()
            dist.all_reduce(tensor)
        elif kind == "broadcast":
            dist.broadcast(tensor, src=(action.group or (0,))[0])
        elif kind == "barrier":
            if after is not None and after.kind == "sendrecv":
                # The ring's first receive, posted before the barrier: its rendezvous
                # with the sender happens while the ranks line up, not on the clock.
                self._preposted[after.id] = self._post_recv(after, tensor)
            dist.barrier()
        else:
            raise ValueError(f"Comm cannot execute a {kind!r} action")
        return reduced

    def run(
        self, actions: Sequence[Action], tensor: torch.Tensor, runner: Callable | None = None
    ) -> None:
        """Execute `actions` in order; `runner(actions, handler)` may time each (RankContext.execute)."""
        actions = list(actions)
        following = {a.id: b for a, b in zip(actions, actions[1:], strict=False)}
        handler = lambda action: self.execute(action, tensor, following.get(action.id))  # noqa: E731
        if runner is None:
            for action in actions:
                handler(action)
        else:
            runner(actions, handler)
        self._settle()


def _mine(schedule: dict[int, list[Action]]) -> list[Action]:
    return schedule.get(dist.get_rank(), [])


def _world() -> list[int]:
    return list(range(dist.get_world_size()))


def ring_all_reduce(tensor: torch.Tensor, comm: Comm | None = None) -> torch.Tensor:
    """In-place sum over all ranks of a flat tensor: ring reduce-scatter then all-gather."""
    flat = tensor.view(-1)
    (comm or Comm()).run(
        _mine(collectives.ring_all_reduce(_world(), flat.numel(), flat.element_size())), flat
    )
    return tensor


def ring_reduce_scatter(tensor: torch.Tensor, comm: Comm | None = None) -> torch.Tensor:
    """Sum over ranks; returns this rank's chunk (torch's reduce_scatter_tensor ownership)."""
    flat = tensor.view(-1).clone()
    n, rank = dist.get_world_size(), dist.get_rank()
    (comm or Comm()).run(
        _mine(collectives.ring_reduce_scatter(_world(), flat.numel(), flat.element_size())), flat
    )
    return flat.split(even_split(flat.numel(), n))[rank].clone()


def ring_all_gather(
    chunk: torch.Tensor, sizes: Sequence[int], comm: Comm | None = None
) -> torch.Tensor:
    """Gather every rank's chunk (chunk i from rank i, `sizes[i]` elements) into one flat tensor."""
    n, rank = dist.get_world_size(), dist.get_rank()
    total = sum(sizes)
    if list(sizes) != even_split(total, n):
        raise ValueError("ring_all_gather expects the even_split sizes of the total")
    out = torch.empty(total, dtype=chunk.dtype, device=chunk.device)
    out.split(list(sizes))[rank].copy_(chunk.view(-1))
    (comm or Comm()).run(
        _mine(collectives.ring_all_gather(_world(), total, out.element_size())), out
    )
    return out


def tree_broadcast(tensor: torch.Tensor, root: int = 0, comm: Comm | None = None) -> torch.Tensor:
    flat = tensor.view(-1)
    schedule = collectives.tree_broadcast(_world(), flat.numel() * flat.element_size(), root=root)
    (comm or Comm()).run(_mine(schedule), flat)
    return tensor


def tree_all_reduce(tensor: torch.Tensor, comm: Comm | None = None) -> torch.Tensor:
    flat = tensor.view(-1)
    schedule = collectives.tree_all_reduce(_world(), flat.numel() * flat.element_size())
    (comm or Comm()).run(_mine(schedule), flat)
    return tensor
