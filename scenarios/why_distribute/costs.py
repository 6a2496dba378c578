"""What one training step of a 3D layout costs on a GPU profile, part by part.

The planner's cost model (scenarios.why_distribute.planner), built from the
project's: compute from the profile's compute rates (runtime.sim.compute: matmuls
at the achieved FLOP/s, a kernel launch overhead per layer), collectives from
runtime.sim.costmodel's α-β formulas over the links the group crosses (NVLink
inside a node, InfiniBand or Ethernet across). Ranks are placed TP innermost
(consecutive ranks), then PP, then DP outermost: global rank = d·(t·p) + s·t + j
for DP index d, stage s, TP index j. Which degrees win is left to the numbers.

Per microbatch of b sequences of s tokens, per layer (Megatron, Shoeybi et al.
2019; Korthikanti et al. 2022 for sequence parallelism):
- forward: (2·Ψ/L + 4·s·h)·b·s / t FLOPs (the layer's share of Ψ, and attention's
  scores), backward twice that; full recomputation runs the forward again in
  backward, selective only the attention scores (4·s·h·b·s/t);
- TP: 2 all-reduces of b·s·h elements forward and 2 backward (2 more with full
  recomputation; sequence parallelism's all-gather + reduce-scatter moves the same
  bytes);
- PP: one activation of b·s·h/t elements to the next stage forward, its gradient
  back (Megatron's scatter-gather: each TP rank sends its share);
- DP: after the last backward, the stage's gradients all-reduced over the DP group
  (2Ψ elements per rank; ZeRO-1/2 reduce-scatter then all-gather the same; ZeRO-3
  gathers the parameters once more, 3Ψ, the ZeRO paper's §7), not overlapped with
  backward (an upper bound: DDP's buckets hide much of it);
- Adam over the elements this rank updates.

Imports: runtime's pure part and the lesson's own modules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

from runtime.sim import formulas
from runtime.sim.compute import ComputeRates
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action
from scenarios.shape import GPTShape
from scenarios.why_distribute.footprint import Layout, element_bytes
from scenarios.why_distribute.gpus import Gpu


@dataclass(frozen=True)
class Problem:
    """What the planner is asked: a model, its training run, and the GPUs it may use."""

    psi: float
    shape: GPTShape
    precision: str
    micro: int  # sequences per microbatch
    global_batch: int  # sequences per step
    tokens: float  # to train on in all
    gpu: Gpu
    gpus: int  # available
    per_node: int
    tflops: float = 0.0  # achieved TFLOP/s (0: the profile's MFU)
    price: float = 1.0  # dollars per GPU-hour
    setup_hours: float = 0.0
    margin: float = 1.0
    deadline_s: float = float("inf")
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def model(self) -> CostModel:
        return self.gpu.links(self.per_node, self.tflops)

    @cached_property
    def rates(self) -> ComputeRates:
        assert self.model.rates is not None
        return self.model.rates

    @property
    def achieved_flops(self) -> float:
        return self.rates.forward_flops_per_s

    @property
    def elem(self) -> int:
        return element_bytes(self.precision)

    def all_reduce(self, group: range, nbytes: float) -> float:
        """Seconds of a ring all-reduce over `group` (global ranks) on the profile's links."""
        if len(group) <= 1:
            return 0.0
        key = ("ar", group.start, group.stop, group.step, nbytes)
        if key not in self._cache:
            action = Action(
                "ar", 0, "all_reduce", bytes=int(nbytes), group=group, algorithm="builtin"
            )  # type: ignore[arg-type]
            self._cache[key] = self.model.collective_time(action)
        return self._cache[key]

    def tp_all_reduce(self, t: int, nbytes: float) -> float:
        """The slowest TP group's all-reduce: groups of t consecutive ranks, one of which
        spans two nodes when t does not divide a node's GPUs (t = 3, 6 on 8-GPU nodes);
        the pattern repeats every lcm(t, per_node) ranks."""
        groups = math.lcm(t, self.per_node) // t
        return max(self.all_reduce(range(g * t, (g + 1) * t), nbytes) for g in range(groups))


@dataclass(frozen=True)
class LayerCosts:
    """One layer, one microbatch, on one GPU: seconds of compute and of TP traffic."""

    forward: float  # compute
    backward: float  # compute, recomputation included
    tp_forward: float  # TP all-reduces
    tp_backward: float

    @property
    def f(self) -> float:
        return self.forward + self.tp_forward

    @property
    def b(self) -> float:
        return self.backward + self.tp_backward


def layer_costs(problem: Problem, layout: Layout) -> LayerCosts:
    """Cached per (t, b, recomputation): thousands of layouts share a few of them."""
    key = ("layer", layout.tp, layout.micro, layout.recompute)
    if key not in problem._cache:
        problem._cache[key] = _layer_costs(problem, layout)
    return problem._cache[key]


