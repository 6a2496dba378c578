"""The real data-parallel executors of lesson 2: DDP, ZeRO-1, ZeRO-2, ZeRO-3 by hand,
and torch's FSDP2 `fully_shard`, with memory measured from the live tensors.

The engine side of the `zero` scenario (DESIGN.md: executors live in runtime's
engine part; the Program they run is data from scenarios.zero). MiniGPT is cut
into *units* (the embedding, each block, the head): the granularity of DDP's
gradient buckets and of FSDP's wrapped modules. Each unit keeps its parameters
(and, where the stage keeps them whole, its gradients) in one flat fp32 buffer,
so that a unit's collective is one hand-made ring (runtime.comm) over that buffer
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
  is freed after each (FSDP's reshard after forward), grads as in zero2;
- fsdp2: the same model under torch.distributed.fsdp.fully_shard (one FSDP unit
  per unit, resharding after forward); its collectives are torch's, counted by a
  custom all-gather / reduce-scatter that calls torch's own.

Memory categories, sampled as Counters "<stage>/<category>" after every Action
(and inside FSDP2's collectives), each the bytes of the tensors that category
really holds at that moment:
- params: the persistent parameters (whole, or this rank's shard);
- grads: the persistent gradients (whole, or this rank's shard);
- optimizer: every tensor in Adam's state (exp_avg, exp_avg_sq and the step);
- activations: what autograd saved for backward (pack hooks, parameters
  excluded, each storage once) plus the activation gradients waiting to flow back;
- buffers: communication buffers: gathered unit params (zero3), gradient buckets
  before their reduce-scatter (zero2, zero3), FSDP2's all-gather outputs. The
  hand ring's receive scratch lives only inside one collective and is not sampled.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from runtime import collectives
from runtime.comm import Comm
from runtime.formulas import even_split
from runtime.models import MiniGPT
from runtime.program import Action

CATEGORIES = ("params", "grads", "optimizer", "activations", "buffers")
HAND_STAGES = ("ddp", "zero1", "zero2", "zero3")
Sampler = Callable[[str, float], None]


def units_of(model: MiniGPT) -> list[nn.Module]:
    """The model's units in forward order: embedding, each block, head."""
    return [model.embedding, *model.blocks, model.head]


def nbytes(tensor: torch.Tensor | None) -> int:
    if tensor is None:
        return 0
    return tensor.numel() * tensor.element_size()


def storage_bytes(tensor: torch.Tensor | None) -> int:
    """Bytes a tensor's storage really holds now (0 once a buffer is freed by resize)."""
    return 0 if tensor is None else tensor.untyped_storage().nbytes()


def _is_dtensor(tensor: torch.Tensor) -> bool:
    return hasattr(tensor, "to_local")


def local_bytes(tensor: torch.Tensor | None) -> int:
    """Bytes of this rank's part: the local shard of a DTensor, else the tensor."""
    if tensor is None:
        return 0
    return nbytes(tensor.to_local()) if _is_dtensor(tensor) else nbytes(tensor)


def optimizer_bytes(optimizer: torch.optim.Optimizer) -> int:
    return sum(
        nbytes(value)
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )


class SavedBytes:
    """Counts what autograd saves for backward: each storage once, parameters excluded."""

    def __init__(self, exclude: Callable[[torch.Tensor], bool]):
        self.exclude = exclude
        self.storages: dict[int, int] = {}

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        if not self.exclude(tensor):
            storage = tensor.untyped_storage()
            self.storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    @property
    def total(self) -> int:
        return sum(self.storages.values())

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda tensor: tensor)


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


