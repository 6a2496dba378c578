"""How fast a rank computes: the compute half of the cost model, measured or from a datasheet.

In docs/design.md's picture this is part of the CostModel the simulator uses, for
the compute Actions of the lessons that train the MiniGPT (a Transformer block
costs what its matmuls cost, plus what launching its operators costs). Before
any run has timed the lesson's own steps, every lesson estimates them from
these rates (`block_seconds`, `linear_seconds`, `adam_seconds`); after a run,
the lesson's measured costs replace the estimates (runtime.fit.refine.refine).

- On this machine, `playground calibrate` measures them (runtime.fit.calibration_compute):
  a MiniGPT block's forward and backward at a few shapes, in CPU seconds, with
  the threads a rank runs with and every rank busy at once, fitted to
  t = overhead + flops / rate; Adam per element and per tensor; the disk's fsync'ed
  write rate.
  CPU seconds are what one core spends alone: the simulator adds the sharing of
  cores among ranks itself (CostModel.cores), so it must not be counted twice.
- On a GPU profile (runtime.sim.profiles) they come from the datasheet's peak FLOP/s
  times the achieved fraction (MFU) the profile assumes, and a kernel-launch
  overhead; each profile names its sources.

Pure: stdlib only. Fitting these rates to timed samples is runtime.fit.compute_fit's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Operators a runtime.engine.models.Block forward dispatches on one token (LayerNorms,
# projections, views, softmax, GELU, residual adds), counted at torch's dispatcher
# (tests/test_inference_ops.py).
BLOCK_FORWARD_OPS = 32


@dataclass(frozen=True)
class ComputeRates:
    forward_flops_per_s: float  # effective, at the shapes the lessons use
    backward_flops_per_s: float  # backward does twice the forward's FLOPs
    forward_overhead_s: float  # per block forward: operator launches, eager overhead
    backward_overhead_s: float
    adam_s_per_element: float  # one Adam update of one fp32 parameter
    disk_bytes_per_s: float = 5e8  # a checkpoint's bytes, written and fsync'ed file by file
    # A checkpoint's fixed cost, its bytes apart: every rank's files fsync'ed and
    # renamed, two barriers and rank 0's commit (runtime.engine.checkpoint), every rank writing
    # at once (calibrated: runtime.fit.calibration_disk; else a guess).
    checkpoint_s: float = 5e-3
    # ... and per parameter tensor: torch's Adam on a CPU loops over its tensors, a dozen
    # operators each; a MiniGPT's 29 small tensors cost it more than their elements.
    adam_s_per_tensor: float = 0.0
    # torch's FSDP2, per parameter tensor per step, beyond the FLOPs: its DTensor
    # bookkeeping, the copy into and out of each all-gather/reduce-scatter buffer and the
    # latency of those collectives (forward, backward), and Adam over DTensors (opt).
    sharded_forward_s: float = 3e-4
    sharded_backward_s: float = 3e-4
    sharded_adam_s: float = 1.5e-4
    # ... and the first Adam step of a process over DTensors: DTensor's first-call costs
    # (its sharding-propagation caches) and the optimizer's state allocated on the way.
    sharded_first_adam_s: float = 5e-3
    # torch's tensor parallelism (DTensor), per parallelized module per step beyond its
    # FLOPs and collectives: dispatch, sharding propagation, redistribution bookkeeping.
    parallel_forward_s: float = 3e-4
    parallel_backward_s: float = 3e-4
    # Per activation element (token × hidden) of a block, beyond its matmuls: the
    # LayerNorms, GELU, softmax and residual adds, which stream memory rather than
    # multiply. Small blocks (hidden 64) spend a third of their time there on a CPU; a
    # datasheet profile leaves it in its achieved fraction (0).
    forward_s_per_element: float = 0.0
    backward_s_per_element: float = 0.0
    # One eager operator outside autograd (a server's decode step is hundreds of them):
    # dispatch and launch, no FLOPs to speak of. 0: a block forward's overhead over its
    # operators (`op_seconds`).
    op_s: float = 0.0
    # A split backward (zero-bubble's Bi, then W: runtime.engine.split_backward) as fractions of
    # the full one: half each in theory and on a GPU (the zero-bubble paper's B = Bi + W);
    # on a CPU autograd still walks the whole graph for Bi (calibrated: split_fractions).
    split_input_fraction: float = 0.5
    split_weight_fraction: float = 0.5
    # A block's forward and backward with its weights in fp16 / bf16 under torch's CPU
    # autocast, over the same in fp32 (calibrated: runtime.fit.calibration_compute.
    # low_precision). None: a lesson's own figure (a CPU without fast fp16/bf16 matmuls
    # converts and runs them 2-6 times slower; a GPU's tensor cores the other way).
    fp16_slowdown: float | None = None
    bf16_slowdown: float | None = None
    peak_flops_per_s: float | None = None  # a datasheet's figure, when there is one
    achieved_fraction: float | None = None  # MFU assumed against that peak
    memory_bytes: float | None = None  # one device's memory (a datasheet's)
    source: str = ""

    def block_seconds(self, tokens: int, hidden: int, seq: int) -> tuple[float, float]:
        """(forward, backward) of one pre-norm Transformer block on `tokens` tokens:
        2·12·h² FLOPs per token in its matmuls, 4·s·h in attention, and its tokens·h
        activation elements through the elementwise operators."""
        flops = block_flops(tokens, hidden, seq)
        elements = tokens * hidden
        return (
            self.forward_overhead_s
            + flops / self.forward_flops_per_s
            + elements * self.forward_s_per_element,
            self.backward_overhead_s
            + 2 * flops / self.backward_flops_per_s
            + elements * self.backward_s_per_element,
        )

    def linear_seconds(self, tokens: int, fan_in: int, fan_out: int) -> tuple[float, float]:
        """(forward, backward) of one linear map (an embedding lookup or the head);
        charged a third of a block's operator overhead and of its elementwise work per
        output element."""
        flops = 2 * fan_in * fan_out * tokens
        elements = tokens * fan_out
        return (
            (self.forward_overhead_s + elements * self.forward_s_per_element) / 3
            + flops / self.forward_flops_per_s,
            (self.backward_overhead_s + elements * self.backward_s_per_element) / 3
            + 2 * flops / self.backward_flops_per_s,
        )

    def adam_seconds(self, elements: float, tensors: int = 1) -> float:
        """One Adam step over `elements` parameters held in `tensors` tensors."""
        return elements * self.adam_s_per_element + tensors * self.adam_s_per_tensor

    def sharded_seconds(self, tensors: int) -> tuple[float, float, float]:
        """(forward, backward, Adam) seconds FSDP2 adds per step for `tensors` parameter
        tensors, beyond the FLOPs and the bytes its collectives move."""
        return (
            tensors * self.sharded_forward_s,
            tensors * self.sharded_backward_s,
            tensors * self.sharded_adam_s,
        )

    def parallel_seconds(self, modules: int) -> tuple[float, float]:
        """(forward, backward) seconds torch's tensor parallelism adds for `modules`
        parallelized modules, beyond their FLOPs and collectives."""
        return modules * self.parallel_forward_s, modules * self.parallel_backward_s

    def op_seconds(self) -> float:
        """One eager operator's cost: measured, or a block forward's overhead over the
        BLOCK_FORWARD_OPS operators it dispatches."""
        return self.op_s or self.forward_overhead_s / BLOCK_FORWARD_OPS

    def write_seconds(self, nbytes: float) -> float:
        return nbytes / self.disk_bytes_per_s

    def checkpoint_seconds(self, nbytes: float) -> float:
        """A checkpoint of `nbytes` in all: its fixed cost, then its bytes at the disk's
        bandwidth."""
        return self.checkpoint_s + self.write_seconds(nbytes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ComputeRates:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def block_flops(tokens: int, hidden: int, seq: int) -> int:
    """A pre-norm Transformer block's forward FLOPs: its matmuls, 2·12·h² per token,
    and attention's, 4·s·h per token (runtime.engine.models.Block)."""
    return 2 * 12 * hidden * hidden * tokens + 4 * seq * hidden * tokens


