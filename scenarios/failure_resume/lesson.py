"""Lesson 3: failure, then resume — kill a rank, restart from the last good checkpoint,
end bit for bit where an uninterrupted run ends; and how often to checkpoint.

The `failure-resume` lesson, top to bottom: its params, its narrative (with
every text a learner reads, in texts.toml), its Program, its metrics.
Data-parallel MiniGPT (runtime.engine.models) trains for `steps` steps on `ranks`
ranks; every `checkpoint_every` steps all ranks write a checkpoint together
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

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from runtime.engine.restart import RestartPolicy
from runtime.sim import formulas
from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action, Program
from runtime.sim.trace import Timeline
from scenarios.base import Hooks, Lesson, RankResult, RunData
from scenarios.failure_resume import lumped, recovery
from scenarios.metrics import Curve, Metric
from scenarios.params import Mode, ParamError, Params, choice, duration, integer
from scenarios.shape import FP32, GPTShape
from scenarios.texts import load_texts

MAX_RUN_PARAMETERS = 1_000_000
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64)


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class ResumeParams(Params):
    ranks: int = integer(4, 1, 8, 64)  # a power of two
    resume_ranks: int = integer(0, 0, 8, 64)  # ranks after a restart (0: the same)
    steps: int = integer(30, 1, 400, 1_000_000)
    checkpoint_every: int = integer(5, 1)
    max_restarts: int = integer(3, 0, 10)
    sharding: str = choice("ddp", ("ddp", "zero1"))
    model: GPTShape = GPTShape(
        layers=2, hidden=32, heads=2, seq=16, vocab=32, run_limit=MAX_RUN_PARAMETERS
    )
    batch: int = integer(16, 1, 256, 65536)  # sequences per step (global batch)
    microbatches: int = integer(8, 1, 64)  # leaves of the gradient tree
    seed: int = integer(0, 0, 2**31 - 1)
    mtbf: float = duration(3 * 3600.0, 1e-3)  # M
    save_cost: float = duration(60.0, 1e-6)  # C
    restart_cost: float = duration(0.0, 0.0)  # R

    def check(self, mode: Mode) -> None:
        m = self.microbatches
        if m not in POWERS_OF_TWO:
            raise ParamError(
                "microbatches",
                f"microbatches={m}: must be a power of two (the gradient tree)",
                es=f"microbatches={m}: debe ser una potencia de dos (el árbol de gradientes)",
            )
        for name in ("ranks", "resume_ranks"):
            n = getattr(self, name)
            if name == "resume_ranks" and n == 0:
                continue
            if n not in POWERS_OF_TWO or m % n:
                raise ParamError(
                    name,
                    f"{name}={n}: must be a power of two dividing microbatches={m}, so every "
                    "rank owns a whole subtree of the gradient sum",
                    es=f"{name}={n}: debe ser una potencia de dos que divida microbatches={m}, "
                    "para que cada rango tenga un subárbol entero de la suma de gradientes",
                )
        if self.batch % m:
            raise ParamError(
                "batch",
                f"batch={self.batch}: must be a multiple of microbatches={m}",
                es=f"batch={self.batch}: debe ser múltiplo de microbatches={m}",
            )
        # Any save_cost and restart_cost, whatever mtbf: Daly's interval holds for
        # C < 2M and is M beyond (scenarios.failure_resume.interval), and the Monte-Carlo
        # that checks it caps its own work.

    @property
    def parameters(self) -> int:
        return self.model.parameters

    @property
    def checkpoint_steps(self) -> list[int]:
        return list(range(self.checkpoint_every, self.steps + 1, self.checkpoint_every))

    @property
    def checkpoint_bytes(self) -> int:
        """Parameters and Adam's two moments, fp32."""
        return 3 * self.parameters * FP32


