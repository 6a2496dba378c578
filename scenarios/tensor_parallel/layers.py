"""Megatron's tensor-parallel pieces, written by hand: f, g, and the vocab-parallel loss.

Lesson 4's mechanism (Shoeybi et al. 2019 §3; Korthikanti et al. 2022 for
sequence parallelism; docs/references.md "Tensor parallel"). Every collective goes
through a `Tracer`, which runs it with torch.distributed on the TP group and
records what it was (kind, place, layer, direction, bytes) and when: the rank
code turns those records into one Span per collective of the lesson's Program
(scenarios.tensor_parallel.program), and checks them against it one by one.

- `f` sits before a column-parallel linear: identity forward, all-reduce of the
  input gradient backward (sequence parallel: all-gather of the sequence
  shards forward, reduce-scatter backward).
- `g` sits after a row-parallel linear: all-reduce forward, identity backward
  (sequence parallel: reduce-scatter forward, all-gather backward).
- `vocab_parallel_cross_entropy`: each rank holds the logits of its slice of
  the vocabulary; three all-reduces of b·s elements forward (the max, the
  target's logit, the sum of exponentials), none backward (Megatron
  `core/tensor_parallel/cross_entropy.py`).

The `missing-f` mistake is an f whose backward forgets its all-reduce: each rank
keeps only its own partial input gradient (under sequence parallelism, the
slice of it for its own sequence shard).

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.autograd import Function

from scenarios.tensor_parallel.program import AG, AR, BACKWARD, FORWARD, RS

SEQ_DIM = 1  # activations are (batch, sequence, hidden), as in MiniGPT


@dataclass(frozen=True)
class Event:
    """One collective as it ran: what, where, how many bytes, when (ns), and the
    calling thread's CPU clock at its ends (the computes between are timed by it)."""

    kind: str
    place: str
    layer: int | None
    direction: str
    bytes: int
    start_ns: int
    end_ns: int
    cpu_start_ns: int
    cpu_end_ns: int


