"""The drivers: engines run on one clock, each iteration recorded with its times.

Part of lesson 7's mechanism, pure. `serve` runs one engine (TP) or replicas behind
a router (scenarios.inference.router, whose Clients route each arrival), and
`serve_pipeline` PP with `pp` virtual engines (vLLM's: one micro-batch in flight per
stage) whose iterations pass through the stages, each waiting for its previous one's
tokens to come back from the last stage; a send holds its sender until delivered.
The engines decide (scenarios.inference.scheduler); the clock is a Timing
(scenarios.inference.timing).

Runs of alike iterations are lumped (`lump`, the default), the way the project
lumps identical steps: once an engine only decodes the same sequences until its
next event (a sequence done, a request's arrival; under PP, while one virtual
engine alone has work), those iterations are one record (`repeat` of them) that
moves the KV pool in one go (BlockManager.decode), counts its tokens and KV in
closed form, and keeps each iteration's stage times, computed on the way as the
step-by-step loop computes them (the same floats). Replicas' records are each
engine's in its order; scenarios.inference.lumps reads them back as the very
iterations, in the very order, the step-by-step loop makes
(tests/test_inference_closed_form.py checks it on many configurations).
Pure: stdlib only (and the lesson's pure modules).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence

from scenarios.inference.iteration import Decision, Iteration
from scenarios.inference.router import Clients
from scenarios.inference.scheduler import Engine
from scenarios.inference.timing import Timing
from scenarios.inference.trace import Request


def _iteration(engine: Engine, decided: Decision, stages: list[tuple[float, float]]) -> Iteration:
    arrivals = [engine.requests[r].arrival for r in decided.newcomers]
    return Iteration(
        engine=engine.index,
        prefill=decided.prefill,
        pieces=decided.pieces,
        wait_until=max(arrivals) if arrivals else None,
        start=stages[0][0],
        end=stages[-1][1],
        hits=decided.hits,
        kv=decided.kv,
        contiguous=decided.contiguous,
        stages=tuple(stages),
    )


def _run(
    engine: Engine, decided: Decision, bounds: list[float], count: int, stages: int
) -> Iteration:
    """The record of a run of `count` decode iterations (`bounds`: their stage times)."""
    last = bounds[-2 * stages :]
    return Iteration(
        engine=engine.index,
        prefill=False,
        pieces=decided.pieces,
        wait_until=None,
        start=bounds[0],
        end=bounds[-1],
        hits=0,
        kv=decided.kv,
        contiguous=decided.contiguous,
        stages=tuple(zip(last[::2], last[1::2], strict=True)),
        repeat=count,
        bounds=tuple(bounds) if count > 1 else (),
    )


def serve(
    requests: Sequence[Request],
    engines: list[Engine],
    timing: Timing,
    route: Callable[[Request, Clients], int],
    *,
    lump: bool = True,
) -> list[Iteration]:
    """TP (one engine) or replicas behind `route(request, clients) -> engine`: every
    engine on one clock, arrivals routed in time order, an iteration seeing every
    request that arrived by its start. Iterations in start order (`lump`: runs of alike
    decode iterations as one record each, each engine's in its order: `in_order`)."""
    free_at = [0.0] * len(engines)
    busy: list[tuple[float, int]] = []  # (free_at, engine) of the engines with work: a heap
    clients = Clients(len(engines))
    out: list[Iteration] = []
    pending = deque(sorted(requests, key=lambda r: (r.arrival, r.id)))
    while True:
        t, e = busy[0] if busy else (math.inf, -1)
        if pending and pending[0].arrival <= t:
            target, woke = clients.deliver(pending.popleft(), engines, route, free_at)
            if woke:
                heapq.heappush(busy, (free_at[target], target))
            continue
        if e < 0:
            return out
        heapq.heappop(busy)
        engine = engines[e]
        decided = engine.step()
        if decided is None:  # its own pool cannot hold the head request, ever
            raise ValueError(f"engine {e}: a request's KV cache is larger than its pool")
        end = t + timing.stage(0, decided.work)
        out.append(_iteration(engine, decided, [(t, end)]))
        clients.answer(e, decided, end)
        free_at[e] = end
        count = engine.quiet_for() if lump else 0
        if count:
            end = _serve_run(engine, timing, count, end, pending, clients, out)
            free_at[e] = end
        if engine.has_work():
            heapq.heappush(busy, (end, e))


def _serve_run(
    engine: Engine,
    timing: Timing,
    count: int,
    end: float,
    pending: deque[Request],
    clients: Clients,
    out: list[Iteration],
) -> float:
    """Up to `count` alike decode iterations of `engine` from `end`, as one record:
    those the step-by-step loop would run before the next request arrives (the other
    engines go on meanwhile, on their own: `in_order` puts the iterations back in the
    loop's order). Returns when the engine is free."""
    arrival = pending[0].arrival if pending else math.inf
    work = engine.next_work()
    bounds = timing.along(0, work, work.seqs).walk(end, count, arrival)
    j = len(bounds) // 2
    if j:
        end = bounds[-1]
        decided = engine.run(j)
        out.append(_run(engine, decided, bounds, j, 1))
        clients.answer(engine.index, decided, end)
    return end


def serve_pipeline(
    requests: Sequence[Request],
    engines: list[Engine],
    timing: Timing,
    route: Callable[[Request, Clients], int],
    *,
    lump: bool = True,
) -> list[Iteration]:
    """PP: the engines are virtual engines sharing one KV pool, their iterations going
    through `timing.stages` stages in the order they enter the first; an engine's next
    iteration waits for its previous one's tokens to come back. Iterations in the
    order they enter the first stage (every stage processes them in that order;
    `lump`: while one virtual engine alone has work, its runs of alike decode
    iterations as one record each)."""
    stage_free = [0.0] * timing.stages
    ready = [0.0] * len(engines)
    blocked: set[int] = set()  # waiting for the shared pool to free blocks
    clients = Clients(len(engines))
    out: list[Iteration] = []
    pending = deque(sorted(requests, key=lambda r: (r.arrival, r.id)))
    last = timing.stages - 1
    while True:
        starts = [
            (max(stage_free[0], ready[g]), g)
            for g, eng in enumerate(engines)
            if eng.has_work() and g not in blocked
        ]
        t, g = min(starts) if starts else (math.inf, -1)
        if pending and pending[0].arrival <= t:
            blocked.discard(clients.deliver(pending.popleft(), engines, route, ready)[0])
            continue
        if g < 0:
            if blocked:
                raise ValueError("a request's KV cache is larger than the pool")
            return out
        decided = engines[g].step()
        if decided is None:  # the shared pool is full for now: retry once others move
            blocked.add(g)
            continue
        stages, begin, work = [], t, decided.work
        hop = timing.hop(work)
        for s in range(timing.stages):
            if s:
                begin = max(stage_free[s], stages[-1][1] + hop)
            end = begin + timing.stage(s, work)
            stage_free[s] = end + (hop if s < last else 0.0)  # a send holds its sender
            stages.append((begin, end))
        out.append(_iteration(engines[g], decided, stages))
        clients.answer(g, decided, stages[-1][1])
        ready[g] = stages[-1][1]
        if any(p.feeds_back for p in decided.pieces):  # the tokens go back to stage 0
            ready[g] = stage_free[last] = stages[-1][1] + timing.back(work)
        for other in blocked:
            ready[other] = max(ready[other], stage_free[0])
        blocked.clear()
        if lump and not any(eng.has_work() for f, eng in enumerate(engines) if f != g):
            _pipeline_run(engines[g], timing, pending, stage_free, ready, clients, out)


def _pipeline_run(
    engine: Engine,
    timing: Timing,
    pending: deque[Request],
    stage_free: list[float],
    ready: list[float],
    clients: Clients,
    out: list[Iteration],
) -> None:
    """The one busy virtual engine's next alike decode iterations, as serve_pipeline's
    loop would go through them, as one record."""
    count = engine.quiet_for()
    if not count:
        return
    g, last = engine.index, timing.stages - 1
    work = engine.next_work()
    hop, back = timing.hop(work), timing.back(work)  # T·h and the tokens: alike along the run
    kinds: dict[int, int] = {}  # stages alike share one function (Clock's memo)
    along = []
    slot = []
    for s in range(timing.stages):
        f = timing.along(s, work, work.seqs)
        if id(f) not in kinds:
            kinds[id(f)] = len(along)
            along.append(f)
        slot.append(kinds[id(f)])
    fed_last = not engine.all_leave(count)
    bounds: list[float] = []
    j = 0
    while j < count:
        t = max(stage_free[0], ready[g])
        if pending and pending[0].arrival <= t:
            break
        seconds = [f(j) for f in along]
        begin = end = t
        for s in range(timing.stages):
            if s:
                begin = max(stage_free[s], end + hop)
            end = begin + seconds[slot[s]]
            stage_free[s] = end + (hop if s < last else 0.0)
            bounds += (begin, end)
        ready[g] = end
        if j < count - 1 or fed_last:
            ready[g] = stage_free[last] = end + back
        j += 1
    if j:
        decided = engine.run(j)
        out.append(_run(engine, decided, bounds, j, timing.stages))
        clients.answer(g, decided, bounds[-1])
