"""One serving configuration, planned: the scheduler's iterations on a clock.

Part of lesson 7's mechanism, pure. A `Serving` says how a model is served
(TP degree, PP stages, replicas, batching, router, KV pool) and `plan` runs the
scheduler (scenarios.inference.scheduler, .serve) on the step model's clock
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

A plan keeps the scheduler's records (`runs`: a run of alike decode iterations is
one, scenarios.inference.serve), so predict reads latencies and occupancy off
them in closed form; `iterations` (and `each`, `timed`) give every iteration back
in the step-by-step loop's order, as the Program and the timeline need them.

Pure: stdlib and the lesson's pure modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from runtime.sim import formulas
from scenarios.inference.blocks import BlockManager, blocks_for
from scenarios.inference.iteration import Iteration
from scenarios.inference.lumps import Stages, expand, in_order, stage_times
from scenarios.inference.router import Router
from scenarios.inference.scheduler import Engine
from scenarios.inference.serve import serve, serve_pipeline
from scenarios.inference.stagecost import DecodeRun, StageCost
from scenarios.inference.stepmodel import (
    Device,
    Shape,
    Work,
    back_seconds,
    hop_seconds,
)
from scenarios.inference.timing import Timing
from scenarios.inference.trace import Request

MODES = ("tp", "pp", "replicas")
T = TypeVar("T")


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

    def series(self, s: int, work: Work, step: int) -> DecodeRun:
        """Stage s's seconds along a run of decode iterations (StageCost.decode): stages
        alike get the same function."""
        count = len(self.layers[s])
        key = (count, s == 0, s == self.serving.pp - 1)
        memo = self._series
        if work is not memo[0]:
            memo[0], memo[1] = work, {}
        found = memo[1].get((key, step))
        if found is None:
            cost = self._costs.get(key)
            if cost is None:
                cost = self._costs[key] = StageCost(
                    self.shape, self.device, count, embed=s == 0, head=key[2], tp=self.serving.tp
                )
            found = memo[1][(key, step)] = cost.decode(work, step)
        return found

    @cached_property
    def _series(self) -> list:
        return [None, {}]

    def hop(self, work: Work) -> float:
        return hop_seconds(self.shape, self.device, work, across_nodes=self._across())

    def back(self, work: Work) -> float:
        return back_seconds(self.device, work, across_nodes=self._across())

    def _across(self) -> bool:
        per_node = self.device.per_node
        return per_node is not None and self.serving.tp * 2 > per_node

    def timing(self) -> Timing:
        return Timing(self.stage, self.serving.pp, self.hop, self.back, self.series)


@dataclass(frozen=True)
class Plan:
    """A configuration's iterations for one replica group (all of them: TP, replicas) or
    one pipeline, and the requests they served. `runs` is how the scheduler made them
    (a run of alike decode iterations one record: scenarios.inference.serve);
    `iterations` each one, as a real run executes them."""

    serving: Serving
    requests: tuple[Request, ...]
    runs: tuple[Iteration, ...]
    context: int
    batch_bound: bool = True  # whether max_batch ever kept a waiting request out

    @cached_property
    def iterations(self) -> tuple[Iteration, ...]:
        return tuple(self.each())

    def each(self) -> Iterator[Iteration]:
        """Every iteration in order, one at a time (a run's made as they are asked for)."""
        block = self.serving.kv_block
        yield from self._in_order(lambda record: expand(record, block), lambda it: it.start)

    def timed(self) -> Iterator[tuple[Iteration, Stages]]:
        """Every iteration's record and its stages' (start, end), in order: what a
        timeline draws, without making each iteration of a run."""
        yield from self._in_order(
            lambda record: ((record, st) for st in stage_times(record)), lambda x: x[1][0][0]
        )

    def _in_order(
        self, unfold: Callable[[Iteration], Iterator[T]], start: Callable[[T], float]
    ) -> Iterator[T]:
        if self.serving.pp > 1:  # one pipeline: its records are in order
            for record in self.runs:
                yield from unfold(record)
        else:
            yield from in_order(self.runs, self.serving.replicas, unfold, start)

    @property
    def end(self) -> float:
        """When the last iteration's tokens exist (0 without iterations)."""
        return max((it.end for it in self.runs), default=0.0)

    def of_engine(self, engine: int) -> list[Iteration]:
        return [it for it in self.iterations if it.engine == engine]


def plan(
    shape: Shape,
    device: Device,
    serving: Serving,
    requests: tuple[Request, ...],
    *,
    lump: bool = True,
) -> Plan:
    """The scheduler's iterations for `requests` on `serving` (replicas of tp groups, or
    one pipeline of tp groups), timed by `device` (`lump`: runs of alike decode
    iterations as one record each, the same iterations; False: one by one, the
    reference)."""
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
        iterations = serve_pipeline(requests, engines, clock.timing(), route, lump=lump)
    else:
        engines = [
            engine(e, BlockManager(pool_blocks, serving.kv_block)) for e in range(serving.replicas)
        ]
        route = Router(serving.router, serving.replicas, serving.kv_block)
        iterations = serve(requests, engines, clock.timing(), route, lump=lump)
    bound = any(e.batch_bound for e in engines)
    return Plan(serving, requests, tuple(iterations), shape.seq, bound)
