"""One series of lesson 6 on one rank: a precision, trained by hand or by torch, step by step.

The training loop behind scenarios.mixed_precision.rank, one method per Action
kind of the Program (scenarios.mixed_precision.plan):

- `forward` (F): the MiniGPT, its weights in the series' precision, under
  torch's CPU autocast for fp16/bf16 (softmax, LayerNorm and the loss run in fp32);
- `backward` (every B, and the bucket all-reduces inside it): the loss times
  the scale (fp16) back through the model; scenarios.mixed_precision.ddp
  launches each bucket's all-reduce from the gradient hooks;
- `wait`: every bucket's all-reduce has ended (HandDDP.finish; torch's Reducer
  waits inside backward);
- `unscale` (U): the fp16/bf16 gradients to the fp32 master copy; fp16's
  multiplied by 1/scale and checked for inf/NaN. A hand series runs the
  hand-written scaler (scenarios.mixed_precision.scaler) and, beside it on a
  copy of the same gradients, torch.amp.GradScaler("cpu"); a torch series lets
  GradScaler drive;
- `step` (opt): Adam on the fp32 master weights unless the step is skipped, then
  the new weights back to fp16/bf16.

fp32 series have no master copy: the model's own weights are Adam's.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from runtime.engine.models import GPTConfig, MiniGPT
from scenarios.mixed_precision.ddp import Clock, HandDDP, TorchDDP
from scenarios.mixed_precision.plan import Variant
from scenarios.mixed_precision.results import Memory
from scenarios.mixed_precision.scaler import INIT_SCALE, DynamicLossScaler

LR = 1e-3
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def nbytes(tensors: list[torch.Tensor | None]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


@dataclass
class Trace:
    losses: list[float] = field(default_factory=list)
    scale: list[float] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    torch_scale: list[float] = field(default_factory=list)
    torch_skipped: list[int] = field(default_factory=list)
    grads: list[torch.Tensor | None] = field(default_factory=list)  # reduced, unscaled, fp32
    events: list[tuple[float, str, str]] = field(default_factory=list)


class SeriesTrainer:
    def __init__(self, cfg: GPTConfig, v: Variant, cap: int, first_cap: int, growth: int):
        self.v = v
        self.dtype = DTYPES[v.precision]
        self.low = v.precision != "fp32"
        model = MiniGPT(cfg).to(self.dtype)
        self.model = model
        self.params = list(model.parameters())
        self.clock = Clock()
        if v.implementation == "hand":
            self.ddp: HandDDP | TorchDDP = HandDDP(model, cap, first_cap, self.clock)
            self.net: nn.Module | TorchDDP = model
        else:
            self.ddp = self.net = TorchDDP(model, cap, first_cap, self.clock)
        # The fp32 master weights Adam updates (fp32: the model's own).
        self.master = (
            [p.detach().float().clone().requires_grad_(True) for p in self.params]
            if self.low
            else self.params
        )
        self.optimizer = torch.optim.Adam(self.master, lr=LR)
        self.hand = DynamicLossScaler(growth_interval=growth) if v.scaled else None
        self.torch_scaler = (
            torch.amp.GradScaler("cpu", init_scale=INIT_SCALE, growth_interval=growth)
            if v.scaled
            else None
        )
        if self.torch_scaler is not None:
            self.torch_scaler.scale(torch.ones(()))  # GradScaler makes its scale lazily
        self.trace = Trace()
        self.loss: torch.Tensor | None = None
        self.found_inf = False
        self.peak: dict[str, int] = {}

    @property
    def scale(self) -> float:
        if self.hand is not None and self.v.implementation == "hand":
            return self.hand.scale
        return self.torch_scaler.get_scale() if self.torch_scaler is not None else 1.0

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor, poison: bool) -> None:
        self.clock.reset()
        self.ddp.poisoned = poison and self.v.scaled
        with torch.autocast("cpu", dtype=self.dtype, enabled=self.low):
            self.loss = self.net(inputs, targets)
        self.trace.losses.append(float(self.loss.detach()))

    def backward(self) -> None:
        assert self.loss is not None
        (self.loss.float() * self.scale).backward()
        self.loss = None

    def wait(self) -> None:
        self.ddp.finish()

    def unscale(self) -> None:
        """The reduced gradients into the fp32 master copy, unscaled and checked."""
        if self.low:
            for m, p in zip(self.master, self.params, strict=True):
                m.grad = p.grad.float()
        if self.torch_scaler is None:
            self.found_inf = False
            return
        if self.v.implementation == "torch":
            self.torch_scaler.unscale_(self.optimizer)
            self.found_inf = _found(self.torch_scaler, self.optimizer)
            return
        # By hand; GradScaler beside it on a copy of the same (still scaled) gradients.
        shadow = [m.grad.detach().clone().requires_grad_(False) for m in self.master]
        twins = [torch.zeros_like(g).requires_grad_(True) for g in shadow]
        for twin, grad in zip(twins, shadow, strict=True):
            twin.grad = grad
        beside = torch.optim.SGD(twins, lr=0.0)
        self.torch_scaler.unscale_(beside)
        torch_found = _found(self.torch_scaler, beside)
        self.torch_scaler.step(beside)
        self.torch_scaler.update()
        self.trace.torch_scale.append(self.torch_scaler.get_scale())
        if torch_found:
            self.trace.torch_skipped.append(len(self.trace.torch_scale))
        inverse = self.hand.inverse
        grads = [m.grad for m in self.master]
        torch._foreach_mul_(grads, inverse)
        self.found_inf = not all(bool(torch.isfinite(g).all()) for g in grads)

    def step(self, now: float) -> None:
        """Adam on the master weights (unless skipped); the scalers' update; weights back."""
        k = len(self.trace.losses)
        self.trace.grads.append(
            None if self.found_inf else torch.cat([m.grad.reshape(-1) for m in self.master])
        )
        before = self.scale
        if self.v.implementation == "torch" and self.torch_scaler is not None:
            self.torch_scaler.step(self.optimizer)
            self.torch_scaler.update()
        else:
            if self.hand is not None:
                self.hand.update(self.found_inf)
            if not self.found_inf:
                self.optimizer.step()
        if self.v.scaled:
            self.trace.scale.append(self.scale)
            if self.found_inf:
                self.trace.skipped.append(k)
                self.trace.events.append(
                    (now, "skip", f"{self.v.series}: step {k} skipped, scale → {self.scale:g}")
                )
            elif self.scale > before:
                self.trace.events.append((now, "scale", f"{self.v.series}: scale → {self.scale:g}"))
        if self.low:
            with torch.no_grad():
                for p, m in zip(self.params, self.master, strict=True):
                    p.copy_(m)
        self._measure()
        self.optimizer.zero_grad(set_to_none=False)
        for p in self.params:
            p.grad = None

    def _measure(self) -> None:
        """Bytes per category now (after the step: every category is alive), the peak kept."""
        state = [t for s in self.optimizer.state.values() for t in s.values()
                 if isinstance(t, torch.Tensor) and t.dim() > 0]  # fmt: skip
        buffers = self.ddp.buffer_bytes() if isinstance(self.ddp, HandDDP) else sum(
            self.clock.sizes.values()
        )  # fmt: skip
        now = {
            "params": nbytes(self.params),
            "grads": nbytes([p.grad for p in self.params]),
            "master": nbytes(self.master) if self.low else 0,
            "optimizer": nbytes(state),
            "buffers": buffers + (nbytes([m.grad for m in self.master]) if self.low else 0),
        }
        self.peak = {k: max(v, self.peak.get(k, 0)) for k, v in now.items()}

    def memory(self) -> Memory:
        return Memory(**self.peak)


def _found(scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer) -> bool:
    """Whether GradScaler found an inf/NaN in this optimizer's gradients (its own record)."""
    found = scaler._found_inf_per_device(optimizer)
    return bool(sum(v.item() for v in found.values()))