class ZeroExecutor:
    """Runs one rank's Actions of one hand-made stage (ddp, zero1, zero2, zero3)."""

    def __init__(
        self,
        model: MiniGPT,
        stage: str,
        *,
        lr: float,
        sample: Sampler | None = None,
    ):
        if stage not in HAND_STAGES:
            raise ValueError(f"unknown stage {stage!r}")
        self.stage = stage
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.group = list(range(self.world))
        self.sample = sample
        self.bytes_sent = 0
        self.peaks = dict.fromkeys(CATEGORIES, 0)
        self.held: dict[int, Held] = {}
        self.grad_in: dict[int, torch.Tensor] = {}  # dLoss/d(input of unit u+1), for B u
        self.losses: list[float] = []
        self.inputs: torch.Tensor | None = None
        self.targets: torch.Tensor | None = None
        self.units: list[Unit] = []
        self._param_ids: set[int] = set()
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
        self._record()

    # -- inputs ----------------------------------------------------------------
    def set_batch(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        self.inputs, self.targets = inputs, targets

    # -- measuring ---------------------------------------------------------------
    def _is_param(self, tensor: torch.Tensor) -> bool:
        if id(tensor) in self._param_ids or isinstance(tensor, nn.Parameter):
            return True
        ptr = tensor.untyped_storage().data_ptr()
        return any(
            u.flat is not None and ptr == u.flat.untyped_storage().data_ptr() for u in self.units
        )

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

    def _record(self) -> None:
        for category, value in self.memory().items():
            self.peaks[category] = max(self.peaks[category], value)
            if self.sample is not None:
                self.sample(f"{self.stage}/{category}", value)

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
        self._record()

    def _forward(self, u: int) -> None:
        unit = self.units[u]
        if u == 0:
            self.losses.append(float("nan"))
            if self.stage in ("ddp", "zero1"):
                for other in self.units:
                    other.grad.zero_()
        last = u == len(self.units) - 1
        inputs = None if u == 0 else self.held[u - 1].output.detach().requires_grad_()
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
            self._record()  # the gathered unit and its new activations, both alive
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
        for p, view in zip(unit.params, _views(target, unit.params), strict=True):
            p.grad = view
        grad_out = self.grad_in.pop(u + 1, None)
        held.output.backward(grad_out)
        if any(
            p.grad.data_ptr() != v.data_ptr()
            for p, v in zip(unit.params, _views(target, unit.params), strict=True)
        ):
            raise RuntimeError("autograd replaced a gradient view; the flat buffers would be stale")
        for p in unit.params:
            p.grad = None  # the buffer keeps the values; the views would pin a bucket
        if held.inputs is not None:
            self.grad_in[u] = held.inputs.grad
        del self.held[u]
        if self.stage == "zero3":
            self._record()  # the gathered unit and its gradient bucket, both alive
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


# -- torch's FSDP2 --------------------------------------------------------------------


class Fsdp2Executor:
    """The same units under torch.distributed.fsdp.fully_shard, resharding after forward.

    FSDP2 shards each parameter on dim 0 (torch.chunk) as a DTensor; its
    collectives are torch's all_gather_single / reduce_scatter_single, issued
    through custom comm objects that count their buffers and record memory.
    """

    def __init__(self, model: MiniGPT, *, lr: float, sample: Sampler | None = None):
        # Imported here: FSDP2 pulls in DTensor and the device mesh, which the
        # hand-made stages never need.
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.fsdp._fully_shard._fsdp_collectives import (
            DefaultAllGather,
            DefaultReduceScatter,
        )

        self.stage = "fsdp2"
        self.world = dist.get_world_size()
        self.sample = sample
        self.bytes_sent = 0
        self.peaks = dict.fromkeys(CATEGORIES, 0)
        self.losses: list[float] = []
        self.saved = SavedBytes(self._is_param)
        self.pending_grads = 0  # gradient buckets handed to a reduce-scatter, not yet released
        # All-gather outputs FSDP2 asked for, by weak reference: holding them would
        # keep alive what FSDP2 has already dropped.
        self.gathered: list[weakref.ref[torch.Tensor]] = []
        self.loss: torch.Tensor | None = None
        mesh = init_device_mesh("cpu", (self.world,))
        executor = self

        class CountingAllGather(DefaultAllGather):
            def allocate(self, size, *, dtype, device):  # type: ignore[no-untyped-def]
                out = super().allocate(size, dtype=dtype, device=device)
                executor.gathered.append(weakref.ref(out))
                return out

            def __call__(self, output_tensor, input_tensor, group, async_op=False):  # type: ignore[no-untyped-def]
                # A ring all-gather sends every chunk but the last it receives: (n-1) inputs.
                executor.bytes_sent += (executor.world - 1) * nbytes(input_tensor)
                executor._record()
                return super().__call__(output_tensor, input_tensor, group, async_op)

        class CountingReduceScatter(DefaultReduceScatter):
            def __call__(self, output_tensor, input_tensor, group, op, async_op=False):  # type: ignore[no-untyped-def]
                # A ring reduce-scatter sends n-1 output-sized chunks.
                executor.bytes_sent += (executor.world - 1) * nbytes(output_tensor)
                executor.pending_grads = nbytes(input_tensor)
                executor._record()
                executor.pending_grads = 0
                return super().__call__(output_tensor, input_tensor, group, op, async_op)

        self.units = units_of(model)
        for unit in self.units:
            fully_shard(unit, mesh=mesh, reshard_after_forward=True)
        fully_shard(model, mesh=mesh, reshard_after_forward=True)
        for unit in self.units:
            unit.set_custom_all_gather(CountingAllGather())
            unit.set_custom_reduce_scatter(CountingReduceScatter())
        self.model = model
        # The sharded DTensors, kept now: while a unit is unsharded its module
        # exposes plain tensors instead, which are communication buffers here.
        self.sharded = list(model.parameters())
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.inputs: torch.Tensor | None = None
        self.targets: torch.Tensor | None = None
        self._record()

    def set_batch(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        self.inputs, self.targets = inputs, targets

    def _is_param(self, tensor: torch.Tensor) -> bool:
        """A parameter, or a view of a unit's unsharded parameters (FSDP2 saves those)."""
        if isinstance(tensor, nn.Parameter):
            return True
        ptr = tensor.untyped_storage().data_ptr()
        return any(
            not _is_dtensor(p) and p.untyped_storage().data_ptr() == ptr
            for p in self.model.parameters()
        )

    def memory(self) -> dict[str, int]:
        params = sum(local_bytes(p) for p in self.sharded)
        grads = sum(local_bytes(p.grad) for p in self.sharded)
        optimizer = sum(
            local_bytes(value)
            for state in self.optimizer.state.values()
            for value in state.values()
            if isinstance(value, torch.Tensor)
        )
        # Communication buffers: the unsharded parameters of the units gathered now
        # (plain tensors on the module while unsharded; freed ones hold no storage),
        # the all-gather outputs still alive, the gradients handed to a reduce-scatter.
        self.gathered = [ref for ref in self.gathered if ref() is not None]
        comm = sum(storage_bytes(ref()) for ref in self.gathered) + self.pending_grads
        comm += sum(storage_bytes(p) for p in self.model.parameters() if not _is_dtensor(p))
        return {
            "params": params,
            "grads": grads,
            "optimizer": optimizer,
            "activations": self.saved.total,
            "buffers": comm,
        }

    def _record(self) -> None:
        for category, value in self.memory().items():
            self.peaks[category] = max(self.peaks[category], value)
            if self.sample is not None:
                self.sample(f"fsdp2/{category}", value)

    def __call__(self, action: Action) -> None:
        if action.kind == "F":
            self.saved = SavedBytes(self._is_param)
            self.optimizer.zero_grad(set_to_none=True)
            with self.saved.hooks():
                self.loss = self.model(self.inputs, self.targets)
            self.losses.append(float(self.loss.detach()))
        elif action.kind == "B":
            self.loss.backward()
            self.loss = None
            self.saved = SavedBytes(self._is_param)
        elif action.kind == "opt":
            self.optimizer.step()
        elif action.kind == "barrier":
            dist.barrier()
        else:
            raise ValueError(f"Fsdp2Executor cannot run a {action.kind!r} action")
        self._record()

    def full_params(self) -> list[torch.Tensor]:
        """Every unit's parameters gathered whole and flattened in unit order (a collective)."""
        out = []
        for unit in self.units:
            out.append(torch.cat([p.full_tensor().reshape(-1) for p in unit.parameters()]))
        return out


def step_results(executor: Any) -> dict[str, Any]:
    return {"peak_bytes": dict(executor.peaks), "bytes_sent": executor.bytes_sent}