class Tracer:
    """Runs the TP group's collectives and records each (when `recording`)."""

    def __init__(self, tp: int, rank: int) -> None:
        self.tp, self.rank = tp, rank
        self.events: list[Event] = []
        self.recording = True

    def _run(self, kind: str, where: tuple[str, int | None, str], nbytes: int, call: Any) -> Any:
        start, cpu = time.perf_counter_ns(), time.thread_time_ns()
        out = call()
        if self.recording:
            end, cpu_end = time.perf_counter_ns(), time.thread_time_ns()
            self.events.append(Event(kind, *where, nbytes, start, end, cpu, cpu_end))
        return out

    def all_reduce(
        self, x: torch.Tensor, where: tuple[str, int | None, str], op: str = "sum"
    ) -> torch.Tensor:
        out = x.contiguous().clone()
        reduce_op = dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM
        return self._run(AR, where, _bytes(out), lambda: (dist.all_reduce(out, reduce_op), out)[1])

    def all_gather(self, shard: torch.Tensor, where: tuple[str, int | None, str]) -> torch.Tensor:
        """The sequence shards of every rank, concatenated along the sequence."""
        # all_gather_single stacks along dim 0: gather (t, b, s/t, h), then lay the
        # shards side by side along the sequence.
        out = shard.new_empty((self.tp, *shard.shape))
        flat = shard.contiguous().view(-1)  # gloo wants flat buffers
        call = lambda: dist.all_gather_single(out.view(-1), flat)  # noqa: E731
        self._run(AG, where, _bytes(out), call)
        return torch.cat(out.unbind(0), dim=SEQ_DIM)

    def reduce_scatter(self, x: torch.Tensor, where: tuple[str, int | None, str]) -> torch.Tensor:
        """Sum over ranks, and keep this rank's sequence shard of the sum."""
        stacked = torch.stack(x.chunk(self.tp, dim=SEQ_DIM)).contiguous()
        out = stacked.new_empty(stacked.shape[1:])
        # gloo wants flat buffers: rank i's output is the i-th block of the input.
        call = lambda: dist.reduce_scatter_single(out.view(-1), stacked.view(-1))  # noqa: E731
        self._run(RS, where, _bytes(stacked), call)
        return out

    def seq_shard(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's slice of the sequence (no communication)."""
        return x.chunk(self.tp, dim=SEQ_DIM)[self.rank].contiguous()


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


@dataclass(frozen=True)
class Site:
    """Where an f or a g sits, and how it runs."""

    tracer: Tracer
    place: str
    layer: int | None
    sp: bool = False
    skip_backward: bool = False  # the `missing-f` mistake


class _F(Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, site: Site) -> torch.Tensor:
        ctx.site = site
        if site.sp:
            return site.tracer.all_gather(x, (site.place, site.layer, FORWARD))
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        site: Site = ctx.site
        where = (site.place, site.layer, BACKWARD)
        if site.skip_backward:  # the mistake: this rank's partial gradient, never summed
            return (site.tracer.seq_shard(grad) if site.sp else grad), None
        if site.sp:
            return site.tracer.reduce_scatter(grad, where), None
        return site.tracer.all_reduce(grad, where), None


class _G(Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, site: Site) -> torch.Tensor:
        ctx.site = site
        where = (site.place, site.layer, FORWARD)
        if site.sp:
            return site.tracer.reduce_scatter(x, where)
        return site.tracer.all_reduce(x, where)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        site: Site = ctx.site
        if site.sp:
            return site.tracer.all_gather(grad, (site.place, site.layer, BACKWARD)), None
        return grad, None


def f(x: torch.Tensor, site: Site) -> torch.Tensor:
    """Enter the tensor-parallel region (before a column-parallel linear)."""
    return _F.apply(x, site)


def g(x: torch.Tensor, site: Site) -> torch.Tensor:
    """Leave it (after a row-parallel linear): sum the ranks' partial outputs."""
    return _G.apply(x, site)


class _VocabParallelCrossEntropy(Function):
    @staticmethod
    def forward(
        ctx: Any, logits: torch.Tensor, targets: torch.Tensor, start: int, tracer: Tracer
    ) -> torch.Tensor:
        """Per-token loss from this rank's vocabulary slice [start, start + v/t)."""
        logits = logits.detach()
        # 1. The largest logit over the whole vocabulary, for a stable softmax.
        top = tracer.all_reduce(logits.amax(dim=-1), ("loss-max", None, FORWARD), op="max")
        shifted = logits - top.unsqueeze(-1)
        # 2. The target's logit: only the rank whose slice holds the target contributes.
        local = targets - start
        mine = (local >= 0) & (local < logits.shape[-1])
        index = local.clamp(0, logits.shape[-1] - 1).unsqueeze(-1)
        picked = shifted.gather(-1, index).squeeze(-1) * mine
        picked = tracer.all_reduce(picked, ("loss-target", None, FORWARD))
        # 3. The softmax's denominator over the whole vocabulary.
        exp = shifted.exp()
        total = tracer.all_reduce(exp.sum(dim=-1), ("loss-sumexp", None, FORWARD))
        ctx.save_for_backward(exp.div_(total.unsqueeze(-1)), index, mine)
        return total.log() - picked

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        # softmax − one_hot(target), on this rank's slice: no communication at all.
        softmax, index, mine = ctx.saved_tensors
        out = softmax.clone()
        out.scatter_add_(-1, index, -mine.to(out.dtype).unsqueeze(-1))
        return out * grad.unsqueeze(-1), None, None, None


def vocab_parallel_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, start: int, tracer: Tracer
) -> torch.Tensor:
    """Mean cross-entropy over every token, the logits never gathered."""
    return _VocabParallelCrossEntropy.apply(logits, targets, start, tracer).mean()
