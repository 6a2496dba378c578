"""MiniGPT and its data: the small real model every training lesson distributes.

A GPT in the shape of Karpathy's nanoGPT (token + position embeddings, pre-norm
blocks of causal self-attention and a 4x MLP, final LayerNorm, a linear head),
fp32, a few hundred thousand parameters so that four ranks train it on two CPU
cores. The data is generated here, deterministically, from a seed: a random
Markov chain over the vocabulary, so that there is something to learn and
nothing to download.

`split_stages` cuts the model into contiguous stages for pipeline parallelism
(embedding on the first, final norm + head + loss on the last), the same cut
on every rank because every rank builds the model from the same seed.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 64
    seq: int = 32
    hidden: int = 64
    heads: int = 4
    layers: int = 8
    seed: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_shape(cls, shape: Any, seed: int = 0) -> GPTConfig:
        """The model a lesson's shape group describes (anything with `vocab`, `seq`,
        `hidden`, `heads` and `layers`: scenarios.shape.GPTShape)."""
        return cls(shape.vocab, shape.seq, shape.hidden, shape.heads, shape.layers, seed)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=2)
        shape = (batch, seq, self.heads, hidden // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, seq, hidden))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.hidden)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.hidden)
        self.fc = nn.Linear(cfg.hidden, 4 * cfg.hidden)
        self.out = nn.Linear(4 * cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Embedding(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.positions = nn.Embedding(cfg.seq, cfg.hidden)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        return self.tokens(idx) + self.positions(positions)


class Head(nn.Module):
    """Final norm, projection to the vocabulary and the mean cross-entropy."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln = nn.LayerNorm(cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.proj(self.ln(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class MiniGPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(cfg.seed)  # same weights on every rank, whatever the rank's own seed
        self.embedding = Embedding(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.head = Head(cfg)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
        torch.random.set_rng_state(generator_state)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embedding(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x, targets)


class Stage(nn.Module):
    """A contiguous slice of MiniGPT: maybe the embedding, some blocks, maybe the head."""

    def __init__(self, embedding: Embedding | None, blocks: list[Block], head: Head | None):
        super().__init__()
        self.embedding = embedding
        self.blocks = nn.ModuleList(blocks)
        self.head = head

    @property
    def is_first(self) -> bool:
        return self.embedding is not None

    @property
    def is_last(self) -> bool:
        return self.head is not None

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        if self.embedding is not None:
            x = self.embedding(x)
        for block in self.blocks:
            x = block(x)
        if self.head is not None:
            return self.head(x, targets)
        return x


def stage_layers(layers: int, stages: int) -> list[range]:
    """Which blocks each stage gets: contiguous and as even as possible (earlier stages
    get the extra block, since the last one also carries the head)."""
    base, extra = divmod(layers, stages)
    out, start = [], 0
    for s in range(stages):
        count = base + (1 if s < extra else 0)
        out.append(range(start, start + count))
        start += count
    return out


def split_stages(model: MiniGPT, stages: int) -> list[Stage]:
    ranges = stage_layers(len(model.blocks), stages)
    return [
        Stage(
            model.embedding if s == 0 else None,
            [model.blocks[i] for i in ranges[s]],
            model.head if s == stages - 1 else None,
        )
        for s in range(stages)
    ]


def markov_tokens(cfg: GPTConfig, count: int, *, seed: int = 1) -> torch.Tensor:
    """`count` sequences of seq + 1 tokens from a fixed random Markov chain.

    Each token has a few likely successors, so a model can learn the chain; the
    same seed gives the same data on every rank and in every run.
    """
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(cfg.vocab, cfg.vocab, generator=gen) * 3.0
    transition = torch.softmax(logits, dim=1)
    out = torch.empty(count, cfg.seq + 1, dtype=torch.long)
    out[:, 0] = torch.randint(0, cfg.vocab, (count,), generator=gen)
    for t in range(1, cfg.seq + 1):
        out[:, t] = torch.multinomial(transition[out[:, t - 1]], 1, generator=gen).squeeze(1)
    return out


def batch(cfg: GPTConfig, count: int, *, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of `count` sequences: targets are the inputs shifted by one."""
    tokens = markov_tokens(cfg, count, seed=seed)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
