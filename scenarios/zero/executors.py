"""The hand-made data-parallel executors of lesson 2: DDP, ZeRO-1, ZeRO-2, ZeRO-3.

The engine side of the `zero` lesson: the Program they run is data from
scenarios.zero.program (each Action's `series` is its stage). MiniGPT is cut
into *units* (the embedding, each block, the head): the granularity of DDP's
gradient buckets and of FSDP's wrapped modules. Each unit keeps its parameters
(and, where the stage keeps them whole, its gradients) in one flat fp32 buffer,
so that a unit's collective is one hand-made ring (runtime.engine.comm) over that buffer
and the bytes each rank sends are counted on the wire. Every stage shards a
unit's flat buffer the same way (formulas.even_split into n chunks, chunk r on
rank r, as a ring reduce-scatter leaves it), and every stage uses torch's own
Adam on the same elements, so the stages train identically.

What each stage keeps on a rank (the paper's P_os, P_os+g, P_os+g+p):
- ddp: whole params, whole grads (all-reduced per unit after its backward),
  Adam on the whole flat buffer;
- zero1: whole params, whole grads; after the whole backward each unit's grads
  are reduce-scattered in place and Adam updates only this rank's chunk, which
  is then all-gathered back into the whole params;
- zero2: whole params; each unit's backward writes into a transient bucket that
  is reduce-scattered at once into this rank's persistent gradient shard, then
  freed (DeepSpeed's reduce buckets);
- zero3: only this rank's param chunk persists; a unit's params are all-gathered
  into a buffer before its forward and again before its backward and the buffer
  is freed after each (FSDP's reshard after forward), grads as in zero2.

torch's FSDP2 on the same units is scenarios.zero.fsdp2; what each memory
category counts is in scenarios.zero.measure.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from runtime.engine import collectives
from runtime.engine.comm import Comm
from runtime.engine.models import MiniGPT
from runtime.sim.formulas import even_split
from runtime.sim.program import Action
from scenarios.zero.measure import (
    Sampler,
    SavedBytes,
    Tracker,
    nbytes,
    optimizer_bytes,
    storage_bytes,
    units_of,
)

STAGES = ("ddp", "zero1", "zero2", "zero3")


@dataclass
class Unit:
    """One unit's flat buffers on this rank."""

    module: nn.Module
    params: list[nn.Parameter]
    numel: int
    chunks: list[int]  # even_split(numel, n): the shard sizes, chunk r on rank r
    lo: int
    hi: int
    flat: torch.Tensor | None = None  # whole params (ddp, zero1, zero2); zero3: gather buffer
    shard: torch.Tensor | None = None  # zero3: this rank's persistent param chunk
    grad: torch.Tensor | None = None  # whole grads (ddp, zero1) or this rank's grad shard
    bucket: torch.Tensor | None = None  # zero2/zero3: grads before their reduce-scatter
    leaf: torch.Tensor | None = None  # what Adam updates: the flat buffer or this rank's chunk


@dataclass
class Held:
    """What one unit's forward keeps until its backward."""

    inputs: torch.Tensor | None
    output: torch.Tensor
    saved_bytes: int


def _views(flat: torch.Tensor, params: Sequence[nn.Parameter]) -> list[torch.Tensor]:
    out, offset = [], 0
    for p in params:
        out.append(flat[offset : offset + p.numel()].view_as(p))
        offset += p.numel()
    return out


