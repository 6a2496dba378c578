"""Lesson 0: why distribute at all: memory pressure or time pressure, a 3D plan, a budget.

The `why-distribute` lesson, top to bottom: its params and its rank result
(.params), its texts (texts.toml), its Program and its metrics. Two halves:

- `predict`'s arithmetic, for any model on any GPU of scenarios.why_distribute.gpus
  (no torch): the diagnosis (footprint per GPU by category, does it fit, how long
  one GPU takes, so which pressure and what attacks it: scenarios.why_distribute
  .diagnosis), the 3D planner (every DP × TP × PP layout that fits, timed with the
  project's cost model and simulator, ranked by time and by cost: .planner), and
  the course's cost sentence for the recommended plan against the budget (.budget);
- a small real demonstration on ranks (scenarios.why_distribute.demo builds its
  Program, .rank runs it): under a per-rank memory cap (`gpu_memory`, enforced by
  counting live tensors) the MiniGPT's training state does not fit one rank, which
  refuses naming the bytes, but fits `ranks` ranks with the hand-made ZeRO-3 and
  with torch's FSDP2; then DDP, by hand and torch's, on 1, 2, 4… ranks, measured
  beside predicted (time pressure).

Imports: runtime's pure part, the lesson contract and the lesson's modules.
"""

from __future__ import annotations

from runtime.fit.after_run import Refinement
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Program
from runtime.sim.trace import Timeline
from scenarios.base import OPTIMIZER_MODULES, Hooks, Lesson, RunData
from scenarios.metrics import Curve, Metric
from scenarios.texts import load_texts
from scenarios.why_distribute import curves as drawn
from scenarios.why_distribute import demo, report
from scenarios.why_distribute.params import WhyParams, WhyResult
from scenarios.zero.params import FSDP2_MODULES

# -- parameters: WhyParams, and each rank's WhyResult (scenarios/why_distribute/params.py)

# -- narrative: title, summary, params' help and the steps, in Spanish and English ------
TEXTS = load_texts(__package__)  # scenarios/why_distribute/texts.toml


# -- program ------------------------------------------------------------------------------
def build(params: WhyParams) -> Program:
    """The demonstration's Actions (scenarios.why_distribute.demo)."""
    return demo.build(params.ranks, params.steps, params.microbatch_size, params.demo_shape)


def estimate(params: WhyParams, model: CostModel) -> CostModel:
    return demo.estimate(params.ranks, params.microbatch_size, params.demo_shape, model)


# -- metrics ------------------------------------------------------------------------------
def metrics(params: WhyParams, predicted: Timeline, run: RunData[WhyResult] | None) -> list[Metric]:
    return [
        *report.diagnosis_metrics(params),
        *report.plan_metrics(params),
        *demo.metrics(params, predicted, run, demo.cap(params)),
    ]


def curves(params: WhyParams) -> list[Curve]:
    plans = drawn.time_vs_cost(params)
    return [drawn.ddp_scaling(params), *([plans] if plans is not None else [])]


RANK_ENTRY = "scenarios.why_distribute.rank:run_rank"  # torch: never imported here
HOOKS = Hooks(
    estimate,
    curves=curves,
    preload=(*FSDP2_MODULES, *OPTIMIZER_MODULES),
    headline=("step_s",),
    warmup_steps=lambda params: demo.warmup_steps(params.steps),
    # Its hand-made series step as zero's stages do, a chain of their units' collectives.
    refinement=Refinement(collectives="chained", measures="F, B and Adam costs"),
)
LESSON = Lesson("why-distribute", 0, TEXTS, WhyParams, WhyResult, build, metrics, RANK_ENTRY, HOOKS)
