"""Lesson 4's metrics: correctness against one process, collectives counted, memory, time.

Part of the lesson contract (scenarios.metrics): `metrics(params, predicted,
run)` returns typed Metrics, the same list for the panel, the CLI, the JSON and
the HTML. Per implementation (`series` "hand", "torch"):

- `max_loss_diff_vs_reference`, `max_grad_diff_vs_reference`: the largest
  difference from the one-process MiniGPT over ranks (every gradient slice), and
  `worst_grad_parameter`, the parameter where it is;
- `step_measured_s` (beside its prediction), `step_predicted_s`, `prediction_error`.

The hand-written series' collectives, measured beside what its Program says:
`collectives_per_layer.<direction>.<kind>` (2 all-reduces each way; SP: 2
all-gathers + 2 reduce-scatters), `loss_collectives.*` (3 all-reduces forward,
none backward), `collective_bytes` (b·s·h·4); torch's, as CommDebugMode counted
them: `torch_tp_collectives.<direction>.<kind>`; the whole step's, for both, as
`step_collectives.<direction>.<kind>`. Activation bytes per layer:
Korthikanti's six configurations in 16-bit (`series` none, tp, tp_sp, …) and,
after a run, the fp32 bytes measured (`fp32:none`, …) beside what this block
keeps by the same accounting (scenarios.tensor_parallel.memory). Per layer on
the hardware simulated: the TP communication and compute time, and their ratio
(≤ 1: the communication could hide under the compute).

Imports: runtime's pure part and the lesson contract.
"""

from __future__ import annotations

from typing import Any

from runtime.sim.program import COLLECTIVE_KINDS
from runtime.sim.trace import Span, Timeline, makespan
from scenarios.base import RunData
from scenarios.metrics import Metric, relative_error
from scenarios.tensor_parallel import memory
from scenarios.tensor_parallel.params import TPParams, TPResult
from scenarios.tensor_parallel.program import BACKWARD, hand_plan, plan_counts

# Within this the implementation equals one process (fp32 sums in another order).
TOLERANCE = 1e-5


def metrics(params: TPParams, predicted: Timeline, run: RunData[TPResult] | None) -> list[Metric]:
    shape = params.model
    out = [Metric("parameters", "count", shape.parameters)]
    for name in params.implementation:
        out += series_metrics(name, predicted, run)
    if "hand" in params.implementation:
        out += hand_collectives(params, run)
        out += hardware(predicted.of_series("hand"), shape.layers)
    if run is not None:
        # The whole step's collectives, by direction and kind, under one name for both
        # series (side by side); torch's also under the name the lesson gives them.
        for name in params.implementation:
            counts = sorted(run.results[0].series[name].counts.items())
            out += [Metric(f"step_collectives.{k}", "count", n, series=name) for k, n in counts]
            if name == "torch":
                out += [
                    Metric(f"torch_tp_collectives.{k}", "count", n, series=name) for k, n in counts
                ]
    return out + activations(params, run)


def series_metrics(name: str, predicted: Timeline, run: RunData[TPResult] | None) -> list[Metric]:
    step_predicted = makespan(predicted.of_series(name))
    if run is None:
        return [
            Metric("step_measured_s", "s", None, step_predicted, series=name),
            Metric("step_predicted_s", "s", step_predicted, series=name),
        ]
    mine = [r.series[name] for r in run.results]
    worst = max(mine, key=lambda m: m.grad_diff)
    departs = worst.worst_parameter
    step = makespan(run.measured.of_series(name))
    return [
        Metric("max_loss_diff_vs_reference", "diff", max(m.loss_diff for m in mine), series=name),
        Metric("max_grad_diff_vs_reference", "diff", worst.grad_diff, series=name),
        # Where it departs most: a mistake names its layer (blocks.0.*: missing-f) or the
        # tied weight (untied-embedding).
        Metric(
            "worst_grad_parameter",
            "text",
            departs if worst.grad_diff > TOLERANCE else None,
            series=name,
        ),
        Metric("loss", "number", mine[0].loss, series=name),
        Metric("step_measured_s", "s", step, step_predicted, series=name),
        Metric("step_predicted_s", "s", step_predicted, series=name),
        Metric("prediction_error", "fraction", relative_error(step, step_predicted), series=name),
    ]


def hand_collectives(params: TPParams, run: RunData[TPResult] | None) -> list[Metric]:
    """Per layer and for the loss, by direction and kind: measured beside the Program."""
    layers = params.model.layers
    sp = params.sequence_parallel
    expected = plan_counts(hand_plan(layers, sp, params.mistake), layers)
    # A mistake that drops collectives still shows the kinds Megatron has (its count 0).
    megatron = plan_counts(hand_plan(layers, sp), layers)
    mine = run.results[0].series["hand"] if run is not None else None
    out = []
    for scope, name, measured in (
        ("layer", "collectives_per_layer", mine.layer_counts if mine else None),
        ("loss", "loss_collectives", mine.loss_counts if mine else None),
    ):
        keys = {k.split(".", 1)[1] for k in (*expected, *megatron) if k.startswith(scope + ".")}
        keys |= set(measured or {})
        for key in sorted(keys):
            value = (measured or {}).get(key, 0) if mine else None
            out.append(
                Metric(
                    f"{name}.{key}",
                    "count",
                    value,
                    expected.get(f"{scope}.{key}", 0),
                    series="hand",
                )
            )
    if mine is not None:
        backward = sum(n for k, n in mine.loss_counts.items() if k.startswith(BACKWARD))
        out.append(Metric("loss_collectives.backward", "count", backward, 0, series="hand"))
    sizes = sorted(
        {b for r in (run.results if run else []) for b in r.series["hand"].collective_bytes}
    )
    measured_bytes: Any = (sizes[0] if len(sizes) == 1 else sizes) if sizes else None
    out.append(
        Metric("collective_bytes", "bytes", measured_bytes, params.sizes.activation, series="hand")
    )
    return out


def hardware(spans: list[Span], layers: int) -> list[Metric]:
    """Per layer, on the hardware simulated: TP communication vs compute (forward and
    backward, one rank), and their ratio: at most 1, the communication can hide."""
    rank0 = [s for s in spans if s.rank == 0 and s.chunk is not None]
    comm = sum(s.duration for s in rank0 if s.kind in COLLECTIVE_KINDS) / layers
    compute = sum(s.duration for s in rank0 if s.kind not in COLLECTIVE_KINDS) / layers
    return [
        Metric("tp_comm_per_layer_s", "s", None, comm, series="hand"),
        Metric("tp_compute_per_layer_s", "s", None, compute, series="hand"),
        Metric(
            "tp_comm_to_compute", "ratio", None, comm / compute if compute else None, series="hand"
        ),
    ]


def activations(params: TPParams, run: RunData[TPResult] | None) -> list[Metric]:
    shape = params.model
    s, b, h, a, t = shape.seq, params.microbatch_size, shape.hidden, shape.heads, params.tp
    out = [
        Metric(
            "activation_bytes_per_layer", "bytes", None, value, series=key, category="activations"
        )
        for key, value in memory.korthikanti(s, b, h, a, t).items()
    ]
    if run is None or not run.results[0].activation_bytes:
        return out
    expected = memory.this_run(s, b, h, a, t)
    measured = run.results[0].activation_bytes
    return out + [
        Metric(
            "activation_bytes_per_layer",
            "bytes",
            measured.get(key),
            expected[key],
            series=memory.FP32_SERIES[key],
            category="activations",
        )
        for key in memory.MEASURED
    ]
