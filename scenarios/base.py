"""What a lesson's scenario declares: parameters, narrative, Program, metrics.

A scenario module (one per lesson, e.g. scenarios.ring_allreduce) subclasses
Scenario and reads top to bottom like the lesson: its Params (validated the
same way for the CLI, the app's form and torchrun), its narrative steps in
Spanish and English, `build(params) -> Program`, and `metrics(...)` that turn
timelines and the ranks' results into the numbers the learner compares.

The rank-side code that touches torch lives in a sibling module named by
`rank_entry` ("module:function"), imported only inside rank processes, so the
UI can import every scenario without loading torch.

Imports: runtime's pure part only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from runtime import formulas
from runtime.costmodel import CostModel
from runtime.faults import Fault, require_timed
from runtime.program import Program
from runtime.trace import Timeline
from runtime.units import format_bytes, parse_bytes, parse_duration

if TYPE_CHECKING:  # the supervisor pulls numpy and safetensors: not on the UI's start path
    from runtime.supervise import RestartPolicy

Mode = Literal["run", "predict"]


class ParamError(ValueError):
    """A parameter the user got wrong; the message says what is allowed."""


def _number(value: float) -> str:
    """1048576, not 1.04858e+06: a bound the learner reads and types back."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Param:
    """One declared parameter.

    kinds: "int", "float", "bytes" (with units), "duration" (with units),
    "choice" (one of `choices`), "choices" (a comma list of `choices`).
    `maximum` bounds a real run on this machine; `predict_maximum` (if set)
    bounds `predict`, which can go far beyond what one machine can run.
    """

    name: str
    kind: str
    default: Any
    help: dict[str, str]
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    predict_maximum: float | None = None

    def upper(self, mode: Mode) -> float | None:
        if mode == "predict" and self.predict_maximum is not None:
            return self.predict_maximum
        return self.maximum

    def allowed(self, mode: Mode) -> str:
        if self.kind in ("choice", "choices"):
            many = " (or a comma list)" if self.kind == "choices" else ""
            return f"one of {', '.join(self.choices)}{many}"
        low, high = self.minimum, self.upper(mode)
        show = format_bytes if self.kind == "bytes" else _number
        unit = " with a unit, e.g. 64KiB, 4MiB" if self.kind == "bytes" else ""
        if self.kind == "duration":
            unit = " with a unit, e.g. 0.5s, 90s, 3h"
        bounds = ""
        if low is not None and high is not None:
            bounds = f" from {show(low)} to {show(high)}"
        elif low is not None:
            bounds = f" of at least {show(low)}"
        kind = {
            "int": "an integer",
            "float": "a number",
            "bytes": "a size",
            "duration": "a duration",
        }[self.kind]
        return f"{kind}{bounds}{unit}"

    def parse(self, text: Any, mode: Mode) -> Any:
        where = f"{self.name}={text}"
        if self.kind == "choice":
            if str(text) not in self.choices:
                raise ParamError(f"{where}: {self.name} must be {self.allowed(mode)}")
            return str(text)
        if self.kind == "choices":
            items = text if isinstance(text, list | tuple) else str(text).split(",")
            picked = [str(t).strip() for t in items if str(t).strip()]
            bad = [t for t in picked if t not in self.choices]
            if not picked or bad:
                raise ParamError(f"{where}: {self.name} must be {self.allowed(mode)}")
            return picked
        try:
            if self.kind == "int":
                value: float = int(str(text), 10) if not isinstance(text, int) else text
            elif self.kind == "float":
                value = float(text)
            elif self.kind == "bytes":
                value = text if isinstance(text, int) else parse_bytes(str(text))
            elif self.kind == "duration":
                value = float(text) if isinstance(text, int | float) else parse_duration(str(text))
            else:
                raise ParamError(f"{self.name}: unknown parameter kind {self.kind}")
        except ValueError:
            raise ParamError(f"{where}: {self.name} must be {self.allowed(mode)}") from None
        low, high = self.minimum, self.upper(mode)
        if (low is not None and value < low) or (high is not None and value > high):
            limit = (
                " on a real run (predict allows more)"
                if mode == "run" and self.predict_maximum
                else ""
            )
            raise ParamError(f"{where}: {self.name} must be {self.allowed(mode)}{limit}")
        return value


