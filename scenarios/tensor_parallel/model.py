"""The MiniGPT split Megatron-style across the ranks of one tensor-parallel group, by hand.

Lesson 4's model (docs/design.md: a lesson's own mechanism). Built from the very
MiniGPT every rank constructs from its seed (runtime.engine.models), with the token
embedding tied to the head as GPT-2 and Megatron do: each rank copies out its
shard, and remembers where each shard came from, so its gradients can be
compared with one process's, slice by slice.

- ColumnParallelLinear: f, then this rank's output columns (q/k/v by heads, the
  MLP's fc); RowParallelLinear: this rank's input rows, g, then the bias (the
  attention's and the MLP's output projections).
- Vocab-parallel embedding: each rank holds the rows of its slice of the
  vocabulary, looks up the ids inside it (zeros elsewhere) and g sums them; the
  tied head multiplies by the same rows, and the loss (scenarios.tensor_parallel
  .layers) never gathers the logits.
- Sequence parallel: LayerNorms and residual adds run on this rank's sequence
  shard; the parameters that then see only part of the sequence (LayerNorms, the
  row-parallel biases, the positions) have their gradients all-reduced after
  backward (`sync_replicated_grads`).

Mistakes (`mistake`): `fused-qkv-split` splits the fused [q;k;v] weight's rows
contiguously (a rank gets, say, all of q and half of k, which it then reads as
q, k, v of its heads); `untied-embedding` keeps the head's copy of the embedding
apart, so each learns from half the gradient; `missing-f` drops f's backward
all-reduce inside the blocks.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from runtime.engine.models import Block, MiniGPT
from scenarios.tensor_parallel.layers import (
    Site,
    Tracer,
    f,
    g,
    vocab_parallel_cross_entropy,
)
from scenarios.tensor_parallel.program import BACKWARD


@dataclass(frozen=True)
class Origin:
    """Where a local parameter comes from in the one-process model: its name there,
    and the rows and columns of it this rank holds (None: all)."""

    name: str
    rows: torch.Tensor | None = None
    cols: torch.Tensor | None = None

    def of(self, full: torch.Tensor) -> torch.Tensor:
        out = full if self.rows is None else full.index_select(0, self.rows)
        return out if self.cols is None else out.index_select(1, self.cols)


def tie(model: MiniGPT) -> MiniGPT:
    """The head shares the token embedding's weight (both [vocab, hidden])."""
    model.head.proj.weight = model.embedding.tokens.weight
    return model


def _span(rank: int, size: int) -> torch.Tensor:
    return torch.arange(rank * size, (rank + 1) * size)