# One core of a typical recent x86 CPU running PyTorch eagerly, for a machine that was
# never calibrated (the `cpu-default` profile); `playground calibrate` measures yours.
TYPICAL_CPU = ComputeRates(
    forward_flops_per_s=40e9,
    backward_flops_per_s=40e9,
    forward_overhead_s=150e-6,
    backward_overhead_s=400e-6,
    adam_s_per_element=3e-9,
    adam_s_per_tensor=20e-6,
    disk_bytes_per_s=5e8,
    op_s=5e-6,
    source="typical one-core figures of PyTorch on a recent x86 CPU (not measured here)",
)


def gpu(
    peak_flops_per_s: float,
    memory_bytes: float,
    memory_bytes_per_s: float,
    *,
    achieved_fraction: float = 0.4,
    launch_s: float = 5e-6,
    source: str,
) -> ComputeRates:
    """A datasheet GPU: matmuls at `achieved_fraction` (MFU) of the peak; a block costs
    about 12 kernel launches forward and 24 backward; Adam streams 28 bytes per
    element (reads parameter, gradient and two moments, writes three) through HBM; a
    checkpoint is written to an NVMe disk at about 2 GB/s. FSDP2's bookkeeping per
    parameter tensor, and DTensor's per module torch's tensor parallelism parallelizes,
    are host-side dispatch, mostly hidden under the kernels they queue: a few launches'
    worth (an assumption, not a measurement)."""
    rate = peak_flops_per_s * achieved_fraction
    return ComputeRates(
        forward_flops_per_s=rate,
        backward_flops_per_s=rate,
        forward_overhead_s=12 * launch_s,
        backward_overhead_s=24 * launch_s,
        adam_s_per_element=28 / memory_bytes_per_s,
        adam_s_per_tensor=launch_s,  # one multi-tensor (foreach) kernel per few tensors
        disk_bytes_per_s=2e9,
        sharded_forward_s=4 * launch_s,
        sharded_backward_s=8 * launch_s,
        sharded_adam_s=2 * launch_s,
        sharded_first_adam_s=5e-3,  # host-side, once: as on a CPU
        parallel_forward_s=4 * launch_s,
        parallel_backward_s=8 * launch_s,
        op_s=launch_s,
        peak_flops_per_s=peak_flops_per_s,
        achieved_fraction=achieved_fraction,
        memory_bytes=memory_bytes,
        source=source,
    )
