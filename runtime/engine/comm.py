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

A run is planned before it is timed (`Comm.plan`): each ring step's chunk views,
peers and receive buffer are looked up once, the views and the two alternating
receive buffers made once per tensor, so a timed step allocates nothing in Python but
torch's own request objects (and the ints of its byte counts).

Every wait on a gloo send or receive goes through `Spent`, which can keep a
finished request a while before it is freed. Freed right after its wait returns, a
request holds its rank until gloo's own thread lets go of it, a scheduler tick
whenever that thread waits for a core (`python benchmarks/p2p_release.py` measures
both ways). Calibration and most lessons still free at once (SPENT_KEPT 0): keeping
requests speeds calibration's small ring steps up more than the lessons' own runs, so
the prediction before a run would come out short; adopting it everywhere waits for the
calibration to be fitted again against the lessons. Lesson 1's hand ring keeps
KEEP_MEASURED (scenarios/ring_allreduce/rank.py): it is timed beside torch's
all_reduce, which pays no such toll, and its prediction after a run is refined from
its own steps.

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


class _Step:
    """What a ring step (sendrecv) needs, looked up once before the timed run: its
    chunks' views of the tensor, the peers, where the receive lands, and the next step's
    receive to post early. Executing it then allocates nothing in Python but torch's
    request objects."""

    __slots__ = (
        "action",
        "outgoing",
        "target",
        "send_chunk",
        "recv_chunk",
        "dst",
        "src",
        "reduce",
        "sent_bytes",
        "received_bytes",
        "incoming",
        "following",
    )

    def __init__(self, comm: Comm, action: Action, tensor: torch.Tensor, slot: int) -> None:
        chunks = comm._chunks(action, tensor)
        self.action = action
        self.send_chunk: int = action.arg("send_chunk")
        self.recv_chunk: int = action.arg("recv_chunk")
        self.outgoing = chunks[self.send_chunk]
        self.target = chunks[self.recv_chunk]
        self.dst, self.src, self.reduce = action.dst, action.src, action.reduce
        # Two scratch buffers alternate (slot), so a receive posted early never lands in
        # the buffer the current step is still adding from; without a reduction the
        # chunk is received in place.
        self.incoming = (
            comm._tmp(self.target.numel(), self.target, slot) if self.reduce else self.target
        )
        self.sent_bytes = self.outgoing.numel() * self.outgoing.element_size()
        self.received_bytes = self.incoming.numel() * self.incoming.element_size()
        self.following: _Step | None = None  # the next step, when its receive can go early


