"""A plan of the 4D planner: one layout, its memory, its step part by part, its cost, its MFU and HFU.

What scenarios.why_distribute.planner returns (a Plan per layout kept, and the
Planning of a whole search) and the report (scenarios.why_distribute.report)
writes out. Imports: the lesson's footprint only.
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.why_distribute.footprint import Layout


@dataclass(frozen=True)
class Plan:
    layout: Layout
    memory: dict[str, float]  # bytes on the busiest GPU, by category
    fits: bool
    step_s: float
    parts: dict[str, float]  # seconds per step: compute, tp, pipeline, dp, optimizer
    steps: float  # optimizer steps to train on every token
    price: float  # dollars per GPU-hour
    setup_hours: float
    margin: float
    simulated: bool = False
    model_flops: float = 0.0  # per step, all GPUs: 6Ψ + causal attention per token
    hardware_flops: float = 0.0  # per step, all GPUs: what they execute, recomputation included
    peak: float = 0.0  # one GPU's dense peak FLOP/s

    @property
    def gpus(self) -> int:
        return self.layout.gpus

    @property
    def train_s(self) -> float:
        return self.steps * self.step_s

    @property
    def train_days(self) -> float:
        return self.train_s / 86400

    @property
    def cost_usd(self) -> float:
        return self.gpus * self.price * (self.train_s / 3600 + self.setup_hours) * self.margin

    @property
    def mfu(self) -> float:
        """Model-FLOPs utilisation: the model's FLOPs per step over the GPUs' peak."""
        return self.model_flops / (self.gpus * self.peak * self.step_s) if self.peak else 0.0

    @property
    def hfu(self) -> float:
        """Hardware-FLOPs utilisation: what the GPUs execute (recomputation included)."""
        return self.hardware_flops / (self.gpus * self.peak * self.step_s) if self.peak else 0.0

    @property
    def name(self) -> str:
        lay = self.layout
        out = f"tp{lay.tp}·" + (f"cp{lay.cp}·" if lay.cp > 1 else "") + f"pp{lay.pp}·dp{lay.dp}"
        out += f"·v{lay.chunks}" if lay.chunks > 1 else ""
        out += f"·mbs{lay.micro}" if lay.micro > 1 else ""
        out += f" {lay.zero}" + (" deepspeed" if lay.engine == "deepspeed" else "")
        return out + (f" rc={lay.recompute}" if lay.recompute != "none" else "")

    @property
    def shape_key(self) -> tuple[int, int, int, int]:
        return (self.layout.tp, self.layout.cp, self.layout.pp, self.layout.dp)


@dataclass(frozen=True)
class Planning:
    by_time: list[Plan]  # one per shape, fastest first
    by_cost: list[Plan]  # the same plans, cheapest first
    recommended: Plan | None
    layouts_tried: int
    layouts_fitting: int
    dp_only: Plan  # plain DDP on every GPU: what data parallelism alone would hold
    cheapest: Plan | None = None  # the cheapest plan on any subset (meeting the deadline)
    pinned: bool = False  # the recommended plan is the layout the learner typed
