"""How fast one GPU runs one layer's kernels: the planner's efficiency model, small enough to read.

Part of lesson 0's cost model (scenarios.why_distribute.costs times a layer with
it). A single "achieved fraction of peak" hides why a run reaches 45% of peak on
one layout and 52% on another; here each kernel's time is written down:

- a matmul of an m × k by a k × n, in 16-bit:
      t = 2·m·k·n / (peak · GEMM_PEAK)  +  2·(m·k + k·n + m·n) / HBM
  the tensor cores at GEMM_PEAK of the datasheet's dense peak, plus the three
  operands through memory once, not hidden under the arithmetic. The second term
  is what makes the thin matmuls TP and CP leave (k = h/t) slower per FLOP than
  the wide ones: Narayanan et al. 2021's Table 1 goes from 135 TFLOP/s (h/t = 768)
  to 163 (h/t = 3200) on the same A100s. GEMM_PEAK is fit once from that table
  (benchmarks/why_distribute.py --published shows every row against it);
- attention's QKᵀ and AV per head: the same formula with k or n = the head
  dimension d (a thin matmul, so its FLOPs run slower); a fused (flash) kernel
  skips the causal mask's zeros and writes no s × s scores;
- the rest of the layer (LayerNorms, GELU or SwiGLU, dropout, residual adds, the
  softmax of unfused attention) streams memory: the bytes Korthikanti et al. count
  as the layer's activations, written once forward, then read and their
  gradients written backward (twice the bytes), at the HBM bandwidth;
- every kernel pays a launch (the profile's, about 5 µs).

Backward runs two matmuls per forward one (the input's gradient m × n · n × k and
the weights' k × m · m × n). With `achieved_tflops` given, matmuls run at that rate
instead and nothing else is charged (the learner's figure is all-inclusive).

Imports: runtime's pure part only.
"""

from __future__ import annotations

from dataclasses import dataclass

# The fraction of the dense peak the tensor cores sustain on a large 16-bit matmul,
# fit to Narayanan et al. 2021's Table 1 (A100) with the memory term above. Another
# GPU's is this times its measured best-matmul share over the A100's (gpus.MAMF_SOURCE:
# 0.803 / 0.869 on an H100), or the same where none is measured (Ada, H200).
GEMM_PEAK = 0.74
ELEMENT = 2  # bytes of a 16-bit operand


@dataclass(frozen=True)
class Kernels:
    """One GPU's kernel rates: dense peak FLOP/s, memory bandwidth, launch cost, and
    (when > 0) a learner's flat achieved FLOP/s for matmuls."""

    peak: float
    hbm: float
    launch_s: float
    achieved: float = 0.0
    gemm_scale: float = 1.0  # the GPU's matmul share against the A100's (gpus.Gpu.matmul_scale)

    def gemm(self, m: float, n: float, k: float) -> float:
        """Seconds of one m × k by k × n matmul (see the module's formula)."""
        flops = 2 * m * n * k
        if self.achieved:
            return flops / self.achieved
        operands = ELEMENT * (m * k + k * n + m * n)
        rate = self.peak * GEMM_PEAK * self.gemm_scale
        return self.launch_s + flops / rate + operands / self.hbm

    def gemm_backward(self, m: float, n: float, k: float) -> float:
        """Its backward: the input's gradient (m × n by n × k) and the weights' (k × m by m × n)."""
        return self.gemm(m, k, n) + self.gemm(k, n, m)

    def stream(self, nbytes: float) -> float:
        """Seconds to move `nbytes` through memory (memory-bound, elementwise kernels)."""
        if self.achieved:
            return 0.0
        return nbytes / self.hbm
