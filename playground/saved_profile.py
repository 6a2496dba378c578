"""The cost model of a saved run, as its schema declares it: what `replay` accepts.

Part of playground.saved_schema (a run's --json `profile`): runtime.sim.costmodel's
CostModel, its compute rates (runtime.sim.compute.ComputeRates, with each lesson's own
rates keyed by lesson name) and its corrections (runtime.sim.corrections.Corrections),
every field bounded. Files of the older formats are still read: corrections that were
special keys of `compute` (CostModel.from_dict converts them), and lessons' rates that
were fields of the rates record (`sharded_forward_s`, `checkpoint_s`, ...: kept as
ComputeRates.unclaimed, each lesson's record claims its own, LessonRates.of). Of its
details, the calibration's conditions (runtime.fit.conditions: the spread behind the
before-run interval, the boot and load it ran at) and whether the run found it stale;
a file without them reads as before (interval unknown).

Imports: msgspec and playground.saved_types; never torch.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

from playground.saved_types import Fraction, Name, Rank, Rate, Seconds, Text

# A lesson's own rate (seconds, a rate, a fraction, a slowdown), bounded; None: its default.
LessonRate = Annotated[float, Meta(ge=0, le=1e30)] | None
# Each lesson's rates by lesson name, then by field name (scenarios/<lesson>/rates.py).
LessonsRates = Annotated[
    dict[Name, Annotated[dict[Name, LessonRate], Meta(max_length=64)]], Meta(max_length=64)
]


class RatesDoc(Struct, frozen=True):
    """runtime.sim.compute.ComputeRates, bounded."""

    forward_flops_per_s: Rate
    backward_flops_per_s: Rate
    forward_overhead_s: Annotated[float, Meta(ge=0, le=1e3)]
    backward_overhead_s: Annotated[float, Meta(ge=0, le=1e3)]
    adam_s_per_element: Annotated[float, Meta(gt=0, le=1)]
    adam_s_per_tensor: Annotated[float, Meta(ge=0, le=1e3)] = 0.0
    forward_s_per_element: Annotated[float, Meta(ge=0, le=1)] = 0.0
    backward_s_per_element: Annotated[float, Meta(ge=0, le=1)] = 0.0
    op_s: Annotated[float, Meta(ge=0, le=1e3)] = 0.0
    peak_flops_per_s: Rate | None = None
    achieved_fraction: Fraction | None = None
    memory_bytes: Annotated[float, Meta(ge=0, le=1e18)] | None = None
    source: Text = ""
    lessons: LessonsRates = {}
    unclaimed: Annotated[
        dict[Name, Annotated[float, Meta(ge=0, le=1e30)]], Meta(max_length=64)
    ] = {}
    # The older format: lessons' rates as fields of this record, bounded as they were
    # (None: absent; read back into `unclaimed` by ComputeRates.from_dict).
    disk_bytes_per_s: Rate | None = None
    checkpoint_s: Annotated[float, Meta(ge=0, le=1e3)] | None = None
    sharded_forward_s: Annotated[float, Meta(ge=0, le=1e3)] | None = None
    sharded_backward_s: Annotated[float, Meta(ge=0, le=1e3)] | None = None
    sharded_adam_s: Annotated[float, Meta(ge=0, le=1e3)] | None = None
    sharded_first_adam_s: Annotated[float, Meta(ge=0, le=1e3)] | None = None
    parallel_forward_s: Annotated[float, Meta(ge=0, le=1e3)] | None = None
    parallel_backward_s: Annotated[float, Meta(ge=0, le=1e3)] | None = None
    split_input_fraction: Annotated[float, Meta(ge=0, le=10)] | None = None
    split_weight_fraction: Annotated[float, Meta(ge=0, le=10)] | None = None
    fp16_slowdown: Annotated[float, Meta(gt=0, le=1e3)] | None = None
    bf16_slowdown: Annotated[float, Meta(gt=0, le=1e3)] | None = None


class CorrectionsDoc(Struct, frozen=True):
    """runtime.sim.corrections.Corrections, bounded: exit lags as [series, rank, seconds]."""

    send_issue: Seconds | None = None
    wake: Seconds = 0.0
    dispatch: Seconds = 0.0
    series_dispatch: Annotated[dict[Name, Seconds], Meta(max_length=1024)] = {}
    exit_lags: Annotated[list[tuple[Name | None, Rank, Seconds]], Meta(max_length=100_000)] = []


# A factor of the calibration's spread on its median (runtime.fit.conditions.Spread).
Factor = Annotated[float, Meta(ge=1e-3, le=1e3)]
Epoch = Annotated[float, Meta(ge=0, le=1e12)]
Load = Annotated[float, Meta(ge=0, le=1e6)]
Range = tuple[Annotated[float, Meta(ge=0, le=1e6)], Annotated[float, Meta(ge=0, le=1e6)]]


class SpreadDoc(Struct, frozen=True):
    """runtime.fit.conditions.Spread: (fast, slow) factors of compute and of the links."""

    compute: tuple[Factor, Factor]
    communication: tuple[Factor, Factor]


class ConditionsDoc(Struct, frozen=True):
    """runtime.fit.conditions.Conditions, bounded: when and how the calibration ran."""

    schema: Annotated[int, Meta(ge=1, le=1 << 20)]
    calibrated_at: Epoch
    booted_at: Epoch | None = None
    load1: Load | None = None
    spread: SpreadDoc | None = None
    figures: Annotated[dict[Name, Range], Meta(max_length=16)] = {}


class StalenessDoc(Struct, frozen=True):
    """runtime.fit.conditions.Staleness as the run judged its calibration when it started."""

    verdict: Literal["fresh", "rebooted", "load", "unknown"]
    stale: bool = False
    load_then: Load | None = None
    load_now: Load | None = None
    load_threshold: Annotated[
        dict[Name, Annotated[float, Meta(ge=0, le=1e6)]], Meta(max_length=4)
    ] = {}


class DetailsDoc(Struct, frozen=True, omit_defaults=True):
    """What a saved profile's details keep of its calibration (CostModel.details): the
    conditions it ran in and the run's verdict on them; its other keys are not read.
    What it lacks it leaves out (a replay of a replay reads the same details back)."""

    conditions: ConditionsDoc | None = None
    staleness: StalenessDoc | None = None


class ProfileDoc(Struct, frozen=True):
    name: Text
    alpha: Annotated[float, Meta(ge=0, le=1e6)]
    beta: Annotated[float, Meta(ge=0, le=1e6)]
    gamma: Annotated[float, Meta(ge=0, le=1e6)]
    compute: Annotated[
        dict[Text, Annotated[float, Meta(ge=0, le=1e12)]], Meta(max_length=100_000)
    ] = {}
    ranks_per_node: Annotated[int, Meta(ge=1, le=1 << 20)] | None = None
    inter_alpha: Annotated[float, Meta(ge=0, le=1e6)] | None = None
    inter_beta: Annotated[float, Meta(ge=0, le=1e6)] | None = None
    cores: Annotated[int, Meta(ge=1, le=1 << 20)] | None = None
    slow: Annotated[
        list[tuple[Rank, Annotated[float, Meta(ge=1, le=100)]]], Meta(max_length=64)
    ] = []
    flops_per_s: Annotated[float, Meta(ge=0, le=1e30)] | None = None
    rates: RatesDoc | None = None
    # Keyed by runtime.sim.corrections.ScaleKey's text (checked as the model is built).
    collective_scale: Annotated[
        dict[Text, Annotated[float, Meta(ge=0, le=1e6)]], Meta(max_length=100_000)
    ] = {}
    # Absent in a file of the older format, whose corrections were keys of `compute`.
    corrections: CorrectionsDoc | None = None
    source: Text = ""
    # Absent in a file written before the calibration recorded its conditions.
    details: DetailsDoc = DetailsDoc()
