"""Measuring a rank's memory from its live tensors, shared by lesson 2's executors.

Memory categories (scenarios.metrics.CATEGORIES), each the bytes of the
tensors that category really holds at a moment:
- params: the persistent parameters (whole, or this rank's shard);
- grads: the persistent gradients (whole, or this rank's shard);
- optimizer: every tensor in Adam's state (exp_avg, exp_avg_sq and the step);
- activations: what autograd saved for backward (pack hooks, parameters
  excluded, each storage once) plus the activation gradients waiting to flow back;
- buffers: communication buffers: gathered unit params (zero3), gradient buckets
  before their reduce-scatter (zero2, zero3), FSDP2's all-gather outputs. The
  hand ring's receive scratch lives only inside one collective and is not sampled.

An executor (scenarios.zero.executors, scenarios.zero.fsdp2) is a `Tracker`:
it says what it holds now (`memory`), and `record` keeps each category's peak
and samples it as a Counter of that category, its series the stage, on the rank's timeline.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from runtime.engine.models import MiniGPT
from scenarios.metrics import CATEGORIES

Sampler = Callable[[str, float, str | None], None]


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


def is_dtensor(tensor: torch.Tensor) -> bool:
    return hasattr(tensor, "to_local")


def local_bytes(tensor: torch.Tensor | None) -> int:
    """Bytes of this rank's part: the local shard of a DTensor, else the tensor."""
    if tensor is None:
        return 0
    return nbytes(tensor.to_local()) if is_dtensor(tensor) else nbytes(tensor)


def optimizer_bytes(optimizer: torch.optim.Optimizer) -> int:
    return sum(
        local_bytes(value)
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


class Tracker:
    """What every executor counts: each category's peak, bytes sent, the losses."""

    def __init__(self, stage: str, sample: Sampler | None):
        self.stage = stage
        self.sample = sample
        self.peaks = dict.fromkeys(CATEGORIES, 0)
        self.bytes_sent = 0
        self.losses: list[float] = []
        self.inputs: torch.Tensor | None = None
        self.targets: torch.Tensor | None = None

    def set_batch(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        self.inputs, self.targets = inputs, targets

    def memory(self) -> dict[str, int]:
        """Bytes per category held right now, from the live tensors."""
        raise NotImplementedError

    def record(self) -> dict[str, int]:
        """Sample what is held now, keep each category's peak; returns what it read."""
        held = self.memory()
        for category, value in held.items():
            self.peaks[category] = max(self.peaks[category], value)
            if self.sample is not None:
                self.sample(category, value, self.stage)
        return held