class ColumnParallelLinear(nn.Module):
    """Y_i = f(X)·A_iᵀ + b_i: this rank's output features."""

    def __init__(self, full: nn.Linear, rows: torch.Tensor, site: Site, name: str):
        super().__init__()
        self.site = site
        self.weight = nn.Parameter(full.weight.detach().index_select(0, rows).clone())
        self.bias = nn.Parameter(full.bias.detach().index_select(0, rows).clone())
        self.origins = {
            "weight": Origin(f"{name}.weight", rows),
            "bias": Origin(f"{name}.bias", rows),
        }

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(f(x, self.site), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """Y = g(X_i·B_iᵀ) + b: this rank's input features, summed over ranks, then the bias."""

    def __init__(self, full: nn.Linear, cols: torch.Tensor, site: Site, name: str):
        super().__init__()
        self.site = site
        self.weight = nn.Parameter(full.weight.detach().index_select(1, cols).clone())
        self.bias = nn.Parameter(full.bias.detach().clone())  # replicated, added once
        self.origins = {
            "weight": Origin(f"{name}.weight", None, cols),
            "bias": Origin(f"{name}.bias"),
        }

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return g(F.linear(x, self.weight), self.site) + self.bias


def qkv_rows(hidden: int, tp: int, rank: int, mistake: str) -> torch.Tensor:
    """Rows of the fused [q; k; v] weight this rank holds: its heads' rows of each of q, k
    and v (Megatron's per-rank [q_r; k_r; v_r]), or, the mistake, a contiguous third."""
    if mistake == "fused-qkv-split":
        return _span(rank, 3 * hidden // tp)
    mine = _span(rank, hidden // tp)
    return torch.cat([mine + part * hidden for part in range(3)])


class TPBlock(nn.Module):
    def __init__(
        self, block: Block, layer: int, tracer: Tracer, *, heads: int, sp: bool, mistake: str
    ):
        super().__init__()
        tp, rank = tracer.tp, tracer.rank
        hidden = block.ln1.normalized_shape[0]
        self.local_heads = heads // tp
        self.sp = sp
        name = f"blocks.{layer}"
        skip = mistake == "missing-f"

        def site(place: str, back_skip: bool = False) -> Site:
            return Site(tracer, place, layer, sp, back_skip)

        self.ln1 = copy.deepcopy(block.ln1)
        self.ln2 = copy.deepcopy(block.ln2)
        rows = qkv_rows(hidden, tp, rank, mistake)
        self.qkv = ColumnParallelLinear(
            block.attn.qkv, rows, site("attn-in", skip), f"{name}.attn.qkv"
        )
        cols = _span(rank, hidden // tp)
        self.proj = RowParallelLinear(block.attn.proj, cols, site("attn-out"), f"{name}.attn.proj")
        self.fc = ColumnParallelLinear(
            block.fc, _span(rank, 4 * hidden // tp), site("mlp-in", skip), f"{name}.fc"
        )
        self.out = RowParallelLinear(
            block.out, _span(rank, 4 * hidden // tp), site("mlp-out"), f"{name}.out"
        )
        self.origins = {
            f"{part}.{leaf}": Origin(f"{name}.{part}.{leaf}")
            for part in ("ln1", "ln2")
            for leaf in ("weight", "bias")
        }
        for part in ("qkv", "proj", "fc", "out"):
            for leaf, origin in getattr(self, part).origins.items():
                self.origins[f"{part}.{leaf}"] = origin

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's heads only: no communication between f and g."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        batch, seq, width = q.shape
        shape = (batch, seq, self.local_heads, width // self.local_heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, seq, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))

    def replicated(self) -> list[nn.Parameter]:
        """Parameters that see only this rank's sequence shard under SP."""
        return [*self.ln1.parameters(), *self.ln2.parameters(), self.proj.bias, self.out.bias]


class TPMiniGPT(nn.Module):
    """One rank's part of the tied MiniGPT under tensor (and maybe sequence) parallelism."""

    def __init__(self, model: MiniGPT, tracer: Tracer, *, sp: bool, mistake: str = "none"):
        super().__init__()
        cfg = model.cfg
        tp, rank = tracer.tp, tracer.rank
        self.tracer, self.sp = tracer, sp
        self.per_rank = cfg.vocab // tp
        self.start = rank * self.per_rank
        rows = _span(rank, self.per_rank)
        weight = model.embedding.tokens.weight.detach()
        self.tokens = nn.Parameter(weight.index_select(0, rows).clone())
        untied = mistake == "untied-embedding"
        self.head = nn.Parameter(self.tokens.detach().clone()) if untied else self.tokens
        self.positions = copy.deepcopy(model.embedding.positions)
        self.blocks = nn.ModuleList(
            TPBlock(b, i, tracer, heads=cfg.heads, sp=sp, mistake=mistake)
            for i, b in enumerate(model.blocks)
        )
        self.ln_f = copy.deepcopy(model.head.ln)
        self.origins = {
            "tokens": Origin("embedding.tokens.weight", rows),
            "head": Origin("embedding.tokens.weight", rows),
            "positions.weight": Origin("embedding.positions.weight"),
            "ln_f.weight": Origin("head.ln.weight"),
            "ln_f.bias": Origin("head.ln.bias"),
        }
        for i, block in enumerate(self.blocks):
            for local, origin in block.origins.items():
                self.origins[f"blocks.{i}.{local}"] = origin

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Vocab-parallel embedding: the ids of this rank's slice, zeros elsewhere, then g."""
        local = idx - self.start
        inside = (local >= 0) & (local < self.per_rank)
        rows = F.embedding(local.clamp(0, self.per_rank - 1), self.tokens) * inside.unsqueeze(-1)
        x = g(rows, Site(self.tracer, "embed", None, self.sp))
        positions = self.positions.weight[: idx.shape[1]]
        return x + (self.tracer.seq_shard(positions.unsqueeze(0)) if self.sp else positions)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        h = f(self.ln_f(x), Site(self.tracer, "head-in", None, self.sp))
        return vocab_parallel_cross_entropy(
            F.linear(h, self.head), targets, self.start, self.tracer
        )

    def sync_replicated_grads(self) -> None:
        """SP only: the parameters that saw a sequence shard sum their gradients over the
        group, all in one flat all-reduce."""
        if not self.sp:
            return
        params = [*self.positions.parameters(), *self.ln_f.parameters()]
        for block in self.blocks:
            params += block.replicated()
        grads = [p.grad for p in params if p.grad is not None]
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        total = self.tracer.all_reduce(flat, ("grads", None, BACKWARD))
        for grad, part in zip(grads, total.split([grad.numel() for grad in grads]), strict=True):
            grad.copy_(part.view_as(grad))

    def grad_diffs(self, reference: dict[str, torch.Tensor]) -> dict[str, float]:
        """Per one-process parameter, the largest |grad − its grad| over this rank's slices
        of it (the tied embedding's two uses count as one)."""
        out: dict[str, float] = {}
        for name, param in self.named_parameters(remove_duplicate=False):
            if param.grad is None:
                raise RuntimeError(f"no gradient for {name}")
            origin = self.origins[name]
            diff = (param.grad - origin.of(reference[origin.name])).abs().max().item()
            out[origin.name] = max(out.get(origin.name, 0.0), diff)
        return out

    def grad_diff(self, reference: dict[str, torch.Tensor]) -> float:
        """Largest |grad − the one-process grad| over this rank's parameters (its slices)."""
        return max(self.grad_diffs(reference).values())
