"""The server's scheduler: which sequences run in each iteration, and when.

Part of lesson 7's mechanism, pure: it plans the Program the ranks execute
(scenarios.inference.plan, .program) and, on a GPU profile, is the prediction
itself (.predict, .search), as Vidur (Agrawal et al. 2024) predicts serving:
the real scheduler's decisions on a clock costed from a model of its operators.

An Engine holds the sequences one model copy serves and a KV pool
(scenarios.inference.blocks). At each iteration boundary (iteration-level
scheduling, Orca, Yu et al. 2022):

- continuous: finished sequences have left; waiting requests join, first come
  first served, while a batch slot (`max_batch`) and the KV blocks of their
  whole context are free. New requests run a prefill iteration of their own
  (their prompts, minus any cached prefix; vLLM's default before chunked
  prefill), which emits their first token; otherwise every running sequence
  decodes one token. A request leaves the moment its last token is out, and
  its slot is taken in the very next iteration.
- static: a batch is formed only when the engine is empty, then decodes until
  its longest member is done; members that finish early stay in the batch as
  padding (computed, their tokens thrown away), and nobody joins meanwhile.

Drivers run engines on one clock: `serve` for one engine (TP) or replicas
behind a router (scenarios.inference.router), `serve_pipeline` for PP with `pp`
virtual engines (vLLM's: one micro-batch in flight per stage) whose iterations
pass through the stages, each waiting for its previous one's tokens to come
back from the last stage; a send holds its sender until delivered.
Pure: stdlib only (and the lesson's pure modules).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from scenarios.inference.blocks import BlockManager
from scenarios.inference.stepmodel import Work
from scenarios.inference.trace import Request


# The records a plan makes per iteration and per sequence in it (tens of thousands in a
# config search) are NamedTuples: immutable like a frozen dataclass, built faster.
class Piece(NamedTuple):
    """One sequence's share of an iteration: positions start..start+count-1, and the
    token sampled from the last of them."""

    request: int
    start: int
    count: int
    blocks: tuple[int, ...]  # its block table once they are written
    first: bool = False  # the request's first token (its prefill)
    done: bool = False  # the request's last token: its answer is complete
    leaves: bool = False  # the sequence leaves the batch after this iteration
    padding: bool = False  # static batching: a finished member, computed for nothing

    @property
    def feeds_back(self) -> bool:
        """Its sampled token is the sequence's next input."""
        return not self.leaves


class Decision(NamedTuple):
    """What an engine runs next, and its KV occupancy while it runs."""

    prefill: bool
    pieces: tuple[Piece, ...]
    newcomers: tuple[int, ...]
    hits: int
    kv: tuple[int, int]
    contiguous: tuple[int, int]
    work: Work  # Work.of its pieces, each emitting a token


class Iteration(NamedTuple):
    """One iteration of one engine, on the plan's clock."""

    engine: int
    prefill: bool
    pieces: tuple[Piece, ...]
    wait_until: float | None  # arrival of its latest newcomer: never start before it
    start: float
    end: float  # its tokens exist (the last stage's end under PP)
    hits: int  # prompt tokens its newcomers found cached
    kv: tuple[int, int]  # paged: (slots written, slots allocated) in blocks in use
    contiguous: tuple[int, int]  # each running sequence holding the model's whole context
    stages: tuple[tuple[float, float], ...] = ()  # (start, end) on each stage

    @property
    def work(self) -> Work:
        return Work.of((p.start, p.count, True) for p in self.pieces)

    @property
    def tokens_out(self) -> int:
        return sum(1 for p in self.pieces if not p.padding)


class Engine:
    """The sequences of one model copy (or of one PP virtual engine) and their KV."""

    def __init__(
        self,
        index: int,
        blocks: BlockManager,
        *,
        max_batch: int,
        batching: str,
        context: int,
        requests: dict[int, Request],
    ) -> None:
        self.index = index
        self.blocks = blocks
        self.max_batch = max_batch
        self.static = batching == "static"
        self.context = context  # the model's positions (a contiguous slot's size)
        self.requests = requests
        self.queue: deque[int] = deque()  # arrived, not admitted
        self.made: dict[int, int] = {}  # running -> tokens generated so far
        self.target = 0  # static: the batch's longest output

    def has_work(self) -> bool:
        return bool(self.queue or self.made)

    def step(self) -> Decision | None:
        """Decide and apply the next iteration (None: nothing it can run now)."""
        newcomers = self._admit() if self.queue and not (self.static and self.made) else []
        if not newcomers and not self.made:
            return None
        blocks, requests, made_so_far = self.blocks, self.requests, self.made
        tables = blocks.tables
        first = bool(newcomers)
        hits = sum(tables[r].filled for r in newcomers)
        # (request, start, count, its block table, tokens made after it, its output length),
        # and the iteration's Work summed on the way (Work.of's sums, each piece emitting)
        planned = []
        tokens = attn = kv = 0
        for rid in newcomers or list(made_so_far):
            req = requests[rid]
            if first:
                start = tables[rid].filled
                count, made = len(req.prompt) - start, 1
            else:
                made = made_so_far[rid]
                start, count, made = len(req.prompt) + made - 1, 1, made + 1
            table = blocks.write(rid, req.prompt, count)
            planned.append((rid, start, count, table, made, req.output_len))
            tokens += count
            attn += count * start + count * (count + 1) // 2  # as Work.of counts them
            kv += start + count
        for rid in newcomers:
            made_so_far[rid] = 0
        if self.static:
            last = max(p[4] for p in planned) >= self.target
            leaving = {p[0] for p in planned} if last else set()
        else:
            leaving = {rid for rid, _, _, _, made, out in planned if made >= out}
        pieces = tuple(
            Piece(rid, start, count, table, first, made == out, rid in leaving, made > out)
            for rid, start, count, table, made, out in planned
        )
        n = len(planned)
        decision = Decision(
            first,
            pieces,
            tuple(newcomers),
            hits,
            blocks.used_slots(),
            self.contiguous(),
            Work(tokens, n, attn, kv, n),
        )
        for rid, _, _, _, made, _ in planned:
            made_so_far[rid] = made
        for rid in leaving:
            del made_so_far[rid]
            blocks.finish(rid)
        return decision

    def _admit(self) -> list[int]:
        taken: list[int] = []
        head = [self.requests[r].output_len for r in list(self.queue)[: self.max_batch]]
        longest = max(head, default=0)
        while self.queue and len(self.made) + len(taken) < self.max_batch:
            req = self.requests[self.queue[0]]
            positions = req.context
            if self.static:  # padding decodes on until the batch's longest is done
                positions = len(req.prompt) + max(longest, req.output_len) - 1
            if not self.blocks.can_admit(req.prompt, positions):
                break  # first come, first served: nobody overtakes the head of the queue
            self.queue.popleft()
            self.blocks.admit(req.id, req.prompt, positions)
            taken.append(req.id)
        if taken and self.static:
            self.target = max(self.requests[r].output_len for r in taken)
        return taken

    def contiguous(self) -> tuple[int, int]:
        """(positions used, slots allocated) had each running sequence been given the
        model's whole context in one contiguous piece."""
        used = sum(self.blocks.tables[r].filled for r in self.made)
        return used, len(self.made) * self.context


