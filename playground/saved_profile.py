"""The cost model of a saved run, as its schema declares it: what `replay` accepts.

Part of playground.saved_schema (a run's --json `profile`): runtime.sim.costmodel's
CostModel, its compute rates (runtime.sim.compute.ComputeRates) and its corrections
(runtime.sim.corrections.Corrections), every field bounded. A file of the older format,
whose corrections were special keys of `compute`, is still read:
CostModel.from_dict converts them.

Imports: msgspec and playground.saved_types; never torch.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from playground.saved_types import Fraction, Name, Rank, Rate, Seconds, Text


class RatesDoc(Struct, frozen=True):
    """runtime.sim.compute.ComputeRates, bounded."""

    forward_flops_per_s: Rate
    backward_flops_per_s: Rate
    forward_overhead_s: Annotated[float, Meta(ge=0, le=1e3)]
    backward_overhead_s: Annotated[float, Meta(ge=0, le=1e3)]
    adam_s_per_element: Annotated[float, Meta(gt=0, le=1)]
    disk_bytes_per_s: Rate = 5e8
    checkpoint_s: Annotated[float, Meta(ge=0, le=1e3)] = 5e-3
    adam_s_per_tensor: Annotated[float, Meta(ge=0, le=1e3)] = 0.0
    sharded_forward_s: Annotated[float, Meta(ge=0, le=1e3)] = 3e-4
    sharded_backward_s: Annotated[float, Meta(ge=0, le=1e3)] = 3e-4
    sharded_adam_s: Annotated[float, Meta(ge=0, le=1e3)] = 1.5e-4
    sharded_first_adam_s: Annotated[float, Meta(ge=0, le=1e3)] = 5e-3
    parallel_forward_s: Annotated[float, Meta(ge=0, le=1e3)] = 3e-4
    parallel_backward_s: Annotated[float, Meta(ge=0, le=1e3)] = 3e-4
    forward_s_per_element: Annotated[float, Meta(ge=0, le=1)] = 0.0
    backward_s_per_element: Annotated[float, Meta(ge=0, le=1)] = 0.0
    op_s: Annotated[float, Meta(ge=0, le=1e3)] = 0.0
    # Bi and W of a split backward over the full one (a CPU's Bi is nearly B).
    split_input_fraction: Annotated[float, Meta(ge=0, le=10)] = 0.5
    split_weight_fraction: Annotated[float, Meta(ge=0, le=10)] = 0.5
    # fp16's and bf16's block over fp32's (a CPU's are several times slower).
    fp16_slowdown: Annotated[float, Meta(gt=0, le=1e3)] | None = None
    bf16_slowdown: Annotated[float, Meta(gt=0, le=1e3)] | None = None
    peak_flops_per_s: Rate | None = None
    achieved_fraction: Fraction | None = None
    memory_bytes: Annotated[float, Meta(ge=0, le=1e18)] | None = None
    source: Text = ""


class CorrectionsDoc(Struct, frozen=True):
    """runtime.sim.corrections.Corrections, bounded: exit lags as [series, rank, seconds]."""

    send_issue: Seconds | None = None
    wake: Seconds = 0.0
    dispatch: Seconds = 0.0
    series_dispatch: Annotated[dict[Name, Seconds], Meta(max_length=1024)] = {}
    exit_lags: Annotated[list[tuple[Name | None, Rank, Seconds]], Meta(max_length=100_000)] = []


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
