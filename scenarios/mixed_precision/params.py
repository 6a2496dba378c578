"""Lesson 6's params: the precisions and implementations to compare, the buckets, the model.

The bottom of the package (scenarios.mixed_precision): the Program (.plan), the
metrics (.report), the prediction at scale (.sweep), the rank code (.rank) and the
lesson (.lesson) read these; this module reads nothing of the package. Each rank's
result record is scenarios.mixed_precision.results.

Imports: the lesson contract only (the UI imports this).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scenarios.fault_knobs import Overflow, refused
from scenarios.params import KNOB, Knob, Mode, ParamError, Params, choice, choices, integer, size
from scenarios.shape import GPTShape

KiB = 1024
MAX_RUN_PARAMETERS = 2_000_000
PRECISIONS = ("fp32", "fp16", "bf16")
IMPLEMENTATIONS = ("hand", "torch")
# The most layers `predict` takes here (the shape's knob allows 4096 elsewhere). A step of
# this lesson is every backward part and every bucket's all-reduce (12 tensors a layer,
# bucketed by torch's rule at the learner's cap and at the sweep's 24 caps), drawn and
# walked exactly: no closed form stands for the buckets, whose boundaries fall anywhere
# in a block. The bound keeps the promise that predict answers in under a second
# (benchmarks/predict_max.py measures it).
MAX_PREDICT_LAYERS = 512


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class MixedParams(Params):
    precision: tuple[str, ...] = choices(PRECISIONS, PRECISIONS)
    bucket_cap: int = size(64 * KiB, minimum=KiB)
    first_bucket_cap: int = size(0)
    growth_interval: int = integer(4, 1, 1_000_000)
    steps: int = integer(8, 1, 50, 1_000_000)
    ranks: int = integer(2, 2, 8, 1 << 20)
    implementation: str = choice("both", (*IMPLEMENTATIONS, "both"))
    # An overflow the form can cause (overflow_step 0: none): -> overflow:step=K,rank=R.
    faults: Overflow = Overflow()
    model: GPTShape = GPTShape(
        layers=4, hidden=64, heads=4, seq=32, vocab=128, run_limit=MAX_RUN_PARAMETERS
    )
    microbatch: int = integer(8, 1, 64, 1 << 16)
    # The number-format explorer: what fp16 and bf16 store for a value the learner types.
    # 1e-7 by default, a small gradient's size: fp16 keeps it as a subnormal of one
    # significant bit (2 x 2^-24 = 1.192e-07, 19% off) where bf16 keeps 1.001e-07. Not
    # 1e-5, where both store the same 1.0014e-05 (fp16's subnormal step, 2^-24, is bf16's
    # step there, 2^-17 x 2^-7) and the formats would look alike.
    value: float = field(default=1e-7, metadata={KNOB: Knob("float")})

    def check(self, mode: Mode) -> None:
        layers = self.model.layers
        if mode == "predict" and layers > MAX_PREDICT_LAYERS:
            raise ParamError(
                "layers",
                f"layers={layers}: at most {MAX_PREDICT_LAYERS} in this lesson's predict "
                "(every bucket of every layer is walked, within a second)",
                es=f"layers={layers}: a lo sumo {MAX_PREDICT_LAYERS} en el predict de esta "
                "lección (recorre cada bucket de cada capa, en menos de un segundo)",
            )
        if not math.isfinite(self.value):
            raise ParamError(
                "value",
                f"value={self.value}: a finite number (the format explorer)",
                es=f"value={self.value}: un número finito (el explorador de formatos)",
            )
        self.faults.check_within(self.ranks, self.steps)
        if self.faults.overflow_step and "fp16" not in self.precision:
            raise refused("overflow_step", "overflow_fp16", value=self.faults.overflow_step)
        first = self.first_bucket_cap
        if first and not KiB <= first <= self.bucket_cap:
            raise ParamError(
                "first_bucket_cap",
                f"first_bucket_cap={first}: 0 (no smaller first bucket) or from 1KiB to "
                f"bucket_cap={self.bucket_cap}",
                es=f"first_bucket_cap={first}: 0 (sin un primer bucket más pequeño) o de "
                f"1KiB a bucket_cap={self.bucket_cap}",
            )

    @property
    def implementations(self) -> tuple[str, ...]:
        return IMPLEMENTATIONS if self.implementation == "both" else (self.implementation,)

    @property
    def psi(self) -> int:
        return self.model.parameters
