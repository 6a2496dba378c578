"""The split backward of a zero-bubble schedule: the input's gradient now (Bi), the
weights' later (W).

Where it sits (docs/design.md): the engine side, shared by the pipeline lesson's executor
(scenarios.pipeline.executor runs zb-h1's B and W with it) and by calibration
(the pipeline lesson's calibration probe times it beside a full backward, so a prediction before
any run costs Bi and W as this machine runs them, not as B/2 each):

- `recording_linears`: while a module runs forward, each Linear's input x and output y;
- `input_gradients`: autograd asked for dL/d(input) and dL/dy of every Linear (so it
  skips the weight-gradient matmuls), plus the few parameters that are not Linear
  weights (LayerNorms, embeddings), which are cheap and accumulated at once;
- `weight_gradients`: what is left, dW = gᵀx and db = Σg for each Linear.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

# Each Linear of a module as its forward saw it: (the Linear, its input x, its output y);
# y is dropped (None) once the input gradient no longer needs the graph.
Linears = list[tuple[nn.Linear, torch.Tensor, torch.Tensor | None]]


def accumulate(param: torch.Tensor, grad: torch.Tensor) -> None:
    """Add `grad` into `param.grad`, as autograd's backward would."""
    if param.grad is None:
        param.grad = grad.detach().clone()
    else:
        param.grad.add_(grad)


@contextmanager
def recording_linears(module: nn.Module) -> Iterator[Linears]:
    """Within the block, every forward of one of `module`'s Linears appends (Linear, x, y)."""
    linears: Linears = []
    hooks = [
        sub.register_forward_hook(
            lambda mod, args, out: linears.append((mod, args[0].detach(), out))
        )
        for sub in module.modules()
        if isinstance(sub, nn.Linear)
    ]
    try:
        yield linears
    finally:
        for hook in hooks:
            hook.remove()


def input_gradients(
    module: nn.Module,
    output: torch.Tensor,
    grad_out: torch.Tensor | None,
    inputs: torch.Tensor | None,
    linears: Linears,
) -> tuple[torch.Tensor | None, list[torch.Tensor]]:
    """Bi: dL/d(inputs) (None without inputs) and dL/dy of each Linear, in order; the
    parameters of `module` that are not Linear weights get their gradients now. The graph
    is freed; each Linear's x stays in `linears` for `weight_gradients`."""
    linear_params = {id(p) for mod, _, _ in linears for p in mod.parameters()}
    others = [p for p in module.parameters() if id(p) not in linear_params]
    ys = [y for _, _, y in linears if y is not None]
    wanted = ([inputs] if inputs is not None else []) + ys + others
    grads = torch.autograd.grad(output, wanted, grad_out, allow_unused=True)
    offset = 1 if inputs is not None else 0
    for param, grad in zip(others, grads[offset + len(ys) :], strict=True):
        if grad is not None:
            accumulate(param, grad)
    output_grads = [g.detach() for g in grads[offset : offset + len(ys)]]
    linears[:] = [(mod, x, None) for mod, x, _ in linears]
    return (grads[0] if inputs is not None else None), output_grads


def weight_gradients(linears: Linears, output_grads: list[torch.Tensor]) -> None:
    """W: each Linear's weight and bias gradients from its input x and output gradient g."""
    for (linear, x, _), g in zip(linears, output_grads, strict=True):
        g2 = g.reshape(-1, g.shape[-1])
        accumulate(linear.weight, g2.t() @ x.reshape(-1, x.shape[-1]))
        if linear.bias is not None:
            accumulate(linear.bias, g2.sum(0))
