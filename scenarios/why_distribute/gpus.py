"""The GPUs a learner can name (`a100-80gb`, `h100-80gb`, `rtx4090`…), as the cost model sees them.

Part of lesson 0's mechanism (docs/design.md: the lesson's own modules beside
lesson.py). A course names GPUs the way a cloud console does; the cost model
knows hardware profiles (runtime.sim.profiles: links, memory, compute rates from the
datasheet, each with its sources). This module maps one onto the other and
gives the planner what it needs of a GPU: its memory, its achieved FLOP/s (the
profile's MFU, or the learner's `achieved_tflops`), and its links once the
learner says how many GPUs a node holds.

Imports: runtime's pure part only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime.sim.compute import ComputeRates
from runtime.sim.costmodel import CostModel
from runtime.sim.profiles import get_profile

# The largest share of its dense BF16 peak each GPU's best matmul reaches, measured
# (Bekman, Machine Learning Engineering, "Maximum Achievable Matmul FLOPS comparison
# table": mamf-finder.py, the mean of 100 runs of the best of a sweep of shapes):
# A100 SXM 271.2 of 312 TFLOP/s, H100 SXM 794.5 of 989. The planner's matmul rate
# (efficiency.GEMM_PEAK) is fit on A100s; another GPU's is scaled by its measured share
# against the A100's, or kept where none is measured.
MAMF_SOURCE = "Bekman, Machine Learning Engineering: Maximum Achievable Matmul FLOPS table"
A100_MAMF = 271.2 / 312


@dataclass(frozen=True)
class Gpu:
    name: str  # as the learner types it: a100-80gb
    label: str  # as the budget sentence says it: A100 80GB
    profile: str  # runtime.sim.profiles name
    mamf: float = 0.0  # measured best matmul share of the dense peak (0: none measured)

    @property
    def matmul_scale(self) -> float:
        """This GPU's sustained matmul share against the A100's, which GEMM_PEAK was fit
        on: 1 where no measurement says otherwise."""
        return self.mamf / A100_MAMF if self.mamf else 1.0

    @property
    def model(self) -> CostModel:
        return get_profile(self.profile)

    @property
    def rates(self) -> ComputeRates:
        rates = self.model.rates
        assert rates is not None, f"profile {self.profile} has no compute rates"
        return rates

    @property
    def memory_bytes(self) -> float:
        memory = self.rates.memory_bytes
        assert memory is not None, f"profile {self.profile} has no memory size"
        return memory

    @property
    def peak_flops(self) -> float:
        peak = self.rates.peak_flops_per_s
        assert peak is not None, f"profile {self.profile} has no peak FLOP/s"
        return peak

    def achieved(self, tflops: float = 0.0) -> ComputeRates:
        """The compute rates with matmuls at `tflops` TFLOP/s (0: the profile's MFU)."""
        if not tflops:
            return self.rates
        rate = tflops * 1e12
        return replace(
            self.rates,
            forward_flops_per_s=rate,
            backward_flops_per_s=rate,
            achieved_fraction=rate / self.peak_flops,
            source=f"{self.rates.source}; achieved {tflops:g} TFLOP/s as given",
        )

    def links(self, per_node: int, tflops: float = 0.0) -> CostModel:
        """The profile's cost model with `per_node` GPUs a node (fast links inside, the
        profile's inter-node links across) and the achieved compute rates."""
        return replace(self.model, ranks_per_node=per_node, rates=self.achieved(tflops))


GPUS: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        Gpu("a100-80gb", "A100 80GB", "a100-nvlink", A100_MAMF),
        Gpu("h100-80gb", "H100 80GB", "h100-nvlink", 794.5 / 989),
        Gpu("h200-141gb", "H200 141GB", "h200-nvlink"),
        Gpu("rtx4090", "RTX 4090", "rtx4090-pcie"),
    )
}


def gpu_named(name: str) -> Gpu:
    """The GPU called `name`; KeyError naming the ones allowed."""
    try:
        return GPUS[name]
    except KeyError:
        raise KeyError(f"unknown GPU {name!r}; allowed: {', '.join(GPUS)}") from None