def int_param(
    name: str,
    default: int,
    es: str,
    en: str,
    minimum: float | None,
    maximum: float | None,
    predict_maximum: float | None = None,
) -> Param:
    """An integer Param with its help in both languages: the common case, in one line."""
    return Param(
        name,
        "int",
        default,
        {"es": es, "en": en},
        minimum=minimum,
        maximum=maximum,
        predict_maximum=predict_maximum,
    )


def gpt_parameters(params: dict[str, Any]) -> int:
    """Parameters of the MiniGPT a lesson's shape knobs describe (vocab, seq, hidden, layers)."""
    return formulas.gpt_parameter_count(
        params["vocab"], params["seq"], params["hidden"], params["layers"]
    )


def check_run_size(count: int, limit: int) -> None:
    """Refuse a real run of a model larger than this machine trains in a lesson's time."""
    if count > limit:
        raise ParamError(
            f"the model has {count:,} parameters; a real run here allows at most "
            f"{limit:,} (lower hidden or layers, or use predict)"
        )


@dataclass(frozen=True)
class NarrativeStep:
    """One step of the lesson, shown when the cursor is in one of its phases."""

    id: str
    title: dict[str, str]
    body: dict[str, str]
    formula: str = ""
    metric: str | None = None
    phases: tuple[str, ...] = ()


@dataclass(frozen=True)
class LessonInfo:
    lesson: int
    scenario: str
    title: dict[str, str]
    summary: dict[str, str]
    available: bool


def parse_param_args(pairs: Iterable[str]) -> dict[str, str]:
    """`["size=4MiB", "ranks=4"]` -> {"size": "4MiB", "ranks": "4"}."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise ParamError(f"malformed -p {pair!r}: use -p key=value")
        out[key.strip()] = value.strip()
    return out


@dataclass
class Scenario:
    """Base of every lesson's scenario; subclasses fill the class attributes."""

    name: str = ""
    lesson: int = 0
    title: dict[str, str] = field(default_factory=dict)
    summary: dict[str, str] = field(default_factory=dict)
    params: tuple[Param, ...] = ()
    narrative: tuple[NarrativeStep, ...] = ()
    rank_entry: str = ""

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def resolve(self, raw: dict[str, Any], mode: Mode) -> dict[str, Any]:
        """Defaults filled in, every value parsed and checked; ParamError otherwise."""
        names = [p.name for p in self.params]
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise ParamError(
                f"unknown parameter {unknown[0]!r} for {self.name}; allowed: {', '.join(names)}"
            )
        values = {p.name: p.parse(raw.get(p.name, p.default), mode) for p in self.params}
        self.check(values, mode)
        return values

    def check(self, params: dict[str, Any], mode: Mode) -> None:
        """Rules between parameters; raise ParamError naming the rule."""

    def world_size(self, params: dict[str, Any]) -> int:
        return int(params["ranks"])

    def build(self, params: dict[str, Any]) -> Program:
        raise NotImplementedError

    def prepare_model(
        self,
        params: dict[str, Any],
        model: CostModel,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> CostModel:
        """The cost model to simulate with: `model` itself unless the scenario adds
        compute costs (estimated before a run, measured by the ranks after it)."""
        return model

    def metrics(
        self,
        params: dict[str, Any],
        predicted: Timeline,
        measured: Timeline | None = None,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def check_faults(self, params: dict[str, Any], faults: list[Fault]) -> None:
        """Refuse faults this scenario cannot honour (ValueError/ParamError naming why).
        Default: only time-based faults; scenarios with steps and checkpoints allow more."""
        require_timed(faults)

    def restart_policy(self, params: dict[str, Any]) -> RestartPolicy | None:
        """How to restart after a failure, like torchrun (runtime.supervise); None: a
        failure ends the run."""
        return None

    def memory_rows(
        self, params: dict[str, Any], metrics: dict[str, Any]
    ) -> list[tuple[str, int, bool, dict[str, float]]]:
        """Bars for the app's memory panel: (group, rank, predicted?, bytes by category),
        category among params, grads, optimizer, activations, buffers. None by default."""
        return []

    def step_for_phase(self, phase: str | None) -> NarrativeStep | None:
        for step in self.narrative:
            if phase in step.phases:
                return step
        return None
