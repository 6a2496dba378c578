"""The lesson contract: what one lesson package declares, typed from end to end.

docs/design.md's "lesson contract". A lesson is a package under scenarios/ whose
`lesson.py` (no torch) reads top to bottom like the lesson it teaches:

1. its params, a frozen dataclass (scenarios.params), and its rank result
   record (a dataclass the rank code returns, sent back as JSON);
2. its texts: title, summary, the help of each param and the narrative, bilingual
   steps shown when the time cursor is in one of their phases, all read from
   the package's texts.toml (scenarios.texts);
3. `build(params) -> Program`, the Actions each rank runs (runtime.sim.program);
4. `metrics(params, predicted, run) -> list[Metric]` (scenarios.metrics);

and ends with a `Lesson` that names them, with the rank entry
("scenarios.<lesson>.rank:run_rank", a torch module the UI never imports).

Optional `Hooks`: `estimate` (the cost model's compute costs before any run
has measured them), `check_faults` (which --fault specs the lesson can
honour), `faults_of` (the fault specs the lesson's own fault knobs ask for:
scenarios.fault_knobs, the faults a learner causes from the app's form),
`restart_policy` (restart like torchrun after a failure), `curves`
(figures drawn beside the timeline, such as overhead versus checkpoint
interval), `lump` (a prediction at a scale where simulating every Action
would be slow: docs/design.md's "predict is cheap at any scale it accepts") and
`items` (what a sample or token is, for each rank's throughput), `marks` (events
read off the ranks' results, drawn on the measured timeline: a skipped step),
`figures` (metrics and curves that need the cost model or the run: a sweep the
model predicts, the loss curves a run measured) and `probes` (what `playground
calibrate` measures for this lesson alone, and the lesson's own rates it fits:
runtime.fit.calibration_probes, docs/adding-a-lesson.md). After a run the
prediction is refined one way for every lesson (runtime.fit.refine.refine)
from what the ranks measured (`RankResult.compute_costs`, `p2p`).

Imports: runtime's pure part only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from runtime.engine.faults import Fault, require_timed
from runtime.engine.restart import RestartPolicy, RestartReport
from runtime.fit.after_run import Refinement
from runtime.fit.calibration_probes import LessonProbes
from runtime.fit.refine import refine
from runtime.sim.costmodel import CostModel
from runtime.sim.program import Program
from runtime.sim.simulate import simulate
from runtime.sim.trace import Mark, Timeline
from scenarios.lesson_info import LessonInfo
from scenarios.metrics import Curve, Lanes, Metric
from scenarios.params import Mode, ParamError, Params, shown
from scenarios.texts import NarrativeStep, Texts


@dataclass(frozen=True, kw_only=True)
class RankResult:
    """Base of every lesson's rank result: what the prediction is refined with.

    `compute_costs`: seconds per cost key this rank measured (the median of its own
    repetitions); `p2p`: (bytes, one-way seconds) of messages it timed.
    """

    compute_costs: dict[str, float] = field(default_factory=dict)
    p2p: list[tuple[int, float]] = field(default_factory=list)


P = TypeVar("P", bound=Params)
R = TypeVar("R", bound=RankResult)


@dataclass(frozen=True)
class RunData(Generic[R]):
    """What a real run gives a lesson's metrics besides the prediction."""

    measured: Timeline
    results: list[R]
    restarts: RestartReport | None = None  # the supervisor's account, when it restarted


# The narrative step of this phase (if a lesson has one) is shown where a rank waits
# for a flagged straggler (runtime.engine.stragglers): "everyone waits for the slowest".
STRAGGLER_PHASE = "straggler"

# Above this many Actions a lesson's `predict` lumps (Hooks.lump): building and
# simulating one costs some 10 µs, and a prediction answers in well under a second.
LUMP_ABOVE_ACTIONS = 20_000


@dataclass(frozen=True)
class Lumped:
    """A prediction at a scale where simulating every Action would be slow: identical
    ranks or steps lumped into one representative, the rest by a closed form (or
    every action simulated by a faster path, and only a part of them drawn).

    `timeline`: what is drawn, at its exact times; `formula`: how it stands for the
    whole, said in the output; `metrics`: the lesson's metrics when they cannot be
    read off `timeline` (None: `lesson.metrics(params, timeline, None)` is exact)."""

    timeline: Timeline
    formula: str
    metrics: list[Metric] | None = None


__all__ = [
    "LUMP_ABOVE_ACTIONS",
    "STRAGGLER_PHASE",
    "Hooks",
    "Lesson",
    "LessonInfo",
    "Lumped",
    "NarrativeStep",
    "RankResult",
    "RunData",
    "parse_param_args",
]


