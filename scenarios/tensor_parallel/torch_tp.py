"""torch's own tensor parallelism on the same MiniGPT: `parallelize_module` on a DeviceMesh.

The `torch` series of lesson 4, beside the hand-written one (scenarios
.tensor_parallel.model): `torch.distributed.tensor.parallel` with
ColwiseParallel / RowwiseParallel for the attention (q/k/v by heads, output
projection) and the MLP, a vocab-parallel embedding (RowwiseParallel of an
nn.Embedding) and head (ColwiseParallel whose logits stay sharded as a DTensor
for `loss_parallel`), and, under sequence parallelism, SequenceParallel
LayerNorms with PrepareModuleInput where the shards are gathered. Its
collectives happen inside DTensor: `CommDebugMode` counts them, forward and
backward apart.

Two details torch leaves to its user, both mistakes of the lesson:
- ColwiseParallel splits the fused [q; k; v] weight's rows contiguously, so the
  rows are first permuted to [q_0; k_0; v_0; q_1; …] (skipped under
  `fused-qkv-split`);
- parallelize_module replaces the tied weight by two DTensors: they are tied
  again afterwards (skipped under `untied-embedding`).

Under sequence parallelism torch's embedding all-reduces (then each rank keeps its
shard, no communication), where the hand-written one reduce-scatters: both are
reported as counted. `missing-f` has no torch twin (DTensor always inserts it).

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import contextlib
import copy
import time
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from runtime.engine.models import MiniGPT
from scenarios.tensor_parallel.model import qkv_rows


class TorchAttention(nn.Module):
    """MiniGPT's attention, its sizes read from the local (sharded) q/k/v."""

    def __init__(self, qkv: nn.Linear, proj: nn.Linear, head_dim: int):
        super().__init__()
        self.qkv, self.proj, self.head_dim = qkv, proj, head_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        batch, seq, width = q.shape
        shape = (batch, seq, width // self.head_dim, self.head_dim)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, seq, width))


def permutation(hidden: int, tp: int, mistake: str) -> torch.Tensor:
    """Rows of the fused qkv weight in the order ColwiseParallel should chunk them."""
    return torch.cat([qkv_rows(hidden, tp, r, mistake) for r in range(tp)])


def build(model: MiniGPT, tp: int, *, sp: bool, mistake: str) -> tuple[nn.Module, Any]:
    """A parallelized deep copy of the tied `model`, and the mesh."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    model = copy.deepcopy(model)
    cfg = model.cfg
    rows = permutation(cfg.hidden, tp, mistake)
    for block in model.blocks:
        with torch.no_grad():
            block.attn.qkv.weight.copy_(block.attn.qkv.weight.index_select(0, rows))
            block.attn.qkv.bias.copy_(block.attn.qkv.bias.index_select(0, rows))
        block.attn = TorchAttention(block.attn.qkv, block.attn.proj, cfg.hidden // cfg.heads)
    mesh = init_device_mesh("cpu", (tp,))
    seq = Shard(1)
    block_plan: dict[str, Any] = {
        "attn.qkv": ColwiseParallel(),
        "attn.proj": RowwiseParallel(output_layouts=seq) if sp else RowwiseParallel(),
        "fc": ColwiseParallel(input_layouts=seq) if sp else ColwiseParallel(),
        "out": RowwiseParallel(output_layouts=seq) if sp else RowwiseParallel(),
    }
    if sp:
        block_plan["ln1"] = SequenceParallel()
        block_plan["ln2"] = SequenceParallel()
        block_plan["attn"] = PrepareModuleInput(
            input_layouts=(seq,), desired_input_layouts=(Replicate(),)
        )
    for block in model.blocks:
        parallelize_module(block, mesh, block_plan)
    top: dict[str, Any] = {
        "embedding.tokens": RowwiseParallel(input_layouts=Replicate()),
        "head.proj": ColwiseParallel(
            input_layouts=seq if sp else Replicate(),
            output_layouts=Shard(-1),
            use_local_output=False,
        ),
    }
    if sp:
        # The replicated embedding output: each rank keeps its shard (a local slice).
        top["blocks.0"] = PrepareModuleInput(
            input_layouts=(Replicate(),), desired_input_layouts=(seq,), use_local_output=True
        )
        top["head.ln"] = SequenceParallel()
    parallelize_module(model, mesh, top)
    if mistake != "untied-embedding":
        model.head.proj.weight = model.embedding.tokens.weight
    return model, mesh


def step(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    clock: dict[str, tuple[int, int, int, int]] | None = None,
    *,
    count: bool = True,
) -> tuple[Any, dict[str, dict[str, int]]]:
    """Forward and backward under loss_parallel; the loss, and (`count`) the collectives
    counted by CommDebugMode per direction and kind ("all_reduce", "all_gather", …).
    CommDebugMode is a dispatch mode that sees every op, so a timed step runs without
    it (the counts of an untimed step of the same model and batch are the same). `clock`
    gets each direction's (wall start, wall end, CPU start, CPU end) in ns."""
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import loss_parallel

    counts: dict[str, dict[str, int]] = {}
    loss: Any = None

    def forward() -> None:
        nonlocal loss
        loss = model(inputs, targets)

    with loss_parallel():
        for direction, run in (("forward", forward), ("backward", lambda: loss.backward())):
            mode = CommDebugMode() if count else contextlib.nullcontext()
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
            with mode:
                run()
            if clock is not None:
                clock[direction] = (wall, time.perf_counter_ns(), cpu, time.thread_time_ns())
            if isinstance(mode, CommDebugMode):
                counts[direction] = _by_kind(mode.get_comm_counts())
    return loss, counts


def _by_kind(raw: dict[Any, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for op, n in raw.items():
        name = str(op).rsplit(".", 1)[-1]
        for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
            if kind in name:
                out[kind] = out.get(kind, 0) + n
    return out


def full_grads(model: nn.Module, hidden: int, tp: int, mistake: str) -> dict[str, torch.Tensor]:
    """Every gradient whole (DTensors gathered), with the qkv rows back in MiniGPT's order,
    under the one-process model's names (the tied head counts once)."""
    rows = permutation(hidden, tp, mistake)
    back = torch.empty_like(rows)
    back[rows] = torch.arange(rows.numel())
    out = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        grad = param.grad
        grad = grad.full_tensor() if hasattr(grad, "full_tensor") else grad
        if name.endswith(("attn.qkv.weight", "attn.qkv.bias")):
            grad = grad.index_select(0, back)
        out[name] = grad
    return out
