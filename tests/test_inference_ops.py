"""The operator counts the cost model charges (runtime.sim.compute.BLOCK_FORWARD_OPS,
scenarios.inference.stepmodel.OPS) are what the code dispatches: counted here at
torch's dispatcher, one process, no ranks. On a CPU a small model's step is mostly
these operators' dispatch, so a count that drifts from the code drifts the prediction."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from runtime.engine.models import Block, GPTConfig, MiniGPT
from runtime.sim.compute import BLOCK_FORWARD_OPS
from scenarios.inference.decode import Chunk, Shard
from scenarios.inference.stepmodel import EMBED_SEQ_OPS_CPU, OPS, SEQ_OPS_CPU


class Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.ops += 1
        return func(*args, **(kwargs or {}))


def count(fn) -> int:  # noqa: ANN001
    with torch.no_grad(), Count() as counter:
        fn()
    return counter.ops


def test_a_block_forward_dispatches_the_counted_operators():
    block = Block(GPTConfig(vocab=64, seq=16, hidden=32, heads=4, layers=1))
    assert count(lambda: block(torch.randn(1, 1, 32))) == BLOCK_FORWARD_OPS


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("seqs", [1, 4])
def test_a_decode_step_dispatches_the_counted_operators(tp: int, seqs: int):
    model = MiniGPT(GPTConfig(vocab=64, seq=64, hidden=64, heads=4, layers=2))
    shard = Shard(model, range(2), tp=tp, rank=0, first=True, last=True, blocks=64, block_size=8)
    chunks = [Chunk(20, 1, tuple(range(8 * i, 8 * i + 8))) for i in range(seqs)]
    tokens = torch.randint(0, 64, (seqs,))
    x = shard.embed(tokens, chunks)
    assert count(lambda: shard.embed(tokens, chunks)) == OPS["embed"] + EMBED_SEQ_OPS_CPU * seqs
    assert count(lambda: shard.attention(0, x, chunks)) == OPS["attn"] + SEQ_OPS_CPU * seqs
    assert count(lambda: shard.mlp(0, x)) == OPS["mlp"]
    assert count(lambda: shard.logits(x, chunks)) == OPS["head"]
