"""Rank side of lesson 7: serve the planned trace for real, token by token.

Called inside each rank process by runtime.engine.worker with a RankContext of
InferenceParams and this rank's Actions, grouped by their `series` (the mode).
For each mode:

1. Load the trained MiniGPT (scenarios.inference.weights: trained by rank 0
   at first use, cached; the same weights on every rank) and keep this rank's
   share (scenarios.inference.decode.Shard): every layer and its
   heads under TP, its stage's layers under PP, the whole model as a replica.
2. Torch's own greedy decode of the requests this rank will answer (the whole
   model, one process, no cache), before the clock: the reference, and a
   warm-up of the kernels.
3. The Actions, one Span each: `wait` sleeps until the requests of the next
   iteration have arrived (seconds after this rank's start barrier); compute
   actions run their part of the iteration on the chunks the plan says, with
   the block tables it says; all-reduces complete TP's partial sums, the
   all-gather the logits; sends and receives carry PP's activations forward
   and the sampled tokens back to the first stage. A Counter follows the KV
   blocks in use on this rank.
4. Compute costs: per kind (prefill, decode), the CPU seconds of its compute
   actions over their planned seconds (the `work`), both summed: the step
   model's scale on this machine.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import time
from itertools import groupby

import torch
import torch.distributed as dist

from runtime.engine.comm import Comm, Spent, ring_all_gather, ring_all_reduce
from runtime.engine.models import GPTConfig, MiniGPT
from runtime.engine.worker import RankContext
from runtime.sim.program import Action
from scenarios.inference.decode import Chunk, Shard, greedy_reference
from scenarios.inference.iteration import Iteration
from scenarios.inference.params import InferenceParams, InferenceResult, SeriesRun
from scenarios.inference.plan import stage_layers
from scenarios.inference.program import SeriesIndex, layout
from scenarios.inference.weights import trained


class Server:
    """One rank serving one series: its shard, the sequences' tokens, the iteration's state."""

    def __init__(self, ctx: RankContext[InferenceParams], index: SeriesIndex, model: MiniGPT):
        self.ctx = ctx
        self.index = index
        plan = index.plan
        serving = plan.serving
        self.ranks = sorted(index.anchor)
        self.position = self.ranks.index(ctx.rank)
        layers = model.cfg.layers
        if serving.pp > 1:
            mine = stage_layers(layers, serving.pp)[self.position]
            first, last = self.position == 0, self.position == serving.pp - 1
        else:
            mine, first, last = range(layers), True, True
        tp = serving.tp
        self.tp_group = tuple(self.ranks) if tp > 1 else None
        self.shard = Shard(
            model,
            mine,
            tp=tp,
            rank=self.position if tp > 1 else 0,
            first=first,
            last=last,
            blocks=serving.kv_blocks,
            block_size=serving.kv_block,
        )
        self.requests = {r.id: r for r in plan.requests}
        self.tokens: dict[int, list[int]] = {}  # request -> tokens generated (where sampled)
        self.next_input: dict[int, int] = {}  # request -> its next input token
        self.x: torch.Tensor | None = None
        self.pending: torch.Tensor | None = None
        self.local_logits: torch.Tensor | None = None
        self.comm = Comm()  # the hand-made rings of TP, counting their bytes
        self.sends: list[tuple[dist.Work, torch.Tensor]] = []
        self.spent = Spent()  # every wait on a p2p request (runtime.engine.comm)
        self.origin = 0.0
        # Per kind: [CPU seconds, planned seconds], summed over this rank's actions.
        self.cpu: dict[str, list[float]] = {"prefill": [0.0, 0.0], "decode": [0.0, 0.0]}
        self.peak_blocks = 0

    # -- the plan's view ------------------------------------------------------------------
    def iteration(self, action: Action) -> Iteration:
        return self.index.plan.iterations[action.arg("iteration")]

    def answers(self) -> list[int]:
        """Requests whose tokens this rank samples and reports."""
        index = self.index
        mine = [it for it, rank in zip(index.plan.iterations, index.token_rank, strict=True)
                if rank == self.ctx.rank]  # fmt: skip
        return sorted({p.request for it in mine for p in it.pieces})

    @staticmethod
    def chunks(it: Iteration) -> list[Chunk]:
        return [Chunk(p.start, p.count, p.blocks) for p in it.pieces]

    def inputs(self, it: Iteration) -> torch.Tensor:
        ids: list[int] = []
        for p in it.pieces:
            if p.first:
                ids += self.requests[p.request].prompt[p.start : p.start + p.count]
            else:
                ids.append(self.next_input[p.request])
        return torch.tensor(ids)

    # -- actions ------------------------------------------------------------------------------
    def __call__(self, action: Action) -> None:
        kind = action.kind
        if kind == "barrier":
            dist.barrier()
            self.origin = self.ctx.now()
        elif kind == "wait":
            seconds = action.effects.until.seconds  # type: ignore[union-attr]
            delay = self.origin + seconds - self.ctx.now()
            if delay > 0:
                time.sleep(delay)
        elif kind in ("prefill", "decode"):
            start = time.process_time()
            with torch.no_grad():
                self.compute(action)
            totals = self.cpu[kind]
            totals[0] += time.process_time() - start
            totals[1] += action.work
        elif kind == "all_reduce":
            assert self.pending is not None and self.x is not None
            ring_all_reduce(self.pending, self.comm)
            self.x = self.x + self.pending
        elif kind == "all_gather":
            assert self.local_logits is not None
            local = self.local_logits
            n = len(self.ranks)
            flat = ring_all_gather(local.reshape(-1), [local.numel()] * n, self.comm)
            gathered = flat.view(n, *local.shape).permute(1, 0, 2).reshape(local.shape[0], -1)
            self.sample(self.iteration(action), gathered)
        elif kind == "send":
            tensor = self.outgoing(action)
            self.sends.append((dist.isend(tensor, action.dst, tag=action.tag), tensor))
        elif kind == "recv":
            self.receive(action)
        else:
            raise ValueError(f"inference: no handler for {kind}")

    def compute(self, action: Action) -> None:
        it, part, layer = self.iteration(action), action.arg("part"), action.arg("layer")
        chunks = self.chunks(it)
        if part in ("model", "stage"):
            x = self.shard.embed(self.inputs(it), chunks) if self.shard.embedding else self.x
            for i in self.shard.layers:
                x = x + self.shard.attention(i, x, chunks)
                x = x + self.shard.mlp(i, x)
            self.x = x
            if self.shard.head_ln is not None:
                self.sample(it, self.shard.logits(x, chunks))
            self.track(it)
        elif part == "attn":
            if layer == min(self.shard.layers):
                self.x = self.shard.embed(self.inputs(it), chunks)
                self.track(it)
            self.pending = self.shard.attention(layer, self.x, chunks)
            if self.tp_group is None:
                self.x = self.x + self.pending
        elif part == "mlp":
            self.pending = self.shard.mlp(layer, self.x)
            if self.tp_group is None:
                self.x = self.x + self.pending
        elif part == "head":
            self.local_logits = self.shard.logits(self.x, chunks)
            if self.tp_group is None:
                self.sample(it, self.local_logits)

    def sample(self, it: Iteration, logits: torch.Tensor) -> None:
        """The greedy pick for each chunk; a padding member's token is thrown away."""
        picked = logits.argmax(dim=1).tolist()
        for piece, token in zip(it.pieces, picked, strict=True):
            if not piece.padding:
                self.tokens.setdefault(piece.request, []).append(token)
            self.next_input[piece.request] = token

    def track(self, it: Iteration) -> None:
        blocks = it.kv[1] // self.index.plan.serving.kv_block
        self.peak_blocks = max(self.peak_blocks, blocks)
        self.ctx.sample("kv_cache", blocks * self.shard.block_bytes(), self.index.series)

    def outgoing(self, action: Action) -> torch.Tensor:
        if action.tag == 0:
            assert self.x is not None
            return self.x.contiguous()
        it = self.iteration(action)
        fed = [self.next_input[p.request] for p in it.pieces]
        return torch.tensor(fed, dtype=torch.int64)

    def receive(self, action: Action) -> None:
        if action.tag == 0:
            it = self.iteration(action)
            self.x = torch.empty(action.bytes // 4).view(it.work.tokens, -1)
            self.spent.wait(dist.irecv(self.x, action.src, tag=0))
            return
        buffer = torch.empty(action.bytes // 8, dtype=torch.int64)
        self.spent.wait(dist.irecv(buffer, action.src, tag=action.tag))
        engine = action.tag - 1
        previous = [
            i for i in self.index.plan.iterations[: action.arg("iteration")] if i.engine == engine
        ][-1]
        for piece, token in zip(previous.pieces, buffer.tolist(), strict=True):
            if piece.feeds_back:
                self.next_input[piece.request] = token

    def finish(self) -> None:
        for work, _ in self.sends:
            self.spent.wait(work)
        self.sends.clear()


def run_rank(ctx: RankContext[InferenceParams]) -> InferenceResult:
    params = ctx.params
    model = trained(GPTConfig.from_shape(params.model), ctx.rank)
    _, indexes = layout(params)
    by_series = {s: list(acts) for s, acts in groupby(ctx.actions, key=lambda a: a.series)}
    servers = {index.series: Server(ctx, index, model) for index in indexes}
    references: dict[str, dict[int, list[int]]] = {}
    reference_s: dict[str, float] = {}
    with torch.no_grad():
        for series, server in servers.items():
            start = time.perf_counter()
            references[series] = {
                rid: greedy_reference(
                    model, server.requests[rid].prompt, server.requests[rid].output_len
                )
                for rid in server.answers()
            }
            reference_s[series] = time.perf_counter() - start
    ctx.start_clock()
    runs: dict[str, SeriesRun] = {}
    for series, server in servers.items():
        ctx.execute(by_series.get(series, []), server)
        server.finish()
        expected = references[series]
        runs[series] = SeriesRun(
            answered=len(expected),
            mismatched=[rid for rid, toks in expected.items() if server.tokens.get(rid) != toks],
            kv_pool_bytes=server.shard.pool_bytes,
            kv_peak_bytes=server.peak_blocks * server.shard.block_bytes(),
            reference_tokens=sum(len(t) for t in expected.values()),
            reference_s=reference_s[series],
        )
    # The scale of a kind is its total CPU seconds over its total planned seconds, not
    # the median action's ratio: the first action after an idle wait runs on cold
    # caches (several times its planned time where the ranks share cores), and TTFT pays it
    # in full; a sum of times is predicted by the ratio of the sums.
    cpu: dict[str, list[float]] = {"prefill": [0.0, 0.0], "decode": [0.0, 0.0]}
    for server in servers.values():
        for key, (took, planned) in server.cpu.items():
            cpu[key][0] += took
            cpu[key][1] += planned
    return InferenceResult(
        compute_costs={k: took / planned for k, (took, planned) in cpu.items() if planned > 0},
        series=runs,
    )
