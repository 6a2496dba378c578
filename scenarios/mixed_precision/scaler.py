"""The dynamic loss scaler, hand-written: the rule torch.amp.GradScaler follows, in a few lines.

Lesson 6's first mechanism (Micikevicius et al. 2018, "Mixed Precision
Training", §3.2; torch 2.13 `torch/amp/grad_scaler.py` and its
`_amp_update_scale_` kernel). Pure: it decides, from whether this step's
gradients held an inf or a NaN, whether the optimizer step is skipped and what
the scale becomes; the rank code (scenarios.mixed_precision.trainer) finds the
infs, multiplies the loss and unscales the gradients.

- The loss is multiplied by `scale` before backward, so small gradients land in
  fp16's range; the gradients are divided by it (times 1/scale, in fp32) before
  the optimizer step.
- An inf or NaN anywhere: skip the step, scale × `backoff_factor` (0.5), and
  count the clean steps from zero again.
- `growth_interval` clean steps in a row: scale × `growth_factor` (2), counted
  again from zero. torch keeps the scale as an fp32 tensor and grows it only when
  the grown value is finite, so this one rounds to fp32 the same way (a scale
  backed off 150 times is 0 in fp32, and stays 0).

Defaults are torch's: init 2^16, growth 2, backoff 0.5, growth interval 2000.

Pure: stdlib only.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

INIT_SCALE = 2.0**16
GROWTH_INTERVAL = 2000


def fp32(value: float) -> float:
    """`value` rounded to the nearest fp32 (inf past fp32's range), as torch keeps a scale."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


@dataclass
class DynamicLossScaler:
    scale: float = INIT_SCALE
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = GROWTH_INTERVAL
    clean_steps: int = 0
    trace: list[float] = field(default_factory=list)  # the scale after each update
    skipped: list[int] = field(default_factory=list)  # 1-based steps skipped

    def __post_init__(self) -> None:
        self.scale = fp32(self.scale)

    @property
    def inverse(self) -> float:
        """What the gradients are multiplied by to unscale them (torch: the fp32 of the
        double reciprocal of the fp32 scale)."""
        return fp32(1.0 / self.scale) if self.scale else math.inf

    def update(self, found_inf: bool) -> bool:
        """After this step's gradients were checked: True when the step must be skipped."""
        if found_inf:
            self.scale = fp32(self.scale * self.backoff_factor)
            self.clean_steps = 0
            self.skipped.append(len(self.trace) + 1)
        else:
            self.clean_steps += 1
            if self.clean_steps == self.growth_interval:
                grown = fp32(self.scale * self.growth_factor)
                if math.isfinite(grown):
                    self.scale = grown
                self.clean_steps = 0
        self.trace.append(self.scale)
        return found_inf
