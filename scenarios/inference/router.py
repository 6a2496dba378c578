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

Pure: stdlib only.
"""

from __future__ import annotations

from scenarios.inference.blocks import block_hashes
from scenarios.inference.trace import Request

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

    def __call__(self, request: Request, outstanding: list[int]) -> int:
        least = min(range(self.replicas), key=lambda r: (outstanding[r], r))
        if self.policy == "round-robin":
            target, self.turn = self.turn, (self.turn + 1) % self.replicas
            return target
        if self.policy == "least-outstanding":
            return least
        names = block_hashes(request.prompt, self.block_size)
        target = least
        for name in names:  # the longest run of leading blocks already sent somewhere
            if name not in self.where:
                break
            target = self.where[name]
        for name in names:
            self.where[name] = target
        return target
