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
  t = overhead + flops / rate; Adam per element and per tensor; one eager operator.
  CPU seconds are what one core spends alone: the simulator adds the sharing of
  cores among ranks itself (CostModel.cores), so it must not be counted twice.
- On a GPU profile (runtime.sim.profiles) they come from the datasheet's peak FLOP/s
  times the achieved fraction (MFU) the profile assumes, and a kernel-launch
  overhead; each profile names its sources.

These are the generic rates every lesson reads. A lesson that needs more (FSDP2's
overheads, a checkpoint's cost) declares its own record of them (`LessonRates`, in
scenarios/<lesson>/rates.py) with the probes that calibrate them; they are kept here,
under the lesson's name (`ComputeRates.lessons`), and runtime never looks inside.

Pure: stdlib only. Fitting these rates to timed samples is runtime.fit.compute_fit's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, Self

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
    # ... and per parameter tensor: torch's Adam on a CPU loops over its tensors, a dozen
    # operators each; a MiniGPT's 29 small tensors cost it more than their elements.
    adam_s_per_tensor: float = 0.0
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
    peak_flops_per_s: float | None = None  # a datasheet's figure, when there is one
    achieved_fraction: float | None = None  # MFU assumed against that peak
    memory_bytes: float | None = None  # one device's memory (a datasheet's)
    source: str = ""
    # Each lesson's own rates as its calibration probes fitted them (a LessonRates as
    # a dict), by lesson name; a lesson without an entry reads its defaults.
    lessons: dict[str, dict[str, float | None]] = field(default_factory=dict)
    # A profile saved before lessons kept their own rates held them flat among the
    # fields above (`sharded_forward_s`, `checkpoint_s`, ...): kept as read, each
    # lesson's record claims its own by field name (LessonRates.of).
    unclaimed: dict[str, float] = field(default_factory=dict)

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

    def op_seconds(self) -> float:
        """One eager operator's cost: measured, or a block forward's overhead over the
        BLOCK_FORWARD_OPS operators it dispatches."""
        return self.op_s or self.forward_overhead_s / BLOCK_FORWARD_OPS

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.unclaimed:  # only a profile of the older format has any
            del out["unclaimed"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ComputeRates:
        """Rates from to_dict's form, or from the older one, whose lessons' rates were
        fields of this record: those are kept `unclaimed` for the lessons to claim."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        older = {
            k: float(v)
            for k, v in data.items()
            if k not in cls.__dataclass_fields__ and isinstance(v, int | float)
        }
        lessons = {
            str(name): {str(k): v for k, v in rates.items()}
            for name, rates in _mapping(known.get("lessons")).items()
            if isinstance(rates, Mapping)
        }
        unclaimed = {**older, **_mapping(known.get("unclaimed"))}
        return cls(**{**known, "lessons": lessons, "unclaimed": unclaimed})

    def with_lesson(self, rates: LessonRates) -> ComputeRates:
        """These rates with one lesson's own set (a calibration's fit, a test's figures)."""
        return replace(self, lessons={**self.lessons, rates.lesson: rates.to_dict()})


def _mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a mapping (a saved file's field), else nothing."""
    return value if isinstance(value, Mapping) else {}


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
    element (reads parameter, gradient and two moments, writes three) through HBM; one
    eager operator costs a launch. A lesson's own rates on a datasheet follow from
    these (LessonRates.on_datasheet)."""
    rate = peak_flops_per_s * achieved_fraction
    return ComputeRates(
        forward_flops_per_s=rate,
        backward_flops_per_s=rate,
        forward_overhead_s=12 * launch_s,
        backward_overhead_s=24 * launch_s,
        adam_s_per_element=28 / memory_bytes_per_s,
        adam_s_per_tensor=launch_s,  # one multi-tensor (foreach) kernel per few tensors
        op_s=launch_s,
        peak_flops_per_s=peak_flops_per_s,
        achieved_fraction=achieved_fraction,
        memory_bytes=memory_bytes,
        source=source,
    )


@dataclass(frozen=True)
class LessonRates:
    """Base of a lesson's own rates: a frozen dataclass of floats with defaults, named
    by `lesson`, declared in scenarios/<lesson>/rates.py beside the probes that
    calibrate them (runtime.fit.calibration_probes). `of` reads them off a profile's
    ComputeRates: as calibrated, as a profile of the older format held them, from a
    datasheet's generic rates, or the defaults."""

    lesson: ClassVar[str] = ""

    @classmethod
    def of(cls, rates: ComputeRates | None) -> Self:
        """This lesson's rates in `rates` (None: an uncalibrated CPU's, the defaults)."""
        if rates is None:
            return cls()
        names = {f.name for f in fields(cls)}
        saved = rates.lessons.get(cls.lesson)
        if saved is None:  # a profile of the older format: the fields it had of ours
            saved = {k: v for k, v in rates.unclaimed.items() if k in names}
        # A saved figure that is not a finite number >= 0 is not one: the default stands.
        given = {
            k: float(v)
            for k, v in (saved or {}).items()
            if k in names and isinstance(v, int | float) and math.isfinite(v) and v >= 0
        }
        if given:
            return cls(**given)  # type: ignore[arg-type]
        if rates.peak_flops_per_s is not None:
            return cls.on_datasheet(rates)
        return cls()

    @classmethod
    def on_datasheet(cls, rates: ComputeRates) -> Self:
        """This lesson's rates on a datasheet GPU profile, never calibrated: the defaults,
        unless the lesson says how they follow from the generic ones (a launch: op_s)."""
        return cls()

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)
