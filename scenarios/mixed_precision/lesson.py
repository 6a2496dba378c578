"""Lesson 6: mixed precision and DDP bucketing — loss scaling you can watch, communication
hidden under backward.

The `mixed-precision` lesson, top to bottom: its params, its narrative (every
text a learner reads is in texts.toml), its Program, its compute estimate; the
metrics are in scenarios.mixed_precision.report, the prediction at scale in
.sweep. The same data-parallel MiniGPT (runtime.engine.models) trains `steps` Adam
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

import math
from dataclasses import dataclass, field, replace

from runtime.engine.faults import Fault
from runtime.sim.compute import TYPICAL_CPU, ComputeRates
from runtime.sim.costmodel import CostModel
from scenarios.base import OPTIMIZER_MODULES, Hooks, Lesson
from scenarios.mixed_precision import report, sweep, timing
from scenarios.mixed_precision.plan import IMPLEMENTATIONS, PRECISIONS, build, variants
from scenarios.mixed_precision.results import MixedResult
from scenarios.params import KNOB, Knob, Mode, ParamError, Params, choice, choices, integer, size
from scenarios.shape import GPTShape
from scenarios.texts import load_texts

KiB = 1024
MAX_RUN_PARAMETERS = 2_000_000
# Compute in fp16/bf16 against fp32, before a run has timed it. On a CPU, what
# `calibrate` measured (ComputeRates' fp16/bf16 slowdowns), else this guess from the
# machine this was built on (autocast's casts dominate the MiniGPT's small matmuls; a
# later machine measured 5.7 for fp16); on a GPU profile, whose rates are BF16
# tensor-core figures, fp32 runs as TF32 at half of them (A100 156 vs 312, H100 495 vs
# 989 TFLOP/s dense). A run replaces all of them.
CPU_LOW_PRECISION = 2.5
GPU_FP32 = 2.0
# The most layers `predict` takes here (the shape's knob allows 4096 elsewhere). A step of
# this lesson is every backward part and every bucket's all-reduce (12 tensors a layer,
# bucketed by torch's rule at the learner's cap and at the sweep's 24 caps), drawn and
# walked exactly: no closed form stands for the buckets, whose boundaries fall anywhere
# in a block. At 512 layers that takes some 0.45 s (0.7 at 1024, 5 s at 4096, issue 37),
# within the promise that predict answers in under a second (benchmarks/predict_max.py).
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
    model: GPTShape = GPTShape(
        layers=4, hidden=64, heads=4, seq=32, vocab=128, run_limit=MAX_RUN_PARAMETERS
    )
    microbatch: int = integer(8, 1, 64, 1 << 16)
    # The number-format explorer: what fp16 and bf16 store for a value the learner types.
    # 1e-7 by default, a small gradient's size: fp16 keeps it as a subnormal of one
    # significant bit (2 x 2^-24 = 1.192e-07, 19% off) where bf16 keeps 1.001e-07. At
    # 1e-5 both store the same 1.0014e-05: fp16's subnormal step, 2^-24, is bf16's step
    # there (2^-17 x 2^-7), so the formats looked alike at the old default.
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
    measured = rates.fp16_slowdown if precision == "fp16" else rates.bf16_slowdown
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
    "compute costs",
    check_faults=check_faults,
    lump=sweep.lump,
    items=tokens,
    marks=report.marks,
    figures=sweep.figures,
    preload=OPTIMIZER_MODULES,
    headline=("step_s",),
    dispatch_gaps=True,  # each series its own: fp32 left 80-160 us, fp16 ms
    # The model refined after a run leaves step 1 out, as step_s does (on 16 captured
    # runs replayed both ways, the six series' after-run errors 1.6-9.4%, were 1.9-10%).
    warmup_steps=lambda params: timing.warmup_steps(params.steps),
)
LESSON = Lesson(
    "mixed-precision", 6, TEXTS, MixedParams, MixedResult, build, report.metrics, RANK_ENTRY, HOOKS
)