Seconds = Callable[[int, Work], float]  # (stage, work) -> seconds


@dataclass(frozen=True)
class Timing:
    """How long an iteration takes on each stage, and the hops between stages."""

    stage: Seconds
    stages: int = 1
    hop: Callable[[Work], float] = lambda work: 0.0
    back: Callable[[Work], float] = lambda work: 0.0


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


class _Clients:
    """What the router sees: requests sent to each engine and when each was answered."""

    def __init__(self, engines: int) -> None:
        self.routed = [0] * engines
        self.answered: list[list[float]] = [[] for _ in range(engines)]

    def outstanding(self, t: float) -> list[int]:
        # an engine's answers come in time order: count those by t with a bisection
        pairs = zip(self.routed, self.answered, strict=True)
        return [n - bisect_right(done, t) for n, done in pairs]

    def deliver(
        self,
        req: Request,
        engines: list[Engine],
        route: Callable[[Request, list[int]], int],
        ready: list[float],
    ) -> int:
        """Route an arriving request to an engine's queue (an idle engine wakes then);
        returns the engine."""
        target = route(req, self.outstanding(req.arrival))
        self.routed[target] += 1
        if not engines[target].has_work():
            ready[target] = max(ready[target], req.arrival)
        engines[target].queue.append(req.id)
        return target

    def answer(self, engine: int, decided: Decision, t: float) -> None:
        self.answered[engine] += [t] * sum(1 for p in decided.pieces if p.done)


def serve(
    requests: Sequence[Request],
    engines: list[Engine],
    timing: Timing,
    route: Callable[[Request, list[int]], int],
) -> list[Iteration]:
    """TP (one engine) or replicas behind `route(request, outstanding) -> engine`: every
    engine on one clock, arrivals routed in time order, an iteration seeing every
    request that arrived by its start. Iterations in start order."""
    free_at = [0.0] * len(engines)
    clients = _Clients(len(engines))
    out: list[Iteration] = []
    pending = deque(sorted(requests, key=lambda r: (r.arrival, r.id)))
    while True:
        busy = [(free_at[e], e) for e, eng in enumerate(engines) if eng.has_work()]
        t, e = min(busy) if busy else (math.inf, -1)
        if pending and pending[0].arrival <= t:
            clients.deliver(pending.popleft(), engines, route, free_at)
            continue
        if e < 0:
            return out
        decided = engines[e].step()
        if decided is None:  # its own pool cannot hold the head request, ever
            raise ValueError(f"engine {e}: a request's KV cache is larger than its pool")
        end = t + timing.stage(0, decided.work)
        out.append(_iteration(engines[e], decided, [(t, end)]))
        clients.answer(e, decided, end)
        free_at[e] = end


def serve_pipeline(
    requests: Sequence[Request],
    engines: list[Engine],
    timing: Timing,
    route: Callable[[Request, list[int]], int],
) -> list[Iteration]:
    """PP: the engines are virtual engines sharing one KV pool, their iterations going
    through `timing.stages` stages in the order they enter the first; an engine's next
    iteration waits for its previous one's tokens to come back. Iterations in the
    order they enter the first stage (every stage processes them in that order)."""
    stage_free = [0.0] * timing.stages
    ready = [0.0] * len(engines)
    blocked: set[int] = set()  # waiting for the shared pool to free blocks
    clients = _Clients(len(engines))
    out: list[Iteration] = []
    pending = deque(sorted(requests, key=lambda r: (r.arrival, r.id)))
    while True:
        starts = [
            (max(stage_free[0], ready[g]), g)
            for g, eng in enumerate(engines)
            if eng.has_work() and g not in blocked
        ]
        t, g = min(starts) if starts else (math.inf, -1)
        if pending and pending[0].arrival <= t:
            blocked.discard(clients.deliver(pending.popleft(), engines, route, ready))
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
        hop, last = timing.hop(work), timing.stages - 1
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
