"""Lesson 6: mixed precision and DDP bucketing — loss scaling you can watch, communication
hidden under backward.

The `mixed-precision` lesson, top to bottom: its params (.params), its narrative
(every text a learner reads is in texts.toml), its Program (.plan), its compute
estimate; the metrics are in scenarios.mixed_precision.report, the prediction at
scale in .sweep. The same data-parallel MiniGPT (runtime.engine.models) trains `steps` Adam
steps once per series, one series after the other on the same ranks, from the
same weights on the same batches:

- a precision: fp32; fp16 with fp32 master weights and dynamic loss scaling;
  bf16 with fp32 master weights (no scaling: bf16 has fp32's range). The low
  precision runs keep the model's weights and gradients in fp16/bf16 and compute
  under torch's CPU autocast, which runs softmax, LayerNorm and the loss in fp32;
- an implementation: `hand` (scenarios.mixed_precision.ddp's bucketed DDP and
  .scaler's loss scaler, with torch's GradScaler beside it on the same
  gradients) or `torch` (torch's DDP with the same `bucket_cap`, its buckets
  read through a comm hook, and GradScaler("cpu") driving the steps).

A step, per rank: the forward (F), the backward part by part (B: the head, each
block from the last, the embedding), each bucket's all-reduce launched as soon as
its gradients (and every earlier bucket's) are ready, asynchronously, so it runs
under the rest of backward; a wait for the last of them; then the fp16/bf16
gradients go to fp32 (unscaled, checked for inf/NaN: a skipped step) and Adam
updates the fp32 master weights. The buckets come from scenarios
.mixed_precision.buckets (torch's rule, checked against torch); iteration 0 is
one bucket and later ones use the rebuilt buckets, as torch 2.13 does.

Imports: runtime's pure part and the lesson contract (the UI imports this).
"""

from __future__ import annotations

from dataclasses import replace

from runtime.engine.faults import Fault
from runtime.fit.after_run import Refinement
from runtime.sim.compute import TYPICAL_CPU, ComputeRates
from runtime.sim.costmodel import CostModel
from scenarios.base import OPTIMIZER_MODULES, Hooks, Lesson
from scenarios.mixed_precision import report, sweep, timing
from scenarios.mixed_precision.params import MixedParams
from scenarios.mixed_precision.plan import build, variants
from scenarios.mixed_precision.rates import PROBES, MixedRates
from scenarios.mixed_precision.results import MixedResult
from scenarios.params import ParamError
from scenarios.texts import load_texts

# Compute in fp16/bf16 against fp32, before a run has timed it. On a CPU, what
# `calibrate` measured (the lesson's MixedRates: its probe), else this guess (autocast's
# casts dominate the MiniGPT's small matmuls); on a GPU profile, whose rates are BF16
# tensor-core figures, fp32 runs as TF32 at half of them (A100 156 vs 312, H100 495 vs
# 989 TFLOP/s dense). A run replaces all of them.
CPU_LOW_PRECISION = 2.5
GPU_FP32 = 2.0


# -- parameters: MixedParams (scenarios/mixed_precision/params.py) -------------------------

# -- narrative: the steps, title, summary and params' help, in Spanish and English ------
TEXTS = load_texts(__package__)  # scenarios/mixed_precision/texts.toml


# -- program: scenarios/mixed_precision/plan.py (each series' steps as Actions) ------


