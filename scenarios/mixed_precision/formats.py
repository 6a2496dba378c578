"""Number formats: what fp16 and bf16 can hold, and what a value becomes in each.

Lesson 6's number-format explorer (docs/references.md "Mixed precision"; the
figures are torch.finfo's, which the tests check): a learner types a value in
the app (`-p value=1e-5`) and the metrics say what fp16 and bf16 store for it,
and whether it is normal, subnormal (fewer significant bits: lost precision),
flushed to zero (underflow) or inf (overflow). The same classification counts
the gradients that underflow without loss scaling (rank side: trainer.py).

- fp16: 1 sign, 5 exponent, 10 mantissa bits; max 65504, smallest normal 2^-14,
  smallest subnormal 2^-24, eps 2^-10.
- bf16: fp32's 8 exponent bits and 7 mantissa bits; max ≈ 3.39e38, smallest
  normal 2^-126 (as fp32), eps 2^-7: fp32's range, a hundredth of its precision.

Rounding is to nearest, ties to even, as torch's casts: fp16 through the
standard library's half-precision packing, bf16 by rounding an fp32's bits.

Pure: stdlib only.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class Format:
    name: str
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float
    bytes: int


FP16 = Format("fp16", 65504.0, 2.0**-14, 2.0**-24, 2.0**-10, 2)
BF16 = Format("bf16", (2 - 2.0**-7) * 2.0**127, 2.0**-126, 2.0**-133, 2.0**-7, 2)
FP32 = Format("fp32", (2 - 2.0**-23) * 2.0**127, 2.0**-126, 2.0**-149, 2.0**-23, 4)
FORMATS = {f.name: f for f in (FP16, BF16, FP32)}


def _to_fp32(value: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def to_fp16(value: float) -> float:
    try:
        return struct.unpack("<e", struct.pack("<e", float(value)))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def to_bf16(value: float) -> float:
    """The bf16 nearest to `value` (through fp32, as torch casts a double)."""
    single = _to_fp32(value)
    if not math.isfinite(single):
        return single
    bits = struct.unpack("<I", struct.pack("<f", single))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # round half to even
    return struct.unpack("<f", struct.pack("<I", bits))[0]


ROUND = {"fp16": to_fp16, "bf16": to_bf16, "fp32": _to_fp32}


def stored(value: float, fmt: str) -> float:
    return ROUND[fmt](value)


def classify(value: float, fmt: str) -> str:
    """What `fmt` makes of `value`: exact, normal, subnormal, underflow or overflow."""
    spec, got = FORMATS[fmt], stored(value, fmt)
    if math.isinf(got) and math.isfinite(value):
        return "overflow"
    if got == 0.0 and value != 0.0:
        return "underflow"
    if got != 0.0 and abs(got) < spec.smallest_normal:
        return "subnormal"
    return "exact" if got == value else "normal"