class Comm:
    """Executes p2p and collective Actions on one flat tensor, counting bytes."""

    def __init__(self) -> None:
        self.bytes_sent = 0
        self.bytes_received = 0
        self._scratch: dict[tuple[int, torch.dtype, torch.device, int], torch.Tensor] = {}
        self._splits: dict[tuple[int, int, int], tuple[torch.Tensor, ...]] = {}
        # The receive posted early for the next ring step (`_Step.following`): its step,
        # the request (None for an empty chunk).
        self._preposted: _Step | None = None
        self._preposted_request: torch.distributed.Work | None = None
        # Sends of ring steps still on the wire, and the chunk each reads from.
        self._in_flight: list[torch.distributed.Work] = []
        self._in_flight_chunks: list[int] = []
        self.spent = Spent()

    def _settle(self, chunk: int | None = None) -> None:
        """Wait for in-flight sends (of one chunk, or all of them); the lists are compacted
        in place, not rebuilt."""
        works, chunks = self._in_flight, self._in_flight_chunks
        kept = 0
        for i in range(len(works)):
            if chunk is None or chunks[i] == chunk:
                self.spent.wait(works[i])
            else:
                works[kept], chunks[kept] = works[i], chunks[i]
                kept += 1
        del works[kept:], chunks[kept:]

    def settle(self) -> None:
        """Wait until no send still reads the tensor (before it is written again)."""
        self._settle()

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
        """The tensor's chunks for `action`'s parts: views made once per tensor and count."""
        parts = action.arg("parts")
        key = (tensor.data_ptr(), tensor.numel(), parts)
        chunks = self._splits.get(key)
        if chunks is None:
            chunks = self._splits[key] = tensor.split(even_split(tensor.numel(), parts))
        return chunks

    def _post(self, step: _Step) -> torch.distributed.Work | None:
        """Post a ring step's receive (in place: once no send still reads that chunk)."""
        if not step.reduce:
            self._settle(step.recv_chunk)  # never write a chunk a send still reads
        return dist.irecv(step.incoming, step.src) if step.received_bytes else None

    def _ring_step(self, step: _Step) -> float | None:
        request = self._preposted_request if self._preposted is step else self._post(step)
        self._preposted = self._preposted_request = None
        # Empty chunks (fewer elements than ranks) are skipped by both ends alike.
        if step.sent_bytes:
            self._in_flight.append(dist.isend(step.outgoing, step.dst))
            self._in_flight_chunks.append(step.send_chunk)
        following = step.following
        if following is not None:
            # Post the next step's receive now, so the left neighbour's next chunk can
            # flow while this one is reduced (gloo's own ring overlaps the same way).
            self._preposted_request = self._post(following)
            self._preposted = following
        if request is not None:
            self.spent.wait(request)
        self.bytes_sent += step.sent_bytes
        self.bytes_received += step.received_bytes
        if not step.reduce:
            return None
        began = time.perf_counter()
        step.target.add_(step.incoming)
        return time.perf_counter() - began

    def plan(self, actions: Sequence[Action], tensor: torch.Tensor) -> Plan:
        """The handler that executes `actions` (in this order) on `tensor`, each ring step
        looked up beforehand (_Step): what a timed loop calls, once per action."""
        return Plan(self, list(actions), tensor)

    def execute(
        self,
        action: Action,
        tensor: torch.Tensor,
        after: Action | None = None,
        steps: dict[str, _Step] | None = None,
    ) -> float | None:
        """Run one action on `tensor`; `after` is the next action and `steps` the planned
        ring steps (Comm.plan), to post the ring's first receive before a barrier.
        Returns the seconds spent reducing what arrived (the local compute of a ring step,
        which a slowed rank slows: runtime.engine.worker), None when it reduced nothing."""
        kind = action.kind
        reduced = None
        if kind == "sendrecv":  # unplanned (plan() runs its steps itself): looked up now
            reduced = self._ring_step(_Step(self, action, tensor, slot=0))
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
            first = steps.get(after.id) if steps is not None and after is not None else None
            if first is not None:
                # The ring's first receive, posted before the barrier: its rendezvous
                # with the sender happens while the ranks line up, not on the clock.
                self._preposted_request = self._post(first)
                self._preposted = first
            dist.barrier()
        else:
            raise ValueError(f"Comm cannot execute a {kind!r} action")
        return reduced

    def run(
        self, actions: Sequence[Action], tensor: torch.Tensor, runner: Callable | None = None
    ) -> None:
        """Execute `actions` in order; `runner(actions, handler)` may time each (RankContext.execute)."""
        actions = list(actions)
        handler = self.plan(actions, tensor)
        if runner is None:
            for action in actions:
                handler(action)
        else:
            runner(actions, handler)
        self._settle()


class Plan:
    """`actions` on `tensor`, ready to run: called with each action in turn (the handler
    of RankContext.execute). Every ring step is a _Step made here, before the clock: its
    chunk views and receive buffers are the Comm's, the same for every plan of the same
    tensor, so running an iteration again allocates none."""

    def __init__(self, comm: Comm, actions: list[Action], tensor: torch.Tensor) -> None:
        self.comm, self.tensor = comm, tensor
        self.steps: dict[str, _Step] = {}
        slot = 0
        for action in actions:
            if action.kind == "sendrecv":
                slot = 1 - slot if action.reduce else slot
                self.steps[action.id] = _Step(comm, action, tensor, slot)
        self.following: dict[str, Action] = {}
        for action, after in zip(actions, actions[1:], strict=False):
            self.following[action.id] = after
            step, next_step = self.steps.get(action.id), self.steps.get(after.id)
            if step is not None and next_step is not None and next_step.src == step.src:
                step.following = next_step

    def __call__(self, action: Action) -> float | None:
        step = self.steps.get(action.id)
        if step is not None and step.action is action:
            return self.comm._ring_step(step)
        return self.comm.execute(action, self.tensor, self.following.get(action.id), self.steps)


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
