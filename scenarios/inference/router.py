"""Routing requests across replicas: round-robin, least-outstanding, prefix-affinity.

Part of lesson 7's mechanism, pure. Data parallelism for serving is several
copies of the model (replicas) behind a router; how the router picks one
shapes latency (docs/references.md, "Routing across replicas"):

- round-robin: replica 0, 1, 2, ... in turn: fair in count, blind to load and
  to what each replica has cached;
- least-outstanding: the replica with the fewest requests sent and not yet
  answered (ties: the lowest index), which follows the load;
- prefix-affinity: the replica the router last sent the longest run of this
  prompt's leading full KV blocks to, so its prefix cache (scenarios.inference
  .blocks) already holds them and that prefill work is skipped; a prompt
  nobody has seen goes to the least-outstanding replica. Production routers do
  the same from their own routing history (SGLang's router keeps a radix tree of
  what it routed where; vLLM's production stack routes by prefix too).

The PP scheduler reuses least-outstanding to pick a virtual engine.

Clients is that load as the drivers keep it (scenarios.inference.serve): the
requests sent to each engine and not yet answered; it routes each arrival to an
engine's queue.
Pure: stdlib only (and the lesson's pure modules).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Protocol

from scenarios.inference.blocks import block_hashes
from scenarios.inference.iteration import Decision
from scenarios.inference.scheduler import Engine
from scenarios.inference.trace import Request


class Load(Protocol):
    """What a router may ask of the engines' load (Clients, below)."""

    def least(self) -> int:
        """The engine with the fewest requests sent and not yet answered (ties: the
        lowest index)."""
        ...


ROUTERS = ("round-robin", "least-outstanding", "prefix-affinity")


class Router:
    """Picks a replica for each request, in arrival order."""

    def __init__(self, policy: str, replicas: int, block_size: int) -> None:
        if policy not in ROUTERS:
            raise ValueError(f"unknown router {policy!r}")
        self.policy = policy
        self.replicas = replicas
        self.block_size = block_size
        self.turn = 0
        self.where: dict[int, int] = {}  # a block's name -> the replica it was last sent to

    def __call__(self, request: Request, load: Load) -> int:
        if self.policy == "round-robin":
            target, self.turn = self.turn, (self.turn + 1) % self.replicas
            return target
        if self.policy == "least-outstanding":
            return load.least()
        names = block_hashes(request.prompt, self.block_size)
        target = None
        for name in names:  # the longest run of leading blocks already sent somewhere
            if name not in self.where:
                break
            target = self.where[name]
        if target is None:
            target = load.least()
        for name in names:
            self.where[name] = target
        return target


class Clients:
    """What the router sees: requests sent to each engine and not yet answered."""

    def __init__(self, engines: int) -> None:
        self.outstanding = [0] * engines  # sent and not answered by the latest arrival
        self.answers: list[tuple[float, int]] = []  # (when, engine): a heap, not yet counted
        self._least = [(0, e) for e in range(engines)]  # (outstanding, engine), some stale

    def least(self) -> int:
        """The engine with the fewest outstanding requests (ties: the lowest index)."""
        heap, outstanding = self._least, self.outstanding
        while heap[0][0] != outstanding[heap[0][1]]:  # an entry from before a change
            heapq.heappop(heap)
        return heap[0][1]

    def _count(self, engine: int, change: int) -> None:
        self.outstanding[engine] += change
        heapq.heappush(self._least, (self.outstanding[engine], engine))

    def deliver(
        self,
        req: Request,
        engines: list[Engine],
        route: Callable[[Request, Clients], int],
        ready: list[float],
    ) -> tuple[int, bool]:
        """Route an arriving request to an engine's queue (an idle engine wakes then);
        returns the engine and whether it woke. Every answer by the arrival counts: the
        loops record an iteration's answers before any request arriving after its end."""
        answers = self.answers
        while answers and answers[0][0] <= req.arrival:
            self._count(heapq.heappop(answers)[1], -1)
        target = route(req, self)
        self._count(target, 1)
        woke = not engines[target].has_work()
        if woke:
            ready[target] = max(ready[target], req.arrival)
        engines[target].queue.append(req.id)
        return target, woke

    def answer(self, engine: int, decided: Decision, t: float) -> None:
        for p in decided.pieces:
            if p.done:
                heapq.heappush(self.answers, (t, engine))
