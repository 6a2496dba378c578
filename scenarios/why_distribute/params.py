"""Lesson 0's params and rank result: the model, the run, the GPUs, the budget, the demo.

Read by every module of the package that needs them (the report, the demonstration,
the rank code, the lesson); they read the package's arithmetic (.footprint, .gpus,
.phrases), never the modules above.

Imports: runtime's pure part, the lesson contract and the lesson's pure modules (the
UI imports this).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from runtime.sim import formulas
from scenarios.base import RankResult
from scenarios.params import (
    Mode,
    ParamError,
    Params,
    choice,
    count,
    duration,
    integer,
    number,
    size,
)
from scenarios.shape import GPTShape
from scenarios.why_distribute.footprint import RECOMPUTE, shape_for
from scenarios.why_distribute.gpus import GPUS
from scenarios.why_distribute.phrases import phrase

# The MiniGPT the real demonstration trains (fp32, Adam): big enough that its training
# state, not its activations, is what the cap refuses; small enough for 2 cores.
DEMO_SHAPE: dict[str, int] = dict(layers=2, hidden=64, heads=4, seq=16, vocab=64)


def _refused(field: str, key: str, **values: object) -> ParamError:
    """A rule between the params, broken: texts.toml [phrases] `key`, English and Spanish."""
    return ParamError(field, phrase(key, "en", **values), es=phrase(key, "es", **values))


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class WhyParams(Params):
    params: int | str = count("auto", maximum=10**13)
    tokens: int | str = count("auto")
    deadline: float = duration(0.0, minimum=0.0)  # 0: none given, so only memory can press
    gpu: str = choice("a100-80gb", tuple(GPUS))
    gpus: int = integer(8, 1, 1 << 16)
    gpus_per_node: int = integer(8, 1, 64)
    precision: str = choice("mixed", formulas.ZERO_PRECISIONS)
    recompute: str = choice("none", RECOMPUTE)
    microbatch_size: int = integer(1, 1, 8, 1024)
    seq: int = integer(0, 0, 1 << 20)
    global_batch: int = integer(0, 0, 1 << 24)
    achieved_tflops: float = number(0.0, 0.0, 1e6)
    price: float = number(0.0, 0.0, 1e4)
    spot: str = choice("no", ("no", "yes"))
    setup: float = duration(0.0, minimum=0.0)
    margin: float = number(1.0, 1.0, 100.0)
    budget: float = number(5.0, 0.0, 1e9)
    rank_by: str = choice("cost", ("cost", "time"))
    top: int = integer(8, 1, 64)
    ranks: int = integer(4, 2, 8, 8)
    gpu_memory: int = size(0)
    steps: int = integer(3, 1, 5)

    def check(self, mode: Mode) -> None:
        if self.ranks & (self.ranks - 1):
            raise _refused("ranks", "ranks_power_of_two", ranks=self.ranks)
        if self.gpus % min(self.gpus_per_node, self.gpus):
            raise _refused("gpus", "whole_nodes", gpus=self.gpus, per_node=self.gpus_per_node)
        if self.global_batch and self.global_batch < self.microbatch_size:
            raise _refused(
                "global_batch",
                "global_batch_small",
                batch=self.global_batch,
                micro=self.microbatch_size,
            )

    # -- what the params mean -------------------------------------------------------------
    @property
    def demo_shape(self) -> GPTShape:
        return GPTShape(**DEMO_SHAPE)

    @property
    def psi(self) -> int:
        """Ψ: as given, or the demonstration's MiniGPT (`auto`)."""
        return self.demo_shape.parameters if self.params == "auto" else int(self.params)

    @property
    def shape(self) -> GPTShape:
        """The planned model's shape: the MiniGPT's for `auto`, else a published or
        derived one (footprint.shape_for) at `seq` tokens (auto: 2048)."""
        if self.params == "auto":
            base = self.demo_shape
            return base if not self.seq else replace(base, seq=self.seq)
        return shape_for(self.psi, self.seq or 2048)

    @property
    def deadline_s(self) -> float:
        """The deadline in seconds; without one (0), time never presses."""
        return self.deadline or math.inf

    @property
    def total_tokens(self) -> float:
        """Training tokens: as given, or Chinchilla's 20 per parameter."""
        return 20.0 * self.psi if self.tokens == "auto" else float(self.tokens)

    @property
    def batch(self) -> int:
        """Sequences per optimizer step: as given, or 512 (the MiniGPT: one per GPU)."""
        if self.global_batch:
            return self.global_batch
        if self.params == "auto":
            return max(self.microbatch_size * self.gpus, 1)
        return max(512, self.microbatch_size)


@dataclass(frozen=True, kw_only=True)
class WhyResult(RankResult):
    """What each rank reports of the demonstration, per series: the peak bytes by
    category and the largest total it held, whether it refused (and the line saying
    why), how far its parameters are from one process training the same batches."""

    peaks: dict[str, dict[str, int]]
    peak_total: dict[str, int]
    refused: dict[str, dict[str, str]]  # series -> language -> the line saying why
    param_diff: dict[str, float]
    cpu_cores: int = 0  # the cores this rank may run on: 4 ranks on 2 cores cannot speed up
