"""What one training step of a 4D layout costs on a GPU profile, part by part.

The planner's cost model (scenarios.why_distribute.planner), built from the
project's: each kernel's time from the efficiency model (.efficiency: matmuls by
their shapes after the TP and CP splits, attention, the elementwise rest at memory
speed, launches), collectives from runtime.sim.costmodel's α-β formulas over the
links the group crosses (NVLink inside a node, InfiniBand or Ethernet across).
Ranks are placed TP innermost (consecutive ranks), then CP, then PP, then DP
outermost. Which degrees win is left to the numbers.

Per microbatch of b sequences of s tokens (s/c on each of c CP ranks), per layer
(Megatron, Shoeybi et al. 2019; Korthikanti et al. 2022 for sequence parallelism):
- forward: the layer's matmuls (QKV with GQA's smaller K and V, the output
  projection, the MLP's two or three matrices) split t ways, attention over the
  whole sequence's keys, the kept activations streamed; backward twice the
  matmuls; full recomputation runs the forward again in backward, selective only
  attention; the output layer on the last stage;
- TP: 2 all-reduces of b·s·h/c elements forward and 2 backward (2 more with full
  recomputation; sequence parallelism's all-gather + reduce-scatter moves the same
  bytes), not overlapped (Megatron 2021);
- CP (ring attention): each rank's K and V passed c − 1 hops round the ring,
  overlapped with the attention of the block at hand; backward passes them and
  their gradients; what the attention does not hide is exposed;
- PP: one activation of b·s·h/(t·c) elements to the next stage forward, its
  gradient back;
- DP: the gradients all-reduced over the ranks holding the same weights (DP × CP),
  2Ψ elements per rank (ZeRO-1/2 the same; ZeRO-3 (2m + 1)Ψ, overlapped with the
  compute layer by layer), after the last backward for DDP and ZeRO-1/2;
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
from scenarios.why_distribute.efficiency import ELEMENT, Kernels
from scenarios.why_distribute.footprint import Layout, chunk_layers, element_bytes
from scenarios.why_distribute.gpus import Gpu
from scenarios.why_distribute.model import Model

# A fused attention kernel (FlashAttention-2 and its kin) sustains about this share of
# the dense peak on its QKᵀ and AV FLOPs (Dao 2023: 50-73% forward on an A100).
FUSED_PEAK = 0.6


@dataclass(frozen=True)
class Problem:
    """What the planner is asked: a model, its training run, and the GPUs it may use."""

    psi: float
    shape: Model
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
    flash: bool = False  # a fused attention kernel (no s × s scores in memory)
    recompute: str = "auto"  # the recomputation asked (auto: the planner tries each)
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

    @cached_property
    def kernels(self) -> Kernels:
        """The efficiency model's rates: the datasheet's peak and memory bandwidth, the
        profile's launch cost, or the learner's achieved TFLOP/s for every matmul."""
        rates, gamma = self.gpu.rates, self.gpu.model.gamma
        assert rates.peak_flops_per_s is not None
        hbm = 3 / gamma if gamma else 1e12  # the profile's γ is 3 bytes at HBM speed
        launch = rates.forward_overhead_s / 12  # the profile's 12 launches a block forward
        scale = self.gpu.matmul_scale
        return Kernels(rates.peak_flops_per_s, hbm, launch, self.tflops * 1e12, scale)

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
    """One layer, one microbatch, on one GPU: seconds of compute, of TP traffic and of
    the CP ring's traffic left exposed after the attention it overlaps."""

    forward: float  # compute
    backward: float  # compute, recomputation included
    tp_forward: float  # TP all-reduces (all-gather + reduce-scatter under SP)
    tp_backward: float
    cp_forward: float = 0.0  # ring attention's K/V passes not hidden under attention
    cp_backward: float = 0.0
    flops_forward: float = 0.0  # what the GPU executes (HFU's numerator)
    flops_backward: float = 0.0

    @property
    def f(self) -> float:
        return self.forward + self.tp_forward + self.cp_forward

    @property
    def b(self) -> float:
        return self.backward + self.tp_backward + self.cp_backward


def layer_costs(problem: Problem, layout: Layout) -> LayerCosts:
    """Cached per (t, c, b, recomputation): thousands of layouts share a few of them."""
    key = ("layer", layout.tp, layout.cp, layout.micro, layout.recompute)
    if key not in problem._cache:
        problem._cache[key] = _layer_costs(problem, layout)
    return problem._cache[key]


