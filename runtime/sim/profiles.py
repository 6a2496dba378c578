"""Named hardware profiles for the cost model (`--hardware NAME`).

- `unit`: the teaching profile. Every full pipeline stage costs F = 1 and
  B = 2 time units (or B = 1 input-gradient + W = 1 weight-gradient when the
  backward is split), and communication is free, so schedules show exact
  textbook numbers (GPipe p=4, m=8: makespan 33).
- `cpu-default`: what `predict` uses when this machine was never calibrated
  (`playground calibrate` replaces it): loopback TCP through gloo, about
  30 µs per message and 2 GB/s, reductions at 4 GB/s.
- Real accelerators, from vendor datasheets (bandwidth per direction, i.e. half
  the bidirectional figure the datasheets headline); latencies are the order of
  magnitude nccl-tests reports for small messages on such systems:
  - `a100-nvlink`: NVIDIA A100 SXM datasheet: NVLink 3, 600 GB/s bidirectional
    (300 GB/s per direction) inside a DGX/HGX node of 8; HDR InfiniBand
    200 Gb/s (25 GB/s) per GPU between nodes; HBM2e 2.039 TB/s;
    312 TFLOP/s dense BF16.
  - `h100-nvlink`: NVIDIA H100 SXM datasheet: NVLink 4, 900 GB/s bidirectional
    (450 GB/s per direction) inside a node of 8; NDR InfiniBand 400 Gb/s
    (50 GB/s) per GPU between nodes; HBM3 3.35 TB/s; 989 TFLOP/s dense BF16.
  - `h200-nvlink`: NVIDIA H200 SXM datasheet: the H100's Hopper compute (989
    TFLOP/s dense BF16) and NVLink 4, with HBM3e: 141 GB at 4.8 TB/s.
  - `rtx4090-pcie`: NVIDIA Ada (AD102) whitepaper: no NVLink and no P2P, so
    traffic goes over PCIe 4.0 x16 (32 GB/s per direction peak, about 25 GB/s
    achieved) through the host; GDDR6X 1.008 TB/s; 165.2 TFLOP/s dense
    BF16/FP16 tensor with FP32 accumulate (used here; 330.3 with FP16 accumulate,
    82.6 the non-tensor FP32 rate). Between hosts (used only where a
    caller sets `ranks_per_node`): 10 Gb/s Ethernet, an assumption for consumer-GPU
    cloud hosts, which have no InfiniBand.

A reduction reads two buffers and writes one, so gamma ≈ 3 / memory bandwidth
on accelerators. Compute (runtime.sim.compute.gpu): matmuls at an assumed 40% of the
peak (the MFU well-tuned large-model training reaches), about 5 µs per kernel
launch (12 per block forward, 24 backward: what dominates a model as small as
the MiniGPT), Adam streaming 28 bytes per parameter through HBM, checkpoints
written at about 2 GB/s.

Pure: stdlib only.
"""

from __future__ import annotations

from runtime.sim.compute import TYPICAL_CPU, gpu
from runtime.sim.costmodel import CostModel

# An "80 GB" A100 or H100 holds 80 GiB (nvidia-smi: 81,920 MiB on an A100 80GB), and a
# "24 GB" RTX 4090 24 GiB: the datasheets' GB of HBM and GDDR are binary.
GIB = 2**30
GIB80 = 80 * GIB

UNIT_COMPUTE = {"F": 1.0, "B": 2.0, "Bi": 1.0, "W": 1.0, "opt": 0.0, "compute": 1.0}

PROFILES: dict[str, CostModel] = {
    "unit": CostModel(
        name="unit",
        alpha=0.0,
        beta=0.0,
        gamma=0.0,
        compute=dict(UNIT_COMPUTE),
        source="teaching profile: F=1, B=2 (or B=1 + W=1) per full stage, free communication",
    ),
    "cpu-default": CostModel(
        name="cpu-default",
        alpha=30e-6,
        beta=1 / 2e9,
        gamma=1 / 4e9,
        rates=TYPICAL_CPU,
        source="documented default for an uncalibrated CPU machine (gloo over loopback TCP); "
        "run `playground calibrate` to measure this machine",
    ),
    "a100-nvlink": CostModel(
        name="a100-nvlink",
        alpha=5e-6,
        beta=1 / 300e9,
        gamma=3 / 2.039e12,
        ranks_per_node=8,
        inter_alpha=10e-6,
        inter_beta=1 / 25e9,
        flops_per_s=312e12,
        rates=gpu(312e12, GIB80, 2.039e12, source="A100 SXM 80GB datasheet; MFU 40% assumed"),
        source="NVIDIA A100 SXM datasheet: NVLink3 300 GB/s per direction, HDR IB 25 GB/s per GPU, "
        "HBM2e 2.039 TB/s, 312 TFLOP/s BF16",
    ),
    "h100-nvlink": CostModel(
        name="h100-nvlink",
        alpha=4e-6,
        beta=1 / 450e9,
        gamma=3 / 3.35e12,
        ranks_per_node=8,
        inter_alpha=8e-6,
        inter_beta=1 / 50e9,
        flops_per_s=989e12,
        rates=gpu(989e12, GIB80, 3.35e12, source="H100 SXM 80GB datasheet; MFU 40% assumed"),
        source="NVIDIA H100 SXM datasheet: NVLink4 450 GB/s per direction, NDR IB 50 GB/s per GPU, "
        "HBM3 3.35 TB/s, 989 TFLOP/s BF16",
    ),
    "h200-nvlink": CostModel(
        name="h200-nvlink",
        alpha=4e-6,
        beta=1 / 450e9,
        gamma=3 / 4.8e12,
        ranks_per_node=8,
        inter_alpha=8e-6,
        inter_beta=1 / 50e9,
        flops_per_s=989e12,
        rates=gpu(989e12, 141e9, 4.8e12, source="H200 SXM 141GB datasheet; MFU 40% assumed"),
        source="NVIDIA H200 SXM datasheet: NVLink4 450 GB/s per direction, NDR IB 50 GB/s per GPU, "
        "HBM3e 4.8 TB/s, 141 GB, 989 TFLOP/s BF16 (the H100's Hopper compute)",
    ),
    "rtx4090-pcie": CostModel(
        name="rtx4090-pcie",
        alpha=10e-6,
        beta=1 / 25e9,
        gamma=3 / 1.008e12,
        # Between hosts (only when a caller says how many GPUs a node holds, e.g. the
        # why-distribute planner): consumer-GPU cloud hosts have no InfiniBand, so
        # 10 Gb/s Ethernet (1.25 GB/s) with TCP's tens of microseconds is assumed.
        inter_alpha=50e-6,
        inter_beta=1 / 1.25e9,
        flops_per_s=165.2e12,
        rates=gpu(
            165.2e12,
            24 * GIB,
            1.008e12,
            launch_s=4e-6,
            source="RTX 4090 (AD102) whitepaper; MFU 40% assumed",
        ),
        source="NVIDIA Ada whitepaper: PCIe 4.0 x16 ~25 GB/s achieved (no P2P), GDDR6X 1.008 TB/s, "
        "165.2 TFLOP/s dense BF16/FP16 tensor with FP32 accumulate",
    ),
}


def profile_names() -> list[str]:
    return sorted(PROFILES)


def get_profile(name: str) -> CostModel:
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(
            f"unknown hardware profile {name!r}; allowed: {', '.join(profile_names())}"
        ) from None