@dataclass(frozen=True, kw_only=True)
class ResumeResult(RankResult):
    """What each rank reports after the final attempt and the uninterrupted rerun."""

    bitwise_equal: bool  # every check below held on every rank
    checks: dict[str, bool]  # parameters, exp_avg, exp_avg_sq, optimizer_step, rng, data
    parameters_sha256: str  # fingerprints of the final state, to compare separate runs
    optimizer_sha256: str
    resumed_from_step: int
    losses: list[float] = field(default_factory=list)  # steps resumed_from_step+1 .. steps
    final_loss: float | None = None
    final_loss_uninterrupted: float | None = None


def restart_policy(params: ResumeParams) -> RestartPolicy:
    """Restart like `torchrun --max-restarts`, on `resume_ranks` ranks when set."""
    return RestartPolicy(
        params.max_restarts,
        program_for=partial(build_for, params),
        resume_world_size=params.resume_ranks or None,
    )


# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/failure_resume/texts.toml


# -- program ------------------------------------------------------------------------------
def build(params: ResumeParams) -> Program:
    return build_for(params, params.ranks)


def build_for(params: ResumeParams, world: int, steps: Iterable[int] | None = None) -> Program:
    """The Program of one attempt on `world` ranks. Per step and rank: fwd+bwd of its
    microbatches, all-gather of the subtree gradient sums, the Adam step (of its shard
    with ZeRO-1, then an all-gather of parameters), and every `checkpoint_every` steps
    a checkpoint write. `steps`: only those (a lumped prediction draws a few), else all."""
    numel = params.parameters
    group = tuple(range(world))
    leaves = params.microbatches // world
    zero1 = params.sharding == "zero1"
    shard = max(formulas.even_split(numel, world))
    program = Program(world, name="failure-resume")
    every = params.checkpoint_every
    for k in range(1, params.steps + 1) if steps is None else steps:
        for r in group:
            # A collective is where a dead peer strands the survivors: the cursor on
            # one tells why everyone restarts.
            gather = dict(phase="collective", group=group, algorithm="builtin")
            program.add(_step(k, r, "fb", "compute", "fwd+bwd", cost_key="fb", work=leaves))
            grads = world * (numel + 1) * FP32
            program.add(_step(k, r, "grads", "all_gather", "gather grads", bytes=grads, **gather))
            work = shard / numel if zero1 else 1.0
            program.add(_step(k, r, "opt", "opt", "adam", cost_key="opt", work=work))
            if zero1:
                nbytes = world * shard * FP32
                program.add(
                    _step(k, r, "params", "all_gather", "gather params", bytes=nbytes, **gather)
                )
            if k % every == 0:  # a checkpoint step (checkpoint_steps)
                # The first checkpoint tells how one is written (atomicity); the later
                # ones, how often to pay for one (Young and Daly).
                phase = "checkpoint" if k == every else "interval"
                program.add(_step(k, r, "ckpt", "checkpoint", "checkpoint", phase, cost_key="ckpt"))
    return program


def _step(
    k: int, rank: int, op: str, kind: str, label: str, phase: str = "train", **more: Any
) -> Action:
    """The action `op` of training step k on `rank` (the rank code dispatches on `op`)."""
    return Action(
        id=f"s{k}.{op}@r{rank}",
        rank=rank,
        kind=kind,
        label=f"{label} {k}",
        step=k,
        phase=phase,
        # A checkpoint waits on the disk, not a core: the simulator shares no core with it.
        args=(("op", op), ("io", True)) if op == "ckpt" else (("op", op),),
        **more,
    )


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
        "ckpt": rates.checkpoint_seconds(params.checkpoint_bytes),
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
    "step and checkpoint costs",
    recovery.check_faults,
    restart_policy,
    curves,
    lump=lumped.lump,
    items=tokens,
    headline=("step_s",),
    dispatch_gaps=True,  # its steps came out 1-3% short without the gaps
)
LESSON = Lesson(
    "failure-resume", 3, TEXTS, ResumeParams, ResumeResult, build, metrics, RANK_ENTRY, HOOKS
)
