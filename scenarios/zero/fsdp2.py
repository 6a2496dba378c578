"""torch's FSDP2 in lesson 2: the same MiniGPT units under `fully_shard`, measured alike.

The `fsdp2` stage of the `zero` lesson: each unit (embedding, each block, the
head) is one FSDP unit that reshards after forward, i.e. ZeRO-3. FSDP2 shards
each parameter on dim 0 (torch.chunk) as a DTensor, not one flat buffer, so its
per-rank rounding differs from the hand-made executors' (scenarios.zero
.executors). Its collectives are torch's, issued through custom comm objects
that count the bytes a ring would send for the buffers FSDP2 passes them and
record memory in the middle of the step; the categories are those of
scenarios.zero.measure.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import weakref

import torch
import torch.distributed as dist
from torch import nn

from runtime.engine.models import MiniGPT
from runtime.sim.program import Action
from scenarios.zero.measure import (
    Sampler,
    SavedBytes,
    Tracker,
    is_dtensor,
    local_bytes,
    nbytes,
    optimizer_bytes,
    storage_bytes,
    units_of,
)


class Fsdp2Executor(Tracker):
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

        super().__init__("fsdp2", sample)
        self.world = dist.get_world_size()
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
                executor.record()
                return super().__call__(output_tensor, input_tensor, group, async_op)

        class CountingReduceScatter(DefaultReduceScatter):
            def __call__(self, output_tensor, input_tensor, group, op, async_op=False):  # type: ignore[no-untyped-def]
                # A ring reduce-scatter sends n-1 output-sized chunks.
                executor.bytes_sent += (executor.world - 1) * nbytes(output_tensor)
                executor.pending_grads = nbytes(input_tensor)
                executor.record()
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
        self.param_bytes = sum(local_bytes(p) for p in self.sharded)  # shards never resize
        # Where each parameter is registered: FSDP2 swaps the sharded and the unsharded
        # tensor in place there, so reading the slots sees what the module holds now,
        # without walking the module tree on every saved tensor (model.parameters()
        # did, and the measuring took over a quarter of FSDP2's forward).
        self.slots = [
            (module, name)
            for module in model.modules()
            for name, param in module._parameters.items()
            if param is not None
        ]
        # Fused: one op over every DTensor, so DTensor propagates its sharding once per
        # step rather than once per parameter and elementwise op. Its first step (the
        # propagation caches filling) took 0.33 s unfused, 0.11 s fused, and each later
        # step 20 ms against 5; the update is the same Adam (within 1e-6 of DDP's).
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
        self.record()

    def _is_param(self, tensor: torch.Tensor) -> bool:
        """A parameter, or a view of a unit's unsharded parameters (FSDP2 saves those)."""
        if isinstance(tensor, nn.Parameter):
            return True
        ptr = tensor.untyped_storage().data_ptr()
        return any(p.untyped_storage().data_ptr() == ptr for p in self._unsharded())

    def _unsharded(self) -> list[torch.Tensor]:
        """The plain (unsharded) parameters the modules hold now."""
        held = (module._parameters[name] for module, name in self.slots)
        return [p for p in held if p is not None and not is_dtensor(p)]

    def memory(self) -> dict[str, int]:
        params = self.param_bytes
        grads = sum(local_bytes(p.grad) for p in self.sharded)
        optimizer = optimizer_bytes(self.optimizer)
        # Communication buffers: the unsharded parameters of the units gathered now
        # (plain tensors on the module while unsharded; freed ones hold no storage),
        # the all-gather outputs still alive, the gradients handed to a reduce-scatter.
        self.gathered = [ref for ref in self.gathered if ref() is not None]
        comm = sum(storage_bytes(ref()) for ref in self.gathered) + self.pending_grads
        comm += sum(storage_bytes(p) for p in self._unsharded())
        return {
            "params": params,
            "grads": grads,
            "optimizer": optimizer,
            "activations": self.saved.total,
            "buffers": comm,
        }

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
        self.record()

    def full_params(self) -> list[torch.Tensor]:
        """Every unit's parameters gathered whole and flattened in unit order (a collective)."""
        out = []
        for unit in self.units:
            out.append(torch.cat([p.full_tensor().reshape(-1) for p in unit.parameters()]))
        return out
