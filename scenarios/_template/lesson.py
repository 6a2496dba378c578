"""The template lesson, top to bottom: its texts, its hooks, and LESSON, which names it all.

The top of the package (scenarios.base's contract; nothing in the package imports
this module): the learner-facing texts come from texts.toml, the params from
params.py, the Program from program.py, the metrics from report.py, and the rank
entry names rank.py, which only rank processes import (torch). Every step, each of
`ranks` ranks multiplies its own data X_r by the shared W (one compute Action), then
the ranks sum the results with torch's all-reduce (one collective Action): data
parallelism in two Actions.

A copy of this package under another name runs once NAME below is changed (and
registered: scenarios.registry); docs/adding-a-lesson.md says the rest.

Imports: runtime's pure part, the contract and this package's pure modules (no torch).
"""

from __future__ import annotations

from dataclasses import replace

from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from scenarios.base import Hooks, Lesson
from scenarios.texts import load_texts

from .params import MATMUL, TemplateParams, TemplateResult
from .program import build
from .report import metrics

NAME = "template"  # what `playground run NAME` types; the registry's key
NUMBER = 8  # its place in the course, were it listed (the eight lessons are 0–7)
TEXTS = load_texts(__package__)  # title, summary, each param's help, narrative: texts.toml
RANK_ENTRY = f"{__package__}.rank:run_rank"  # what each rank runs (torch: never imported here)


def estimate(params: TemplateParams, model: CostModel) -> CostModel:
    """The compute cost before a run has measured it: the matmul's 2·dim³ FLOPs at the
    model's rates (calibrated on this machine, a datasheet's, or a typical CPU's). Costs
    the model already holds are kept."""
    rates = model.rates or TYPICAL_CPU
    forward, _backward = rates.linear_seconds(params.dim, params.dim, params.dim)
    return replace(model, compute={MATMUL: forward, **model.compute})


HOOKS = Hooks(estimate=estimate, headline=("step_s",))
LESSON = Lesson(
    NAME, NUMBER, TEXTS, TemplateParams, TemplateResult, build, metrics, RANK_ENTRY, HOOKS
)