def _layer_costs(problem: Problem, layout: Layout) -> LayerCosts:
    """The efficiency model (scenarios.why_distribute.efficiency) on this layer's kernels:
    its matmuls after the TP split of heads and columns and the CP split of the sequence,
    attention over the whole sequence's keys (ring attention brings them round), the
    elementwise rest as Korthikanti's activation bytes streamed through memory."""
    m, k, t, c = problem.shape, problem.kernels, layout.tp, layout.cp
    h, d, s = m.hidden, m.head_dim, m.seq
    tokens = layout.micro * s / c
    kvd = m.kv * d
    gemms = [(tokens, (h + 2 * kvd) / t, h), (tokens, h, h / t)]
    up = 2 * m.f if m.mlp == "swiglu" else m.f
    gemms += [(tokens, up / t, h), (tokens, h, m.f / t)]
    scale = m.layer_flops_weights / m.layer_matmul_weights  # params= given: its Ψ
    gemm_f = scale * sum(k.gemm(*g) for g in gemms)
    gemm_b = scale * sum(k.gemm_backward(*g) for g in gemms)
    flops = scale * 2 * tokens * m.layer_matmul_weights / t
    fused = problem.flash or c > 1  # ring attention is built from fused blocks
    keys = s / 2 if fused else s  # a fused kernel skips the causal mask's zeros
    heads = layout.micro * max(1, m.heads // t)  # (sequence, head) pairs on this GPU
    queries = s / c  # per sequence and head
    attention_flops = m.attention_flops(tokens, keys, causal=False) / t
    if fused:
        io = ELEMENT * heads * (4 * queries * d + 2 * keys * d)  # Q, O, dO; K, V as they pass
        att_f = k.launch_s + attention_flops / (k.peak * FUSED_PEAK) + io / k.hbm
        att_f = attention_flops / k.achieved if k.achieved else att_f
        att_b = 2.5 * att_f  # its backward recomputes the scores: 2.5× the forward's work
    else:
        att_f = heads * (k.gemm(queries, keys, d) + k.gemm(queries, d, keys))  # QKᵀ, AV
        att_b = heads * (k.gemm_backward(queries, keys, d) + k.gemm_backward(queries, d, keys))
    kept = m.activation_bytes(layout.micro, t, c, "none", flash=fused)
    scores = kept - m.activation_bytes(layout.micro, t, c, "selective", flash=fused)
    stream_f = k.stream(kept)  # the kept tensors, written once
    stream_b = k.stream(2 * kept)  # read back, and their gradients written
    forward = gemm_f + att_f + stream_f
    backward = gemm_b + att_b + stream_b
    executed_f = flops + attention_flops
    executed_b = 2 * executed_f
    if layout.recompute == "full":
        backward += forward
        executed_b += executed_f
    elif layout.recompute == "selective":
        backward += att_f + k.stream(scores)
        executed_b += attention_flops
    ar = problem.tp_all_reduce(t, tokens * h * problem.elem)
    again = 2 if layout.recompute == "full" else 0
    cp_f = cp_b = 0.0
    if c > 1:
        hop = ring_hop_seconds(problem, layout, 2 * tokens * max(1.0, kvd / t) * problem.elem)
        cp_f = max(0.0, (c - 1) * hop - att_f)  # each block overlaps the next one's wait
        cp_b = max(0.0, 2 * (c - 1) * hop - att_b)  # K, V and their gradients
    return LayerCosts(
        forward, backward, 2 * ar, (2 + again) * ar, cp_f, cp_b, executed_f, executed_b
    )


def head_costs(problem: Problem, layout: Layout) -> tuple[float, float, float]:
    """The output layer on the last stage, one microbatch: (forward s, backward s,
    FLOPs fwd + bwd): the logits' matmul over the vocabulary split by TP, and the
    cross-entropy streaming them."""
    m, k, t = problem.shape, problem.kernels, layout.tp
    tokens = layout.micro * m.seq / layout.cp
    logits = (tokens, m.vocab / t, m.hidden)
    loss = k.stream(4 * ELEMENT * tokens * m.vocab / t)
    flops = 6 * tokens * m.vocab * m.hidden / t
    return k.gemm(*logits) + loss / 2, k.gemm_backward(*logits) + loss / 2, flops


def ring_hop_seconds(problem: Problem, layout: Layout, nbytes: float) -> float:
    """One hop of the CP ring: ranks t apart (TP innermost), across nodes when the ring
    does not fit in one."""
    model = problem.model
    crosses = layout.tp * layout.cp > problem.per_node
    return model.p2p_time(0, problem.per_node if crosses else layout.tp, int(nbytes))


def stage_costs(problem: Problem, layout: Layout) -> list[tuple[float, float]]:
    """(F, B) seconds per microbatch of each virtual stage (p·v of them, stage s on
    rank s mod p), the layers split by footprint.chunk_layers (evenly, or the ends one
    fewer for the embedding and the output layer), the output layer on the last. Cached: the DP degree and ZeRO stage do not change it."""
    key = ("stages", layout.tp, layout.cp, layout.micro, layout.recompute, layout.pp,
           layout.chunks)  # fmt: skip
    if key not in problem._cache:
        problem._cache[key] = _stage_costs(problem, layout)
    return problem._cache[key]


def _stage_costs(problem: Problem, layout: Layout) -> list[tuple[float, float]]:
    one = layer_costs(problem, layout)
    split = chunk_layers(problem.shape.layers, layout.pp * layout.chunks)
    out = [(n * one.f, n * one.b) for n in split]
    head_f, head_b, _ = head_costs(problem, layout)
    f, b = out[-1]
    out[-1] = (f + head_f, b + head_b)
    return out


def activation_message_bytes(problem: Problem, layout: Layout) -> int:
    """Bytes of one activation (or its gradient) between two stages, per TP rank."""
    shape = problem.shape
    tokens = layout.micro * shape.seq / layout.cp
    return int(tokens * shape.hidden * problem.elem / layout.tp)


def pipeline_model(problem: Problem, layout: Layout) -> CostModel:
    """The profile's links as the p pipeline ranks see them: stage s sits on global rank
    s·t·c, so G/(t·c) consecutive stages share a node (one when a TP × CP group fills it)."""
    inner = layout.tp * layout.cp
    per_node = max(1, problem.per_node // inner) if inner <= problem.per_node else 1
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
    """Parameters the busiest GPU holds before ZeRO shards them, over t: its stage's
    layers, and the embedding or the head (all of them without a pipeline)."""
    m = problem.shape
    layers = layout.stage_layers(m.layers)
    ends = m.embedding_weights if layout.pp == 1 else m.vocab * m.hidden
    return (layers * m.layer_weights + ends) / layout.tp


def dp_seconds(problem: Problem, layout: Layout) -> float:
    """The gradients' all-reduce over the ranks holding the same weights, DP × CP
    (2Ψ per rank; ZeRO-1/2's reduce-scatter and all-gather move the same). ZeRO-3
    gathers the weights again for every microbatch's forward and backward and
    reduce-scatters once: (2m + 1)Ψ, the ZeRO paper's 3Ψ at m = 1. ZeRO-2 in a
    pipeline is FSDP as Llama 3 ran it (§3.3.2: gradients and optimizer sharded, the
    weights not resharded after forward): each microbatch's gradients reduce-scattered
    in FP32 (its "Numerical stability": 4 bytes an element), then the updated weights
    gathered once in 16 bits."""
    grad_bytes = formulas.ZERO_PRECISIONS[problem.precision][1]
    stride = layout.tp * layout.pp
    group = range(0, layout.gpus, stride)
    seconds = problem.all_reduce(group, local_elements(problem, layout) * grad_bytes)
    if layout.zero == "zero3":
        return seconds * (2 * layout.microbatches + 1) / 2
    if layout.zero == "zero2" and layout.pp > 1:
        fp32 = problem.all_reduce(group, local_elements(problem, layout) * 4)
        return (layout.microbatches * fp32 + seconds) / 2  # half an all-reduce each
    return seconds


def exposed_dp_seconds(problem: Problem, layout: Layout, compute: float) -> float:
    """What the step waits for of the DP traffic: all of it for DDP and ZeRO-1/2, run
    after the last backward as Megatron does; under ZeRO-3 (FSDP), and ZeRO-2 in a
    pipeline, the gathers and reduce-scatters run layer by layer beside the compute,
    which hides them up to its own length."""
    seconds = dp_seconds(problem, layout)
    beside = layout.zero == "zero3" or (layout.zero == "zero2" and layout.pp > 1)
    return max(0.0, seconds - compute) if beside else seconds


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
    if len(stages) == ranks:
        return max(f + b for f, b in stages)
    per_rank = [0.0] * ranks
    for s, (f, b) in enumerate(stages):
        per_rank[s % ranks] += f + b
    return max(per_rank)
