"""The real pipeline executor: runs a rank's F/B/W and p2p Actions with autograd.

The engine side of lesson 5 (docs/design.md: a lesson's mechanism lives in its
package; the schedules themselves are data from scenarios.pipeline.schedules).
For each Action of its list a rank:

- recv (activation): receives the previous stage's output for one microbatch;
- F: runs its stage forward on it (token ids on stage 0), keeping what backward
  needs; the last stage computes the loss, divided by m so the summed gradients
  equal those of the mean loss over the whole batch;
- send (activation / gradient): posts an isend. Sends never wait for the peer
  (the simulator's eager send): two neighbours sending to each other at once,
  as 1F1B's steady state does, cannot deadlock;
- recv (gradient): receives dLoss/d(output) from the next stage;
- B: full backward (input and weight gradients), or with a split backward
  (zb-h1) only the input gradient: autograd is asked for the gradients of the
  stage input and of every Linear's output, which it computes without the
  weight-gradient matmuls; the graph is then freed;
- W: the weight gradients left over, dW = gᵀx and db = Σg for each Linear,
  from the Linear inputs x kept at F and the output gradients g found at B.

Memory is measured from the live tensors: the bytes of what autograd saves for
backward (pack hooks, parameters excluded), and after B of a split backward
the x and g that W still needs; sampled after every action as Counters
`activations` (bytes) and `inflight` (microbatch-stages held).

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from runtime.engine.comm import Spent
from runtime.engine.models import Stage
from runtime.engine.split_backward import (
    Linears,
    input_gradients,
    recording_linears,
    weight_gradients,
)
from runtime.sim.program import Action

Key = tuple[int, int]  # (stage, microbatch)


@dataclass
class Held:
    """What one (stage, microbatch) keeps between its F and its last backward action."""

    inputs: torch.Tensor | None
    output: torch.Tensor
    saved_bytes: int
    linears: Linears = field(default_factory=list)
    output_grads: list[torch.Tensor] | None = None  # dL/dy of each Linear, after a split B

    def bytes(self) -> int:
        if self.output_grads is None:
            return self.saved_bytes
        kept = [x for _, x, _ in self.linears] + self.output_grads
        return sum(t.numel() * t.element_size() for t in kept)


class PipelineExecutor:
    """Runs one rank's pipeline Actions on its stages (keyed by stage index)."""

    def __init__(
        self,
        stages: dict[int, Stage],
        inputs: list[torch.Tensor],
        targets: list[torch.Tensor],
        *,
        hidden: int,
        sample: Callable[[str, float], None] | None = None,
    ):
        self.stages = stages
        self.inputs = inputs
        self.targets = targets
        self.microbatches = len(inputs)
        self.hidden = hidden
        self.sample = sample
        self.params = {id(p) for stage in stages.values() for p in stage.parameters()}
        self.arrived: dict[Key, torch.Tensor] = {}
        self.grad_arrived: dict[Key, torch.Tensor] = {}
        self.held: dict[Key, Held] = {}
        self.outgoing: dict[tuple[str, int, int], torch.Tensor] = {}
        self.sends: list[dist.Work] = []
        self.spent = Spent()  # every wait on a p2p request (runtime.engine.comm)
        self.posted: dict[str, tuple[dist.Work, torch.Tensor]] = {}
        self.bytes_sent = 0
        self.peak_inflight = 0
        self.peak_bytes = 0
        self.losses: dict[int, float] = {}

    # -- shapes ------------------------------------------------------------------
    def _activation(self, mb: int) -> torch.Tensor:
        batch, seq = self.inputs[mb].shape
        return torch.empty(batch, seq, self.hidden)

    # -- dispatch ---------------------------------------------------------------
    def __call__(self, action: Action) -> None:
        handler = {
            "F": self.forward,
            "B": self.backward,
            "W": self.weight_grad,
            "send": self.send,
            "recv": self.recv,
        }[action.kind]
        handler(action)
        if self.sample is not None and action.kind in ("F", "B", "W"):
            self._sample()

    def _sample(self) -> None:
        inflight = len(self.held)
        held_bytes = sum(h.bytes() for h in self.held.values())
        self.peak_inflight = max(self.peak_inflight, inflight)
        self.peak_bytes = max(self.peak_bytes, held_bytes)
        assert self.sample is not None
        self.sample("inflight", inflight)
        self.sample("activations", held_bytes)

    # -- p2p ---------------------------------------------------------------------
    def send(self, action: Action) -> None:
        buffer = action.arg("buffer")
        tensor = self.outgoing.pop((buffer, action.stage or 0, action.microbatch or 0))
        self.sends.append(dist.isend(tensor, dst=action.dst, tag=action.tag))
        self.bytes_sent += tensor.numel() * tensor.element_size()

    def prepost(self, actions: list[Action]) -> None:
        """Post every receive of a step up front, as Megatron's batched p2p does: a
        message then lands as soon as its sender sends it, and a recv Action only
        waits. Without this, gloo's rendezvous (the receiver announces its buffer,
        the sender's I/O thread answers) costs a round trip through two busy
        processes for each message when ranks outnumber cores."""
        for action in actions:
            if action.kind == "recv":
                buffer = self._activation(action.microbatch or 0)
                work = dist.irecv(buffer, src=action.src, tag=action.tag)
                self.posted[action.id] = (work, buffer)

    def recv(self, action: Action) -> None:
        key = (action.stage or 0, action.microbatch or 0)
        if action.id in self.posted:
            work, buffer = self.posted.pop(action.id)
            self.spent.wait(work)
        else:
            buffer = self._activation(key[1])
            self.spent.wait(dist.irecv(buffer, src=action.src, tag=action.tag))
        if action.arg("buffer") == "activation":
            self.arrived[key] = buffer
        else:
            self.grad_arrived[key] = buffer

    def finish(self) -> None:
        """Wait for the sends still on the wire (their buffers must outlive them)."""
        for work in self.sends:
            self.spent.wait(work)
        self.sends.clear()

    # -- compute -----------------------------------------------------------------
    def forward(self, action: Action) -> None:
        stage_index, mb = action.stage or 0, action.microbatch or 0
        stage = self.stages[stage_index]
        if stage.is_first:
            inputs = None
            x: torch.Tensor = self.inputs[mb]
        else:
            inputs = self.arrived.pop((stage_index, mb)).requires_grad_()
            x = inputs
        split = bool(action.arg("split", False))  # the Program says if B is split
        saved = [0]
        seen: set[int] = set()

        def pack(t: torch.Tensor) -> torch.Tensor:
            # Parameters are saved by reference and are not activation memory.
            if id(t) not in self.params and t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                saved[0] += t.numel() * t.element_size()
            return t

        recording = recording_linears(stage) if split else contextlib.nullcontext([])
        with recording as linears, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            if stage.is_last:
                output = stage(x, self.targets[mb]) / self.microbatches
                self.losses[mb] = float(output.detach()) * self.microbatches
            else:
                output = stage(x)
        self.held[(stage_index, mb)] = Held(inputs, output, saved[0], linears)
        if not stage.is_last:
            self.outgoing[("activation", stage_index, mb)] = output.detach()

    def backward(self, action: Action) -> None:
        key = (action.stage or 0, action.microbatch or 0)
        stage = self.stages[key[0]]
        held = self.held[key]
        grad_out = None if stage.is_last else self.grad_arrived.pop(key)
        if not action.arg("split", False):
            torch.autograd.backward(held.output, grad_out)
            del self.held[key]
            if held.inputs is not None:
                self.outgoing[("gradient", *key)] = held.inputs.grad
            return
        # Input gradient only (runtime.engine.split_backward): autograd skips the weight-gradient
        # matmuls; only each Linear's input x and output gradient g remain for W.
        grad_in, held.output_grads = input_gradients(
            stage, held.output, grad_out, held.inputs, held.linears
        )
        if grad_in is not None:
            self.outgoing[("gradient", *key)] = grad_in
        held.output = held.output.detach()

    def weight_grad(self, action: Action) -> None:
        key = (action.stage or 0, action.microbatch or 0)
        held = self.held.pop(key)
        assert held.output_grads is not None, "W before B"
        weight_gradients(held.linears, held.output_grads)
