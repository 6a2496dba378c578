"""Rank-side jobs of lesson 4's tests (run inside real gloo ranks by runtime.engine.launch).

`check_f_g`: f and g (plain and sequence-parallel) against what they must compute,
forward and backward, and what the Tracer records. `check_models`: the hand-written
and torch's TP MiniGPT against one process, for each (sp, mistake) asked, with their
collectives counted. The tests in test_tensor_parallel.py launch them.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from runtime.engine.models import GPTConfig, MiniGPT, batch
from runtime.engine.worker import RankContext
from scenarios.tensor_parallel import torch_tp
from scenarios.tensor_parallel.layers import Site, Tracer, f, g
from scenarios.tensor_parallel.model import TPMiniGPT, tie
from scenarios.tensor_parallel.program import Item, plan_counts


def _per_rank(rank: int, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed + rank))


def check_f_g(ctx: RankContext[dict[str, Any] | None]) -> dict[str, Any]:
    t, rank = ctx.world_size, ctx.rank
    shape = (2, 4 * t, 8)  # (batch, sequence, hidden)
    every = [_per_rank(r, shape, 10) for r in range(t)]
    grads = [_per_rank(r, shape, 50) for r in range(t)]
    failures: list[str] = []
    tracer = Tracer(t, rank)

    def expect(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
        if got.shape != want.shape or not torch.allclose(got, want, atol=1e-6):
            failures.append(name)

    def run(
        fn: Any, x: torch.Tensor, grad: torch.Tensor, sp: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.clone().requires_grad_(True)
        y = fn(x, Site(tracer, "attn-in", 0, sp))
        y.backward(grad)
        return y.detach(), x.grad

    mine, total = every[rank], sum(every)
    y, dx = run(f, mine, grads[rank], False)
    expect("f forward is the identity", y, mine)
    expect("f backward all-reduces", dx, sum(grads))
    y, dx = run(g, mine, grads[rank], False)
    expect("g forward all-reduces", y, total)
    expect("g backward is the identity", dx, grads[rank])
    shard = tracer.seq_shard
    y, dx = run(f, shard(mine), grads[rank], True)
    expect(
        "SP f forward all-gathers the shards",
        y,
        torch.cat([shard_of(e, t, r) for r, e in enumerate(every)], 1),
    )
    expect("SP f backward reduce-scatters", dx, shard(sum(grads)))
    y, dx = run(g, mine, shard(grads[rank]), True)
    expect("SP g forward reduce-scatters", y, shard(total))
    expect(
        "SP g backward all-gathers",
        dx,
        torch.cat([shard_of(gr, t, r) for r, gr in enumerate(grads)], 1),
    )
    events = [[e.kind, e.direction, e.bytes] for e in tracer.events]
    out = {"failures": failures, "events": events, "full_bytes": every[0].numel() * 4}
    if ctx.params:  # the same ranks also run whole models (one spawn for both checks)
        out["models"] = check_models(ctx)  # type: ignore[arg-type]
    return out


def shard_of(x: torch.Tensor, t: int, r: int) -> torch.Tensor:
    return x.chunk(t, dim=1)[r]


def check_models(ctx: RankContext[dict[str, Any]]) -> dict[str, Any]:
    """For each config "sp/mistake": per implementation, the loss and grad differences."""
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    t, rank = ctx.world_size, ctx.rank
    cfg = GPTConfig(vocab=64, seq=16, hidden=32, heads=4, layers=2)
    inputs, targets = batch(cfg, 4)
    reference = tie(MiniGPT(cfg))
    ref_loss = reference(inputs, targets)
    ref_loss.backward()
    ref = {name: p.grad for name, p in reference.named_parameters()}
    out: dict[str, Any] = {}
    for config in ctx.params["configs"]:
        sp_name, mistake = config.split("/")
        sp = sp_name == "on"
        tracer = Tracer(t, rank)
        hand = TPMiniGPT(reference, tracer, sp=sp, mistake=mistake)
        loss = hand(inputs, targets)
        loss.backward()
        hand.sync_replicated_grads()
        items = [Item(e.kind, e.place, e.layer, e.direction) for e in tracer.events]
        result = {
            "hand": [abs(loss.item() - ref_loss.item()), hand.grad_diff(ref)],
            "counts": plan_counts(items, cfg.layers),
            "bytes": sorted({e.bytes for e in tracer.events}),
        }
        if mistake != "missing-f":
            model, _ = torch_tp.build(reference, t, sp=sp, mistake=mistake)
            tloss, counts = torch_tp.step(model, inputs, targets)
            value = tloss.full_tensor().item()
            grads = torch_tp.full_grads(model, cfg.hidden, t, mistake)
            worst = max(
                (grad - ref["embedding.tokens.weight" if n == "head.proj.weight" else n])
                .abs()
                .max()
                .item()
                for n, grad in grads.items()
            )
            result["torch"] = [abs(value - ref_loss.item()), worst]
            result["torch_counts"] = counts
        out[config] = result
    return out
