"""One rank's share of the MiniGPT, decoding with a paged KV cache: the hand-made server.

Part of lesson 7's rank side (torch; imported only inside rank processes).
`Shard` holds the layers of this rank (all of them, or a pipeline stage's) and,
under TP, its heads of each layer (Megatron-LM's split, Shoeybi et al. 2019):

- attention: the query, key and value rows of its heads (column-parallel), the
  output projection's columns of its heads (row-parallel): its output is a
  partial sum that an all-reduce completes; the bias is added once, by TP rank 0;
- MLP: 1/t of the first matrix's rows and of the second one's columns, the same;
- head: 1/t of the vocabulary's rows (vocab-parallel): each rank's logits for
  its slice, all-gathered before the greedy pick.

Its KV cache is a pool per layer of `blocks` × `block_size` × its heads ×
head_dim for K and for V (PagedAttention, Kwon et al. 2023): a sequence's
positions go where the scheduler's block table says (scenarios.inference
.blocks), and attention gathers each sequence's blocks back in order. Shared
prefix blocks were written by an earlier request with the same prompt start,
so their K and V are exactly what this request would have written.

`greedy_reference` is torch's own decode to compare with: the whole model's
plain forward (nn.Module, scaled_dot_product_attention with is_causal) over the
whole sequence at every step, one process, no cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from runtime.engine.models import MiniGPT


@dataclass(frozen=True)
class Chunk:
    """One sequence's positions in an iteration, and the blocks they are written to."""

    start: int
    count: int
    blocks: tuple[int, ...]


class Layer:
    """One block's weights, this rank's heads and MLP slice of them."""

    def __init__(self, block: torch.nn.Module, tp: int, rank: int) -> None:
        hidden = block.ln1.normalized_shape[0]
        heads = block.attn.heads
        self.heads, self.head_dim = heads // tp, hidden // heads
        lo, hi = rank * self.heads * self.head_dim, (rank + 1) * self.heads * self.head_dim
        w, b = block.attn.qkv.weight.detach(), block.attn.qkv.bias.detach()
        rows = [slice(i * hidden + lo, i * hidden + hi) for i in range(3)]
        self.qkv_w = torch.cat([w[r] for r in rows]).contiguous()
        self.qkv_b = torch.cat([b[r] for r in rows]).contiguous()
        self.proj_w = block.attn.proj.weight.detach()[:, lo:hi].contiguous()
        self.proj_b = block.attn.proj.bias.detach() if rank == 0 else None
        width = 4 * hidden // tp
        self.fc_w = block.fc.weight.detach()[rank * width : (rank + 1) * width].contiguous()
        self.fc_b = block.fc.bias.detach()[rank * width : (rank + 1) * width].contiguous()
        self.out_w = block.out.weight.detach()[:, rank * width : (rank + 1) * width].contiguous()
        self.out_b = block.out.bias.detach() if rank == 0 else None
        self.ln1, self.ln2 = block.ln1, block.ln2


class Shard:
    """This rank's layers, heads, embedding and vocabulary slice, and its KV pools."""

    def __init__(
        self,
        model: MiniGPT,
        layers: range,
        *,
        tp: int,
        rank: int,
        first: bool,
        last: bool,
        blocks: int,
        block_size: int,
    ) -> None:
        self.layers = {i: Layer(model.blocks[i], tp, rank) for i in layers}
        self.embedding = model.embedding if first else None
        vocab = model.cfg.vocab // tp
        self.head_ln = model.head.ln if last else None
        self.head_w = (
            model.head.proj.weight.detach()[rank * vocab : (rank + 1) * vocab] if last else None
        )
        self.block_size = block_size
        some = next(iter(self.layers.values()))
        shape = (blocks, block_size, some.heads, some.head_dim)
        self.k = {i: torch.zeros(shape) for i in layers}
        self.v = {i: torch.zeros(shape) for i in layers}

    @property
    def pool_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.k.values(), *self.v.values()))

    def block_bytes(self) -> int:
        return self.pool_bytes // max(1, next(iter(self.k.values())).shape[0])

    def embed(self, tokens: torch.Tensor, chunks: Sequence[Chunk]) -> torch.Tensor:
        assert self.embedding is not None
        positions = torch.cat([torch.arange(c.start, c.start + c.count) for c in chunks])
        return self.embedding.tokens(tokens) + self.embedding.positions(positions)

    def attention(self, index: int, x: torch.Tensor, chunks: Sequence[Chunk]) -> torch.Tensor:
        """This rank's heads of layer `index` for every chunk: K and V written to their
        blocks first, then each chunk's queries against its whole context. A partial sum
        of the output projection under TP."""
        layer = self.layers[index]
        h, d, bs = layer.heads, layer.head_dim, self.block_size
        q, k, v = F.linear(layer.ln1(x), layer.qkv_w, layer.qkv_b).split(h * d, dim=1)
        q, k, v = (t.view(-1, h, d) for t in (q, k, v))
        k_pool, v_pool = self.k[index], self.v[index]
        outs, row = [], 0
        for c in chunks:
            pos = torch.arange(c.start, c.start + c.count)
            table = torch.tensor(c.blocks)
            where = table[pos // bs], pos % bs
            k_pool[where] = k[row : row + c.count]
            v_pool[where] = v[row : row + c.count]
            context = c.start + c.count
            keys = k_pool[table].reshape(-1, h, d)[:context].transpose(0, 1)
            values = v_pool[table].reshape(-1, h, d)[:context].transpose(0, 1)
            mask = torch.arange(context)[None, :] <= pos[:, None]
            query = q[row : row + c.count].transpose(0, 1)
            y = F.scaled_dot_product_attention(query, keys, values, attn_mask=mask)
            outs.append(y.transpose(0, 1).reshape(c.count, h * d))
            row += c.count
        return F.linear(torch.cat(outs), layer.proj_w, layer.proj_b)

    def mlp(self, index: int, x: torch.Tensor) -> torch.Tensor:
        layer = self.layers[index]
        hidden = F.gelu(F.linear(layer.ln2(x), layer.fc_w, layer.fc_b))
        return F.linear(hidden, layer.out_w, layer.out_b)

    def logits(self, x: torch.Tensor, chunks: Sequence[Chunk]) -> torch.Tensor:
        """This rank's vocabulary slice of the logits at each chunk's last position."""
        assert self.head_ln is not None and self.head_w is not None
        ends = torch.tensor([c.count for c in chunks]).cumsum(0) - 1
        return F.linear(self.head_ln(x[ends]), self.head_w)


def greedy_reference(model: MiniGPT, prompt: Sequence[int], count: int) -> list[int]:
    """torch's own: `count` greedy tokens, each from the model's plain forward over the
    whole sequence so far (no cache, no split)."""
    seq = torch.tensor([list(prompt)])
    out: list[int] = []
    for _ in range(count):
        x = model.embedding(seq)
        for block in model.blocks:
            x = block(x)
        token = int(model.head.proj(model.head.ln(x[0, -1])).argmax())
        out.append(token)
        seq = torch.cat([seq, torch.tensor([[token]])], dim=1)
    return out