def _layer_costs(problem: Problem, layout: Layout) -> LayerCosts:
    shape, rates, t = problem.shape, problem.rates, layout.tp
    tokens = layout.micro * shape.seq
    attention = 4 * shape.seq * shape.hidden * tokens / t
    flops = 2 * problem.psi / shape.layers * tokens / t + attention
    forward = rates.forward_overhead_s + flops / rates.forward_flops_per_s
    backward = rates.backward_overhead_s + 2 * flops / rates.backward_flops_per_s
    if layout.recompute == "full":
        backward += forward
    elif layout.recompute == "selective":
        backward += attention / rates.forward_flops_per_s
    ar = problem.tp_all_reduce(t, tokens * shape.hidden * problem.elem)
    again = 2 if layout.recompute == "full" else 0
    return LayerCosts(forward, backward, 2 * ar, (2 + again) * ar)


def stage_costs(problem: Problem, layout: Layout) -> list[tuple[float, float]]:
    """(F, B) seconds per microbatch of each virtual stage (p·v of them, stage s on
    rank s mod p), the layers split as evenly as they go (the first ones one more)."""
    one = layer_costs(problem, layout)
    split = formulas.even_split(problem.shape.layers, layout.pp * layout.chunks)
    return [(n * one.f, n * one.b) for n in split]


def activation_message_bytes(problem: Problem, layout: Layout) -> int:
    """Bytes of one activation (or its gradient) between two stages, per TP rank."""
    shape = problem.shape
    return int(layout.micro * shape.seq * shape.hidden * problem.elem / layout.tp)


def pipeline_model(problem: Problem, layout: Layout) -> CostModel:
    """The profile's links as the p pipeline ranks see them: stage s sits on global rank
    s·t, so G/t consecutive stages share a node (one when a TP group fills a node)."""
    per_node = max(1, problem.per_node // layout.tp) if layout.tp <= problem.per_node else 1
    key = ("pipeline_model", per_node)
    if key not in problem._cache:
        problem._cache[key] = replace(problem.model, ranks_per_node=per_node)
    return problem._cache[key]


def p2p_seconds(problem: Problem, layout: Layout) -> float:
    """One activation over the slowest stage boundary the pipeline crosses."""
    if layout.pp == 1:
        return 0.0
    model, nbytes = pipeline_model(problem, layout), activation_message_bytes(problem, layout)
    crosses = any(not model.same_node(r, r + 1) for r in range(layout.pp - 1))
    return model.p2p_time(0, layout.pp - 1 if crosses else 1, nbytes)


def local_elements(problem: Problem, layout: Layout) -> float:
    """Parameters the busiest GPU holds before ZeRO shards them: its stage's, over t."""
    layers = layout.stage_layers(problem.shape.layers)
    return problem.psi * layers / problem.shape.layers / layout.tp


def dp_seconds(problem: Problem, layout: Layout) -> float:
    """The gradients' all-reduce over the DP group (×1.5 under ZeRO-3)."""
    grad_bytes = formulas.ZERO_PRECISIONS[problem.precision][1]
    stride = layout.tp * layout.pp
    group = range(0, layout.gpus, stride)
    seconds = problem.all_reduce(group, local_elements(problem, layout) * grad_bytes)
    return seconds * (1.5 if layout.zero == "zero3" else 1.0)


def optimizer_seconds(problem: Problem, layout: Layout) -> float:
    shards = layout.dp if layout.zero != "ddp" else 1
    return problem.rates.adam_seconds(local_elements(problem, layout) / shards)


def closed_form_pipeline(stages: list[tuple[float, float]], layout: Layout, p2p: float) -> float:
    """The pipeline's makespan without simulating it: the busiest rank works m times,
    the others fill and drain around it, (p − 1) shrunk v times when interleaved (1F1B:
    (m − 1)·max + Σ; Narayanan et al. 2021), each boundary crossed twice per fill."""
    p, v, m = layout.pp, layout.chunks, layout.microbatches
    busiest = busiest_rank(stages, p)
    if p == 1:
        return m * busiest
    if v == 1:
        return (m - 1) * busiest + sum(f + b for f, b in stages) + 2 * (p - 1) * p2p
    return m * busiest + (p - 1) * busiest / v + 2 * (p * v - 1) * p2p


def busiest_rank(stages: list[tuple[float, float]], ranks: int) -> float:
    """F + B per microbatch of the pipeline rank with the most work (its chunks summed)."""
    per_rank = [0.0] * ranks
    for s, (f, b) in enumerate(stages):
        per_rank[s % ranks] += f + b
    return max(per_rank)
