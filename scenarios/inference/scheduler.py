"""The server's scheduler: which sequences an engine runs in each iteration.

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

`step` decides and applies one iteration (a Decision: scenarios.inference.iteration);
`quiet_for` and `run` are the engine's side of the lumping of alike decode
iterations (how many may come next, and all of them applied at once). The drivers
that run engines on a clock are scenarios.inference.serve.
Pure: stdlib only (and the lesson's pure modules).
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from scenarios.inference.blocks import BlockManager
from scenarios.inference.iteration import Decision, Piece
from scenarios.inference.stepmodel import Work
from scenarios.inference.trace import Request


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
        # whether max_batch ever kept a waiting request out (or cut the static batch's
        # look at the queue): if not, any larger max_batch plans the same iterations
        self.batch_bound = False

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

    def quiet_for(self) -> int:
        """How many decode iterations of the running sequences, alike, can come next
        before an event: the last of them is the first where a sequence is done (or a
        static batch ends). 0: the next iteration may admit newcomers."""
        made, requests = self.made, self.requests
        if not made:
            return 0
        guard = False  # waiting requests: admission stays shut only while no block is evicted
        if self.queue and not self.static:
            if len(made) < self.max_batch:
                head = requests[self.queue[0]]
                if self.blocks.can_admit(head.prompt, head.context):
                    return 0
            guard = True
        if self.static:
            count = self.target - max(made.values())
            for rid, k in made.items():
                out = requests[rid].output_len
                if k < out:
                    count = min(count, out - k)
        else:
            count = min(requests[rid].output_len - k for rid, k in made.items())
        if guard and count > 0:
            count = self._unevicted(count)
        return max(0, count)

    def _unevicted(self, count: int) -> int:
        """At most `count` decode iterations whose new blocks all come from the free list
        (an evicted cached block could change whether the head of the queue fits)."""
        bs, tables, free = self.blocks.block_size, self.blocks.tables, self.blocks.free
        if free >= len(self.made) * (count // bs + 1):  # at most that many open
            return count
        grow = sorted(j for rid in self.made for j in range(-tables[rid].filled % bs, count, bs))
        return count if len(grow) <= free else grow[free]

    def next_work(self) -> Work:
        """The Work of the next decode iteration of the running sequences: each one
        position, attending to its whole context."""
        requests = self.requests
        context = sum(len(requests[rid].prompt) + k for rid, k in self.made.items())
        n = len(self.made)
        return Work(n, n, context, context, n)

    def all_leave(self, count: int) -> bool:
        """Whether every running sequence leaves after `count` more decode iterations."""
        if self.static:
            return max(self.made.values()) + count >= self.target
        return all(self.requests[rid].output_len - k <= count for rid, k in self.made.items())

    def run(self, count: int) -> Decision:
        """Apply `count` decode iterations of the running sequences at once (`quiet_for`
        says how many may come); the Decision of the last of them."""
        blocks, requests, made_so_far = self.blocks, self.requests, self.made
        rids = list(made_so_far)
        blocks.decode(rids, count)
        tables = blocks.tables
        planned = []
        for rid in rids:
            req = requests[rid]
            made = made_so_far[rid] + count
            planned.append(
                (rid, len(req.prompt) + made - 2, tables[rid].frozen, made, req.output_len)
            )
        if self.static:
            last = max(p[3] for p in planned) >= self.target
            leaving = set(rids) if last else set()
        else:
            leaving = {rid for rid, _, _, made, out in planned if made >= out}
        pieces = tuple(
            Piece(rid, start, 1, table, False, made == out, rid in leaving, made > out)  # type: ignore[arg-type]
            for rid, start, table, made, out in planned
        )
        n = len(planned)
        attn = sum(start + 1 for _, start, _, _, _ in planned)
        for rid, _, _, made, _ in planned:
            made_so_far[rid] = made
        decision = Decision(
            False, pieces, (), 0, blocks.used_slots(), self.contiguous(), Work(n, n, attn, attn, n)
        )
        for rid in leaving:
            del made_so_far[rid]
            blocks.finish(rid)
        return decision

    def _admit(self) -> list[int]:
        taken: list[int] = []
        longest = 0
        if self.static:  # only a static batch pads to its longest
            if len(self.queue) > self.max_batch:
                self.batch_bound = True
            head = [self.requests[r].output_len for r in islice(self.queue, self.max_batch)]
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
        if self.queue and len(self.made) + len(taken) >= self.max_batch:
            self.batch_bound = True
        if taken and self.static:
            self.target = max(self.requests[r].output_len for r in taken)
        return taken

    def contiguous(self) -> tuple[int, int]:
        """(positions used, slots allocated) had each running sequence been given the
        model's whole context in one contiguous piece."""
        used = sum(self.blocks.tables[r].filled for r in self.made)
        return used, len(self.made) * self.context