def only_timed_faults(params: Any, faults: list[Fault]) -> None:
    """Default: a lesson without training steps or checkpoints honours timed faults only."""
    require_timed(faults)


def parse_param_args(pairs: list[str]) -> dict[str, str]:
    """`["size=4MiB", "ranks=4"]` -> {"size": "4MiB", "ranks": "4"}; a malformed pair or
    a key given twice (never silently last-wins) is a ParamError."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ParamError(
                None,
                f"malformed -p {shown(pair)}: use -p key=value",
                es=f"-p {shown(pair)} mal formado: use -p clave=valor",
            )
        if key in out:
            raise ParamError(
                key,
                f"{shown(key)} is given more than once: give each parameter once",
                es=f"{shown(key)} aparece más de una vez: dé cada parámetro una sola vez",
            )
        out[key] = value.strip()
    return out


# torch builds an optimizer's parameter groups under torch._disable_dynamo, which
# imports torch._dynamo at its first use: half a second of every rank's cold start,
# paid once in the fork server instead by a lesson whose ranks build an optimizer.
OPTIMIZER_MODULES = ("torch._dynamo",)
# torch.autograd.backward (or .grad) handed an output gradient checks its shape with
# torch.fx.experimental.symbolic_shapes, which imports sympy at the first call: a third
# of a second. A pipeline stage's first backward pays it, and each stage's first
# backward waits on the next stage's: a second of the pipeline's warm-up step, paid
# once in the fork server instead (dynamo and FSDP2 import it already).
GRADIENT_MODULES = ("torch.fx.experimental.symbolic_shapes",)


@dataclass(frozen=True)
class Hooks(Generic[P]):
    """What a lesson may add to the contract; the defaults do nothing special."""

    # The cost model's compute costs before any run has measured them.
    estimate: Callable[[P, CostModel], CostModel] | None = None
    # Which --fault specs the lesson can honour (ValueError/ParamError naming why).
    check_faults: Callable[[P, list[Fault]], None] = only_timed_faults
    # Restart like torchrun after a failure (None: a failure ends the run).
    restart_policy: Callable[[P], RestartPolicy | None] | None = None
    # Figures drawn beside the timeline.
    curves: Callable[[P], list[Curve]] | None = None
    # One row per item of work (a request), from the predicted and measured timelines:
    # the HTML export draws them (a replay's too: they are never saved).
    lanes: Callable[[P, Timeline, Timeline | None], list[Lanes]] | None = None
    # A lumped prediction when simulating every Action would be slow (None: simulate
    # them all); the lesson's tests check it against the full simulation.
    lump: Callable[[P, CostModel], Lumped | None] | None = None
    # What one item of work is and how many each rank processes per step, e.g.
    # ("tokens", 64.0): the per-rank throughput (runtime.engine.stragglers). None: absent.
    items: Callable[[P], tuple[str, float]] | None = None
    # Heavy modules its ranks import later (lazily) besides its rank module: imported
    # once in the fork server that starts the ranks of a cold run (runtime.engine.spawn).
    preload: tuple[str, ...] = ()
    # How the prediction learns from a run (runtime.fit.after_run.Refinement): chained
    # collectives, measured gaps between actions, what the ranks time.
    refinement: Refinement = Refinement()
    # Marks read off the ranks' results (a skipped step, a loss scale that changed),
    # added to the measured timeline's.
    marks: Callable[[P, list[Any]], list[Mark]] | None = None
    # The lesson's headline time, per series: the metric(s) whose prediction the error
    # budget holds to (a makespan or a step time; playground.prediction_error).
    headline: tuple[str, ...] = ()
    # The step numbers below this one are the ones the lesson's times leave out (a
    # warm-up: Adam allocating its moments, torch's DDP rebuilding its buckets; a lesson
    # that counts its steps from 1 and leaves one out says 2): refining the model after
    # a run leaves their spans out too (runtime.sim.program.past_warmup).
    warmup_steps: Callable[[P], int] = lambda _params: 0
    # Metrics and curves that need the prepared cost model or the run (None before one):
    # a sweep the model predicts, the loss curves a run measured.
    figures: (
        Callable[[P, CostModel, RunData[Any] | None], tuple[list[Metric], list[Curve]]] | None
    ) = None
    # What `playground calibrate` measures for this lesson alone (its rank-side probes)
    # and how it fits them into the lesson's own rates record (a LessonRates, read back
    # with `<Record>.of(model.rates)`); None: the generic rates (runtime.sim.compute) do.
    probes: LessonProbes | None = None
    # The --fault specs its own fault knobs ask for (scenarios.fault_knobs; none when they
    # are off): the session puts them before the CLI's, checked the same way.
    faults_of: Callable[[P], list[str]] = lambda _params: []


@dataclass(frozen=True)
class Lesson(Generic[P, R]):
    """A lesson, as its package declares it; the registry lists them."""

    name: str
    number: int
    texts: Texts
    params: type[P]
    result: type[R]
    build: Callable[[P], Program]
    metrics: Callable[[P, Timeline, RunData[R] | None], list[Metric]]
    rank_entry: str  # "scenarios.<lesson>.rank:run_rank"
    hooks: Hooks[P] = Hooks()

    @property
    def title(self) -> dict[str, str]:
        return self.texts.title

    @property
    def summary(self) -> dict[str, str]:
        return self.texts.summary

    @property
    def narrative(self) -> tuple[NarrativeStep, ...]:
        return self.texts.narrative

    def help(self, name: str) -> dict[str, str]:
        """The help of parameter `name`, in each language."""
        return self.texts.help[name]

    @property
    def info(self) -> LessonInfo:
        return LessonInfo(self.number, self.name, self.title, self.summary, True)

    def parse(self, raw: dict[str, Any], mode: Mode) -> P:
        """The typed params of `raw` (strings as typed, or typed values); ParamError."""
        return self.params.parse(raw, mode)

    def prepare_model(
        self, params: P, model: CostModel, results: list[R] | None = None
    ) -> CostModel:
        """The cost model to simulate with: the lesson's estimate before a run, refined
        with what the ranks measured after it."""
        if self.hooks.estimate is not None:
            model = self.hooks.estimate(params, model)
        if results:
            model = refine(
                model,
                [r.compute_costs for r in results],
                p2p=[sample for r in results for sample in r.p2p],
                what=self.hooks.refinement.measures,
            )
        return model

    def predict(self, params: P, model: CostModel) -> tuple[Timeline, list[Metric]]:
        """The predicted timeline and metrics before any run (`model` prepared): every
        Action simulated, or lumped where the lesson says that would be slow, in which
        case two facts say so (`lumped`, and how: `lumped_formula`)."""
        # A slowed rank (the `slow` fault) is unlike the others: no lumping stands for it.
        lumpable = self.hooks.lump is not None and not model.slow
        lumped = self.hooks.lump(params, model) if lumpable else None  # type: ignore[misc]
        if lumped is None:
            predicted = simulate(self.build(params), model)
            return predicted, self.metrics(params, predicted, None)
        metrics = lumped.metrics
        if metrics is None:
            metrics = self.metrics(params, lumped.timeline, None)
        facts = [Metric("lumped", "flag", True), Metric("lumped_formula", "text", lumped.formula)]
        return lumped.timeline, [*metrics, *facts]

    def faults(self, params: P) -> list[str]:
        """The fault specs `params` ask for (Hooks.faults_of), before the CLI's --fault."""
        return self.hooks.faults_of(params)

    def restart_policy(self, params: P) -> RestartPolicy | None:
        hook = self.hooks.restart_policy
        return hook(params) if hook is not None else None

    def items(self, params: P) -> tuple[str, float] | None:
        """What one item of work is and how many each rank processes per step, if said."""
        hook = self.hooks.items
        return hook(params) if hook is not None else None

    def curves(self, params: P) -> list[Curve]:
        hook = self.hooks.curves
        return hook(params) if hook is not None else []

    def lanes(self, params: P, predicted: Timeline, measured: Timeline | None) -> list[Lanes]:
        hook = self.hooks.lanes
        return hook(params, predicted, measured) if hook is not None else []

    def marks(self, params: P, results: list[R]) -> list[Mark]:
        hook = self.hooks.marks
        return hook(params, results) if hook is not None else []

    def figures(
        self, params: P, model: CostModel, run: RunData[R] | None = None
    ) -> tuple[list[Metric], list[Curve]]:
        """The hook's metrics and curves, with the lesson's own curves after them."""
        hook = self.hooks.figures
        metrics, curves = hook(params, model, run) if hook is not None else ([], [])
        return metrics, [*self.curves(params), *curves]

    def figure_metrics(self, params: P, model: CostModel) -> list[Metric]:
        """The hook's metrics before a run, without drawing the lesson's curves."""
        hook = self.hooks.figures
        return hook(params, model, None)[0] if hook is not None else []

    def step_for_phase(self, phase: str | None) -> NarrativeStep | None:
        for step in self.narrative:
            if phase in step.phases:
                return step
        return None
