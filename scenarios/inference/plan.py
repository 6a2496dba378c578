"""One serving configuration, planned: the scheduler's iterations on a clock.

Part of lesson 7's mechanism, pure. A `Serving` says how a model is served
(TP degree, PP stages, replicas, batching, router, KV pool) and `plan` runs the
scheduler (scenarios.inference.scheduler) on the step model's clock
(scenarios.inference.stepmodel) for a trace: the very iterations a real run
executes (scenarios.inference.program turns them into Actions, every rank and
torchrun alike, from the params alone) and, on a GPU profile, the prediction
itself (Vidur's way: the real scheduler on a modelled clock).

- tp (and replicas of tp groups): each engine is one model copy; its
  iteration's time is the slice with every layer, the embedding and the head,
  1/t of each matrix, plus TP's collectives.
- pp: `pp` virtual engines (one micro-batch in flight per stage) share one KV
  pool; an iteration passes through the stages, each with its contiguous
  layers (the first with the embedding, the last with the head).

Pure: stdlib and the lesson's pure modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from runtime.sim import formulas
from scenarios.inference.blocks import BlockManager, blocks_for
from scenarios.inference.router import Router
from scenarios.inference.scheduler import Engine, Iteration, Timing, serve, serve_pipeline
from scenarios.inference.stagecost import StageCost
from scenarios.inference.stepmodel import (
    Device,
    Shape,
    Work,
    back_seconds,
    hop_seconds,
)
from scenarios.inference.trace import Request

MODES = ("tp", "pp", "replicas")


@dataclass(frozen=True)
class Serving:
    """How one copy of the model is laid out and how many copies serve."""

    tp: int = 1
    pp: int = 1
    replicas: int = 1
    batching: str = "continuous"
    router: str = "round-robin"
    max_batch: int = 8
    kv_block: int = 8
    kv_blocks: int = 64  # blocks in each engine's pool (a replica's; a pipeline's shared one)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.replicas

    @classmethod
    def of_mode(cls, mode: str, degree: int, **knobs: object) -> Serving:
        """The configuration a lesson's `mode` runs on `degree` ranks."""
        dims = {"tp": (degree, 1, 1), "pp": (1, degree, 1), "replicas": (1, 1, degree)}[mode]
        return cls(*dims, **knobs)  # type: ignore[arg-type]


def stage_layers(layers: int, stages: int) -> list[range]:
    """Contiguous layers per stage, earlier stages taking the extra ones (the last one
    also carries the head): runtime.engine.models.stage_layers' cut, without torch."""
    out, start = [], 0
    for count in formulas.even_split(layers, stages):
        out.append(range(start, start + count))
        start += count
    return out


@dataclass(frozen=True)
class Clock:
    """The step model for one configuration: seconds per stage and hop."""

    shape: Shape
    device: Device
    serving: Serving

    @cached_property
    def layers(self) -> list[range]:
        return stage_layers(self.shape.layers, self.serving.pp)

    def stage(self, s: int, work: Work) -> float:
        """One iteration on stage s (the whole model when pp = 1), TP comm included.
        Stages alike (layer count, embedding, head) cost alike: asked stage by stage for
        one work, each kind is computed once."""
        tp, last = self.serving.tp, s == self.serving.pp - 1
        count = len(self.layers[s])
        memo = self._memo
        if work is not memo[0]:
            memo[0], memo[1] = work, {}
        key = (count, s == 0, last)
        seconds = memo[1].get(key)
        if seconds is None:
            cost = self._costs.get(key)
            if cost is None:
                cost = self._costs[key] = StageCost(
                    self.shape, self.device, count, embed=s == 0, head=last, tp=tp
                )
            seconds = memo[1][key] = cost(work)
        return seconds

    @cached_property
    def _costs(self) -> dict[tuple[int, bool, bool], StageCost]:
        return {}

    @cached_property
    def _memo(self) -> list:
        return [None, {}]

    def hop(self, work: Work) -> float:
        return hop_seconds(self.shape, self.device, work, across_nodes=self._across())

    def back(self, work: Work) -> float:
        return back_seconds(self.device, work, across_nodes=self._across())

    def _across(self) -> bool:
        per_node = self.device.per_node
        return per_node is not None and self.serving.tp * 2 > per_node

    def timing(self) -> Timing:
        return Timing(self.stage, self.serving.pp, self.hop, self.back)


@dataclass(frozen=True)
class Plan:
    """A configuration's iterations for one replica group (all of them: TP, replicas) or
    one pipeline, and the requests they served."""

    serving: Serving
    requests: tuple[Request, ...]
    iterations: tuple[Iteration, ...]
    context: int

    def of_engine(self, engine: int) -> list[Iteration]:
        return [it for it in self.iterations if it.engine == engine]


def plan(shape: Shape, device: Device, serving: Serving, requests: tuple[Request, ...]) -> Plan:
    """The scheduler's iterations for `requests` on `serving` (replicas of tp groups, or
    one pipeline of tp groups), timed by `device`."""
    by_id = {r.id: r for r in requests}
    # A pool larger than every request's blocks at once is never full: the same plan.
    most = sum(blocks_for(r.context + 1, serving.kv_block) for r in requests)
    pool_blocks = max(1, min(serving.kv_blocks, most))
    clock = Clock(shape, device, serving)

    def engine(index: int, blocks: BlockManager) -> Engine:
        return Engine(
            index,
            blocks,
            max_batch=serving.max_batch,
            batching=serving.batching,
            context=shape.seq,
            requests=by_id,
        )

    if serving.pp > 1:
        if serving.replicas > 1:
            raise ValueError("a plan serves one pipeline; split the trace across replicas first")
        pool = BlockManager(pool_blocks, serving.kv_block)
        engines = [engine(g, pool) for g in range(serving.pp)]
        route = Router("least-outstanding", serving.pp, serving.kv_block)
        iterations = serve_pipeline(requests, engines, clock.timing(), route)
    else:
        engines = [
            engine(e, BlockManager(pool_blocks, serving.kv_block)) for e in range(serving.replicas)
        ]
        route = Router(serving.router, serving.replicas, serving.kv_block)
        iterations = serve(requests, engines, clock.timing(), route)
    return Plan(serving, requests, tuple(iterations), shape.seq)