class ZeroExecutor(Tracker):
    """Runs one rank's Actions of one hand-made stage (ddp, zero1, zero2, zero3)."""

    def __init__(
        self,
        model: MiniGPT,
        stage: str,
        *,
        lr: float,
        sample: Sampler | None = None,
    ):
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}")
        super().__init__(stage, sample)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.group = list(range(self.world))
        self.held: dict[int, Held] = {}
        self.grad_in: dict[int, torch.Tensor] = {}  # dLoss/d(input of unit u+1), for B u
        self.units: list[Unit] = []
        self._param_ids: set[int] = set()
        self._flat_ptrs: set[int] = set()
        for module in units_of(model):
            params = list(module.parameters())
            numel = sum(p.numel() for p in params)
            chunks = even_split(numel, self.world)
            lo = sum(chunks[: self.rank])
            unit = Unit(module, params, numel, chunks, lo, lo + chunks[self.rank])
            whole = torch.cat([p.detach().reshape(-1) for p in params])
            if stage == "zero3":
                # Only this rank's chunk persists; the gather buffer starts freed.
                unit.shard = whole[unit.lo : unit.hi].clone()
                unit.flat = torch.empty(numel)  # freed below, once the views exist
                unit.leaf = unit.shard
            else:
                unit.flat = whole
                unit.leaf = whole.detach() if stage == "ddp" else whole[unit.lo : unit.hi].detach()
            # Point the module's parameters into the flat buffer (FSDP1's flat
            # parameter): a collective on the buffer is one on the parameters.
            for p, view in zip(params, _views(unit.flat, params), strict=True):
                p.data = view
                self._param_ids.add(id(p))
            if stage == "zero3":
                self._free(unit)
            if stage in ("ddp", "zero1"):
                unit.grad = torch.zeros(numel)  # persistent whole grads (DDP's buckets)
            else:
                unit.grad = torch.zeros(unit.hi - unit.lo)  # persistent grad shard
            self.units.append(unit)
        self.optimizer = torch.optim.Adam([u.leaf for u in self.units], lr=lr)
        self.record()

    # -- measuring ---------------------------------------------------------------
    def _is_param(self, tensor: torch.Tensor) -> bool:
        if id(tensor) in self._param_ids or isinstance(tensor, nn.Parameter):
            return True
        return tensor.untyped_storage().data_ptr() in self._flat_ptrs

    def _note_flats(self) -> None:
        """Where the units' flat parameter buffers live now (zero3 frees and re-gathers
        them), read once per forward rather than asked of every unit for every tensor
        autograd saves: that would be a noticeable share of the forward, all of it
        measuring."""
        self._flat_ptrs = {
            u.flat.untyped_storage().data_ptr() for u in self.units if u.flat is not None
        }

    def memory(self) -> dict[str, int]:
        """Bytes per category held right now, from the live tensors."""
        units = self.units
        params = sum(nbytes(u.shard) if self.stage == "zero3" else nbytes(u.flat) for u in units)
        comm = sum(nbytes(u.bucket) for u in units)
        if self.stage == "zero3":
            comm += sum(storage_bytes(u.flat) for u in units)
        activations = sum(h.saved_bytes for h in self.held.values()) + sum(
            nbytes(g) for g in self.grad_in.values()
        )
        return {
            "params": params,
            "grads": sum(nbytes(u.grad) for u in units),
            "optimizer": optimizer_bytes(self.optimizer),
            "activations": activations,
            "buffers": comm,
        }

    # -- collectives on a flat buffer, by the hand ring ----------------------------
    def _ring(self, actions: dict[int, list[Action]], flat: torch.Tensor) -> None:
        comm = Comm()  # fresh, so its receive scratch is freed with it
        comm.run(actions.get(self.rank, []), flat)
        self.bytes_sent += comm.bytes_sent

    def _reduce_scatter(self, flat: torch.Tensor) -> None:
        self._ring(collectives.ring_reduce_scatter(self.group, flat.numel(), 4), flat)

    def _all_gather(self, flat: torch.Tensor) -> None:
        self._ring(collectives.ring_all_gather(self.group, flat.numel(), 4), flat)

    # -- actions --------------------------------------------------------------------
    def __call__(self, action: Action) -> None:
        kind = action.kind
        u = action.chunk
        if kind == "F":
            self._forward(u)
        elif kind == "B":
            self._backward(u)
        elif kind == "all_gather":
            self._gather(self.units[u])
        elif kind == "reduce_scatter":
            self._scatter_grads(self.units[u])
        elif kind == "all_reduce":
            unit = self.units[u]
            self._ring(collectives.ring_all_reduce(self.group, unit.numel, 4), unit.grad)
            unit.grad.div_(self.world)  # sum of per-rank means -> mean of the global batch
        elif kind == "opt":
            self._step()
        elif kind == "barrier":
            dist.barrier()
        else:
            raise ValueError(f"ZeroExecutor cannot run a {kind!r} action")
        self.record()

    def _forward(self, u: int) -> None:
        unit = self.units[u]
        if u == 0:
            self.losses.append(float("nan"))
            if self.stage in ("ddp", "zero1"):
                for other in self.units:
                    other.grad.zero_()
        last = u == len(self.units) - 1
        inputs = None if u == 0 else self.held[u - 1].output.detach().requires_grad_()
        self._note_flats()
        counter = SavedBytes(self._is_param)
        with counter.hooks():
            if u == 0:
                output = unit.module(self.inputs)
            elif last:
                output = unit.module(inputs, self.targets)
            else:
                output = unit.module(inputs)
        self.held[u] = Held(inputs, output, counter.total)
        if last:
            self.losses[-1] = float(output.detach())
        if self.stage == "zero3":
            self.record()  # the gathered unit and its new activations, both alive
            self._free(unit)

    def _backward(self, u: int) -> None:
        unit, held = self.units[u], self.held[u]
        if self.stage in ("ddp", "zero1"):
            target = unit.grad
        else:
            unit.bucket = torch.zeros(unit.numel)
            target = unit.bucket
        # Gradients accumulate in place into views of the target buffer (DDP's
        # gradient_as_bucket_view): the buffer is the gradient, nothing is copied.
        views = _views(target, unit.params)
        for p, view in zip(unit.params, views, strict=True):
            p.grad = view
        grad_out = self.grad_in.pop(u + 1, None)
        held.output.backward(grad_out)
        if any(p.grad.data_ptr() != v.data_ptr() for p, v in zip(unit.params, views, strict=True)):
            raise RuntimeError("autograd replaced a gradient view; the flat buffers would be stale")
        for p in unit.params:
            p.grad = None  # the buffer keeps the values; the views would pin a bucket
        if held.inputs is not None:
            self.grad_in[u] = held.inputs.grad
        del self.held[u]
        if self.stage == "zero3":
            self.record()  # the gathered unit and its gradient bucket, both alive
            self._free(unit)

    def _gather(self, unit: Unit) -> None:
        if self.stage == "zero3":
            # Re-allocate the freed buffer in place: the parameters (and what autograd
            # saved of them in forward) are views of this storage and see the data again.
            unit.flat.untyped_storage().resize_(unit.numel * 4)
            buffer = unit.flat.data  # .data: writes here do not bump autograd's version counter
            buffer[unit.lo : unit.hi].copy_(unit.shard)
            self._all_gather(buffer)
        else:
            self._all_gather(unit.flat.data)

    def _free(self, unit: Unit) -> None:
        unit.flat.untyped_storage().resize_(0)

    def _scatter_grads(self, unit: Unit) -> None:
        if self.stage == "zero1":
            self._reduce_scatter(unit.grad)
            unit.grad[unit.lo : unit.hi].div_(self.world)
            return
        self._reduce_scatter(unit.bucket)
        unit.grad.copy_(unit.bucket[unit.lo : unit.hi]).div_(self.world)
        unit.bucket = None

    def _step(self) -> None:
        for unit in self.units:
            if self.stage == "ddp":
                unit.leaf.grad = unit.grad
            elif self.stage == "zero1":
                unit.leaf.grad = unit.grad[unit.lo : unit.hi]
            else:
                unit.leaf.grad = unit.grad
        self.optimizer.step()
        for unit in self.units:
            unit.leaf.grad = None

    # -- results ------------------------------------------------------------------------
    def local_params(self) -> list[tuple[int, int, torch.Tensor]]:
        """(unit, offset, values) of the parameter elements this rank holds after the step."""
        if self.stage == "zero3":
            return [(i, u.lo, u.shard) for i, u in enumerate(self.units)]
        return [(i, 0, u.flat) for i, u in enumerate(self.units)]
