"""Lesson 3: failure, then resume — kill a rank, restart from the last good checkpoint,
end bit for bit where an uninterrupted run ends; and how often to checkpoint.

The `failure-resume` lesson, top to bottom: its params (.params), its narrative
(with every text a learner reads, in texts.toml), its Program (.program), its
metrics. Data-parallel MiniGPT (runtime.engine.models) trains for `steps` steps on
`ranks` ranks; every `checkpoint_every` steps all ranks write a checkpoint together
(runtime.engine.checkpoint). `--fault` kills or hangs a real rank at a step, or in the
middle of a checkpoint write, or corrupts the newest checkpoint; because the
lesson has a `restart_policy`, the session runs it under the restart
supervisor (runtime.engine.supervise), which detects the failure through the
launcher, tears every rank down and starts them again, possibly on
`resume_ranks` ranks (`build_for` gives the Program of any world size), from
the newest checkpoint whose manifest checks out. At the end the ranks train
the same seed again without interruption, in the same processes, and compare
parameters and optimizer state with torch.equal (scenarios.failure_resume.rank).

Why the result can be bitwise equal, even on a different number of ranks:
the global batch is cut into `microbatches` fixed pieces, and the gradient is
their sum over a fixed binary tree, not over ranks (scenarios.failure_resume
.trainer): 4 or 2 ranks, the additions are the same additions. Adam (and
ZeRO-1's shards of it) is elementwise.

The second half, `mtbf` and `save_cost`, is Young's and Daly's formulas for
the checkpoint interval beside a Monte-Carlo of a long run with exponential
failures (scenarios.failure_resume.interval); `predict` shows it without any run.

The faults it honours and the metrics of a run with failures are in
scenarios.failure_resume.recovery. Imports: runtime's pure part and the lesson
contract (the UI imports this); numpy (the interval study) is imported inside
`metrics` and `curves` only, and the restart types come from the pure
runtime.engine.restart: the app's first paint needs neither.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from runtime.engine.restart import RestartPolicy
from runtime.fit.after_run import Refinement
from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from runtime.sim.trace import Timeline
from scenarios.base import Hooks, Lesson, RunData
from scenarios.failure_resume import lumped, recovery
from scenarios.failure_resume.params import ResumeParams, ResumeResult
from scenarios.failure_resume.program import build, build_for
from scenarios.failure_resume.rates import PROBES, ResumeRates
from scenarios.metrics import Curve, Metric
from scenarios.texts import load_texts

# -- parameters: ResumeParams, and each rank's ResumeResult (scenarios/failure_resume/params.py)


def restart_policy(params: ResumeParams) -> RestartPolicy:
    """Restart like `torchrun --max-restarts`, on `resume_ranks` ranks when set."""
    return RestartPolicy(
        params.max_restarts,
        program_for=partial(build_for, params),
        resume_world_size=params.resume_ranks or None,
    )


# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/failure_resume/texts.toml


# -- program: build, build_for (scenarios/failure_resume/program.py) -----------------


def estimate(params: ResumeParams, model: CostModel) -> CostModel:
    """Before a run has measured them, from the compute rates (runtime.sim.compute: calibrated
    on this machine, or a datasheet's): one leaf's forward and backward through the whole
    model, Adam over the parameters, and a checkpoint: its protocol's fixed cost (every
    rank's fsync'ed files, the commit, two barriers) and its bytes at the disk's
    bandwidth (costs the model already has are kept)."""
    rates = model.rates or TYPICAL_CPU
    shape = params.model
    tokens = params.batch // params.microbatches * shape.seq
    forward, backward = shape.costs(rates, tokens).stage(shape.layers, first=True, last=True)
    estimated = {
        "fb": forward + backward,  # per leaf
        "opt": rates.adam_seconds(params.parameters),
        "ckpt": ResumeRates.of(model.rates).checkpoint_seconds(params.checkpoint_bytes),
    }
    return replace(model, compute={**estimated, **model.compute})


# -- metrics ------------------------------------------------------------------------------
def metrics(
    params: ResumeParams,
    predicted: Timeline,
    run: RunData[ResumeResult] | None,
) -> list[Metric]:
    from scenarios.failure_resume import interval  # numpy: only when metrics are asked for

    measured = run.measured if run is not None else None
    step_s = recovery.step_period(measured) if measured is not None else None
    write_s = recovery.median_checkpoint(measured) if measured is not None else None
    out = [
        Metric("parameters", "count", params.parameters),
        Metric("checkpoint_bytes", "bytes", params.checkpoint_bytes),
        # The whole run, restarts included, beside a prediction that assumes no failure:
        # the difference is what the failures cost.
        Metric("time_s", "s", measured.makespan if measured else None, predicted.makespan),
        Metric("step_s", "s", step_s, recovery.step_period(predicted)),
        Metric("checkpoint_write_s", "s", write_s, recovery.median_checkpoint(predicted)),
    ]
    if run is not None:
        out += recovery.restart_metrics(run.restarts) + recovery.state_metrics(run.results)
        if write_s and step_s:
            # Daly's interval for this machine's checkpoint cost and the given mtbf, in
            # steps of this run: what checkpoint_every should be.
            here = interval.daly_interval(write_s, params.mtbf)
            out += [
                Metric("daly_interval_here_s", "s", here),
                Metric("daly_checkpoint_every_steps", "count", max(1, round(here / step_s))),
            ]
    study = interval.study(params.save_cost, params.mtbf, params.restart_cost)
    return out + interval.interval_metrics(study)


def curves(params: ResumeParams) -> list[Curve]:
    """Overhead versus checkpoint interval, the study the metrics quote (HTML export)."""
    from scenarios.failure_resume import curve, interval  # numpy: only when asked for

    study = interval.study(params.save_cost, params.mtbf, params.restart_cost)
    return [curve.overhead_curve(study, params.typed())]


def tokens(params: ResumeParams) -> tuple[str, float]:
    """The global batch is split across the ranks: batch/ranks sequences of `seq` tokens."""
    return ("tokens", params.batch / params.ranks * params.model.seq)


RANK_ENTRY = "scenarios.failure_resume.rank:run_rank"  # torch: never imported here
# A million steps: `predict` simulates a few and places the rest (scenarios.failure_resume.lumped).
HOOKS = Hooks(
    estimate,
    recovery.check_faults,
    restart_policy,
    curves,
    lump=lumped.lump,
    items=tokens,
    headline=("step_s",),
    # the executor's Python between a step's actions counts
    refinement=Refinement(gaps="measured", measures="step and checkpoint costs"),
    probes=PROBES,  # a checkpoint's cost (scenarios.failure_resume.rates)
    faults_of=lambda params: params.faults.specs(),  # the form's (scenarios.fault_knobs)
)
LESSON = Lesson(
    "failure-resume", 3, TEXTS, ResumeParams, ResumeResult, build, metrics, RANK_ENTRY, HOOKS
)
