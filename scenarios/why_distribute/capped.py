"""The demonstration's executors: ZeRO's, under a per-rank memory cap, and torch's DDP.

Lesson 0's rank side (scenarios.why_distribute.rank) runs the Program of
scenarios.why_distribute.demo with these. The memory accounting is the ZeRO
lesson's (scenarios.zero.measure: the bytes of the live tensors by category,
sampled after every Action and in the middle of ZeRO-3's and FSDP2's steps);
`Capped` adds the cap: the total held is compared with `gpu_memory` each time.
A rank alone refuses the first time it is over (MemoryCapExceeded, which names
the bytes); ranks in a group only say they went over, since one rank stopping
in the middle of a collective would leave the others waiting for it.

- CappedDDP: the ZeRO lesson's hand-made DDP on ranks 0..n-1 (its ring
  all-reduce follows `group`, so a subgroup needs no torch process group);
- CappedZero3: its hand-made ZeRO-3 on every rank;
- CappedFsdp2: torch's FSDP2 on every rank;
- TorchDDP: torch's DistributedDataParallel on a process group of n ranks (its
  bucket all-reduces run inside backward).

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import torch
from torch import nn

from runtime.engine.models import MiniGPT
from runtime.sim.program import Action
from scenarios.zero.executors import ZeroExecutor
from scenarios.zero.fsdp2 import Fsdp2Executor
from scenarios.zero.measure import Sampler, Tracker


class MemoryCapExceeded(RuntimeError):
    def __init__(self, held: dict[str, int], cap: int):
        super().__init__(f"{sum(held.values()):,} B live > gpu_memory {cap:,} B")
        self.held, self.cap = held, cap


class Capped(Tracker):
    """A Tracker whose total live bytes are held against a cap after every sample."""

    cap: int = 0
    refuse: bool = False
    peak_total: int = 0
    over: dict[str, int] | None = None  # what was held the first time it went over

    def record(self) -> dict[str, int]:
        held = super().record()
        total = sum(held.values())
        self.peak_total = max(self.peak_total, total)
        if self.cap and total > self.cap and self.over is None:
            self.over = held
            if self.refuse:
                raise MemoryCapExceeded(held, self.cap)
        return held


class CappedDDP(Capped, ZeroExecutor):
    def __init__(self, model: MiniGPT, members: int, cap: int, *, lr: float, sample: Sampler):
        self.cap, self.refuse = cap, members == 1
        super().__init__(model, "ddp", lr=lr, sample=sample)
        # DDP on ranks 0..members-1: its all-reduce's ring and its mean follow these.
        self.world, self.group = members, list(range(members))


class CappedZero3(Capped, ZeroExecutor):
    def __init__(self, model: MiniGPT, cap: int, *, lr: float, sample: Sampler):
        self.cap = cap
        super().__init__(model, "zero3", lr=lr, sample=sample)


class CappedFsdp2(Capped, Fsdp2Executor):
    def __init__(self, model: MiniGPT, cap: int, *, lr: float, sample: Sampler):
        self.cap = cap
        super().__init__(model, lr=lr, sample=sample)


class TorchDDP:
    """torch's DistributedDataParallel on `group`, its Actions F, B and Adam."""

    def __init__(self, model: MiniGPT, group: object, *, lr: float):
        self.model = model
        self.ddp = nn.parallel.DistributedDataParallel(model, process_group=group)
        self.optimizer = torch.optim.Adam(self.ddp.parameters(), lr=lr)
        self.loss: torch.Tensor | None = None
        self.inputs: torch.Tensor | None = None
        self.targets: torch.Tensor | None = None

    def set_batch(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        self.inputs, self.targets = inputs, targets

    def __call__(self, action: Action) -> None:
        if action.kind == "F":
            self.optimizer.zero_grad(set_to_none=True)
            self.loss = self.ddp(self.inputs, self.targets)
        elif action.kind == "B":
            assert self.loss is not None
            self.loss.backward()
        elif action.kind == "opt":
            self.optimizer.step()
        elif action.kind == "all_reduce":
            pass  # its buckets were all-reduced inside backward (the Program says so)
        else:
            raise ValueError(f"TorchDDP cannot run a {action.kind!r} action")