def estimate(params: MixedParams, model: CostModel) -> CostModel:
    """Compute costs before a run has timed them, from the compute rates (runtime.sim.compute:
    calibrated here, or a datasheet's): the MiniGPT's parts (scenarios.shape), at the
    precision's speed; Adam per parameter, unscaling a third of that."""
    rates = model.rates or TYPICAL_CPU
    parts = params.model.costs(rates, params.microbatch * params.model.seq)
    gpu = rates.peak_flops_per_s is not None
    layers, psi = params.model.layers, params.psi
    adam = rates.adam_seconds(psi, params.model.parameter_tensors)  # over the model's tensors
    estimated: dict[str, float] = {}
    for v in variants(params):
        slower = (GPU_FP32 if v.precision == "fp32" else 1.0) if gpu else (
            1.0 if v.precision == "fp32" else cpu_slowdown(rates, v.precision)
        )  # fmt: skip
        s = v.series
        forward = parts.embedding[0] + layers * parts.block[0] + parts.head[0]
        estimated[f"F.{s}"] = forward * slower
        estimated[f"B.{s}.head"] = parts.head[1] * slower
        estimated[f"B.{s}.block"] = parts.block[1] * slower
        estimated[f"B.{s}.emb"] = parts.embedding[1] * slower
        estimated[f"U.{s}"] = adam / 3
        estimated[f"opt.{s}"] = adam * (1 if v.precision == "fp32" else 4 / 3)
    return replace(model, compute={**model.compute, **estimated})


def cpu_slowdown(rates: ComputeRates, precision: str) -> float:
    """fp16's or bf16's compute over fp32's on a CPU: calibrated, else the guess."""
    own = MixedRates.of(rates)  # the lesson's own (scenarios.mixed_precision.rates)
    measured = own.fp16_slowdown if precision == "fp16" else own.bf16_slowdown
    return measured or CPU_LOW_PRECISION


def check_faults(params: MixedParams, faults: list[Fault]) -> None:
    """An overflow needs fp16 (the one precision with a loss scaler) and a step of the run;
    timed kills and hangs and a slow rank work as in every lesson."""
    for fault in faults:
        spec = fault.describe()
        if fault.kind == "overflow":
            if "fp16" not in params.precision:
                raise ParamError(
                    "precision",
                    f"--fault {spec!r}: only fp16 has a loss scaler to skip the step; "
                    "add fp16 to precision",
                    es=f"--fault {spec!r}: solo fp16 tiene un escalador de pérdida que salte "
                    "el paso; añada fp16 a precision",
                )
            if fault.step is not None and not 1 <= fault.step <= params.steps:
                raise ParamError(
                    "steps",
                    f"--fault {spec!r}: step must be in 1..{params.steps} (steps)",
                    es=f"--fault {spec!r}: step debe estar en 1..{params.steps} (steps)",
                )
        elif not fault.timed and fault.kind != "slow":
            raise ParamError(
                None,
                f"--fault {spec!r}: this lesson honours overflow:step=K[,rank=R], slow and "
                "timed kill/hang faults; step and checkpoint kills are failure-resume's",
                es=f"--fault {spec!r}: esta lección admite overflow:step=K[,rank=R], slow y "
                "los fallos kill/hang temporizados; los kill por paso o por punto de control "
                "son de failure-resume",
            )


def tokens(params: MixedParams) -> tuple[str, float]:
    """Each rank trains on `microbatch` sequences of `seq` tokens per step."""
    return ("tokens", float(params.microbatch * params.model.seq))


RANK_ENTRY = "scenarios.mixed_precision.rank:run_rank"  # torch: never imported here
HOOKS = Hooks(
    estimate,
    check_faults=check_faults,
    lump=sweep.lump,
    items=tokens,
    marks=report.marks,
    figures=sweep.figures,
    preload=OPTIMIZER_MODULES,
    headline=("step_s",),
    refinement=Refinement(gaps="measured"),  # each series its own gaps between actions
    # The model refined after a run leaves step 1 out, as step_s does (a warm-up).
    warmup_steps=lambda params: timing.warmup_steps(params.steps),
    probes=PROBES,  # fp16's and bf16's slowdowns (scenarios.mixed_precision.rates)
    faults_of=lambda params: params.faults.specs(),  # the form's (scenarios.fault_knobs)
)
LESSON = Lesson(
    "mixed-precision", 6, TEXTS, MixedParams, MixedResult, build, report.metrics, RANK_ENTRY, HOOKS
)
