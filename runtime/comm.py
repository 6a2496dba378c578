"""Hand-made collectives over send/recv: the real engine's side of runtime.collectives.

runtime.collectives writes each algorithm as Actions (pure data); this module
executes those Actions on a tensor with torch.distributed point-to-point calls
and counts the bytes each rank really puts on the wire. The public helpers
(`ring_all_reduce`, `ring_reduce_scatter`, `ring_all_gather`, `tree_broadcast`,
`tree_all_reduce`) are checked against torch's built-in collectives in the
engine tests. Reduction is a sum.

A ring step (sendrecv) posts its isend and irecv together, as MPI_Sendrecv
does: with both directions in flight no rank waits for its neighbour to finish
sending first, and gloo and NCCL cannot deadlock on it.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from runtime import collectives
from runtime.formulas import even_split
from runtime.program import Action


class Comm:
    """Executes p2p and collective Actions on one flat tensor, counting bytes."""

    def __init__(self) -> None:
        self.bytes_sent = 0
        self.bytes_received = 0
        self._scratch: dict[tuple[int, torch.dtype, torch.device], torch.Tensor] = {}

    def reset_counters(self) -> None:
        self.bytes_sent = 0
        self.bytes_received = 0

    def _tmp(self, numel: int, like: torch.Tensor) -> torch.Tensor:
        key = (numel, like.dtype, like.device)
        if key not in self._scratch:
            self._scratch[key] = torch.empty(numel, dtype=like.dtype, device=like.device)
        return self._scratch[key]

    def _count(self, sent: torch.Tensor | None, received: torch.Tensor | None) -> None:
        if sent is not None:
            self.bytes_sent += sent.numel() * sent.element_size()
        if received is not None:
            self.bytes_received += received.numel() * received.element_size()

    def execute(self, action: Action, tensor: torch.Tensor) -> None:
        kind = action.kind
        if kind == "sendrecv":
            chunks = tensor.split(even_split(tensor.numel(), action.arg("parts")))
            outgoing = chunks[action.arg("send_chunk")]
            target = chunks[action.arg("recv_chunk")]
            incoming = self._tmp(target.numel(), target) if action.reduce else target
            # An empty chunk (fewer elements than ranks) is skipped by both ends alike.
            requests = []
            if outgoing.numel():
                requests.append(dist.isend(outgoing, action.dst))
            if incoming.numel():
                requests.append(dist.irecv(incoming, action.src))
            for request in requests:
                request.wait()
            if action.reduce:
                target.add_(incoming)
            self._count(outgoing, incoming)
        elif kind == "send":
            dist.send(tensor, action.dst)
            self._count(tensor, None)
        elif kind == "recv":
            incoming = self._tmp(tensor.numel(), tensor) if action.reduce else tensor
            dist.recv(incoming, action.src)
            if action.reduce:
                tensor.add_(incoming)
            self._count(None, incoming)
        elif kind == "all_reduce":
            dist.all_reduce(tensor)
        elif kind == "broadcast":
            dist.broadcast(tensor, src=(action.group or (0,))[0])
        elif kind == "barrier":
            dist.barrier()
        else:
            raise ValueError(f"Comm cannot execute a {kind!r} action")

    def run(self, actions: Sequence[Action], tensor: torch.Tensor, runner: Callable | None = None) -> None:
        """Execute `actions` in order; `runner(actions, handler)` may time each (RankContext.execute)."""
        handler = lambda action: self.execute(action, tensor)  # noqa: E731
        if runner is None:
            for action in actions:
                handler(action)
        else:
            runner(actions, handler)


def _mine(schedule: dict[int, list[Action]]) -> list[Action]:
    return schedule.get(dist.get_rank(), [])


def _world() -> list[int]:
    return list(range(dist.get_world_size()))


def ring_all_reduce(tensor: torch.Tensor, comm: Comm | None = None) -> torch.Tensor:
    """In-place sum over all ranks of a flat tensor: ring reduce-scatter then all-gather."""
    flat = tensor.view(-1)
    (comm or Comm()).run(_mine(collectives.ring_all_reduce(_world(), flat.numel(), flat.element_size())), flat)
    return tensor


def ring_reduce_scatter(tensor: torch.Tensor, comm: Comm | None = None) -> torch.Tensor:
    """Sum over ranks; returns this rank's chunk (torch's reduce_scatter_tensor ownership)."""
    flat = tensor.view(-1).clone()
    n, rank = dist.get_world_size(), dist.get_rank()
    (comm or Comm()).run(_mine(collectives.ring_reduce_scatter(_world(), flat.numel(), flat.element_size())), flat)
    return flat.split(even_split(flat.numel(), n))[rank].clone()


def ring_all_gather(chunk: torch.Tensor, sizes: Sequence[int], comm: Comm | None = None) -> torch.Tensor:
    """Gather every rank's chunk (chunk i from rank i, `sizes[i]` elements) into one flat tensor."""
    n, rank = dist.get_world_size(), dist.get_rank()
    total = sum(sizes)
    if list(sizes) != even_split(total, n):
        raise ValueError("ring_all_gather expects the even_split sizes of the total")
    out = torch.empty(total, dtype=chunk.dtype, device=chunk.device)
    out.split(list(sizes))[rank].copy_(chunk.view(-1))
    (comm or Comm()).run(_mine(collectives.ring_all_gather(_world(), total, out.element_size())), out)
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
