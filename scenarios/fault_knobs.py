"""Faults a learner causes from the app's form: typed knobs, off by default, as fault specs.

Part of docs/design.md's lesson contract (issue 40, item 3). The CLI's `--fault SPEC`
(runtime.engine.faults) reaches only the command line; a lesson whose point is a fault
also declares it as params, so the app's form, generated from the params
(playground.widgets.param_form), has it. Each class here is a group of knobs (a
`Params` default, as the MiniGPT's shape is: typed at top level, `-p fault=kill`,
folded in the form under its field's name, `faults`):

- `StepFault` (failure-resume): kill or hang rank `fault_rank` in training step
  `fault_step` -> `kill:rank=2,step=12`;
- `SlowRank` (ring-allreduce): rank `slow_rank`'s compute `slow_factor` times slower
  (1: none) -> `slow:rank=R,factor=F`;
- `Overflow` (mixed-precision): an inf in rank `overflow_rank`'s gradients in step
  `overflow_step` (0: none) -> `overflow:step=K,rank=R`.

A lesson hands its group's `specs()` to the contract through `Hooks.faults_of`; the
session puts them before the CLI's `--fault` specs and parses and checks them all the same
way (runtime.engine.faults, the lesson's `check_faults`), so one run may have both. The
rules between a group and the lesson's other knobs (a rank below `ranks`, a step within
`steps`) are checked by the lesson's own `Params.check`, calling the group's, so the form
shows the error under the knob it names before anything runs; their sentences, in
Spanish and English, are in scenarios/fault_knobs.toml [phrases].

Imports: scenarios.params and the stdlib (the UI imports this).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from runtime.engine.faults import MAX_SLOW_FACTOR
from scenarios.params import ParamError, Params, choice, integer, number
from scenarios.texts import LANGUAGES, TextsError


@cache
def _phrases() -> dict[str, dict[str, str]]:
    text = resources.files("scenarios").joinpath("fault_knobs.toml").read_text(encoding="utf-8")
    out = {}
    for key, texts in tomllib.loads(text)["phrases"].items():
        if not isinstance(texts, dict) or any(not isinstance(texts.get(k), str) for k in LANGUAGES):
            raise TextsError(f"fault_knobs.toml [phrases] {key} needs es and en")
        out[key] = {k: texts[k] for k in LANGUAGES}
    return out


def refused(name: str, key: str, **values: Any) -> ParamError:
    """A ParamError naming knob `name`: the [phrases] template `key`, in English and Spanish."""
    texts = _phrases()[key]
    filled = {"name": name, **values}
    return ParamError(name, texts["en"].format(**filled), es=texts["es"].format(**filled))


def check_rank(name: str, rank: int, ranks: int, ranks_field: str = "ranks") -> None:
    if rank >= ranks:
        raise refused(name, "rank_below", value=rank, ranks=ranks, ranks_field=ranks_field)


def check_step(name: str, step: int, steps: int) -> None:
    if not 1 <= step <= steps:
        raise refused(name, "step_within", value=step, steps=steps)


@dataclass(frozen=True)
class StepFault(Params):
    """Kill (SIGKILL) or hang (SIGSTOP) one rank in the middle of a training step."""

    fault: str = choice("none", ("none", "kill", "hang"))
    fault_rank: int = integer(2, 0)
    fault_step: int = integer(12, 1)

    def specs(self) -> list[str]:
        if self.fault == "none":
            return []
        return [f"{self.fault}:rank={self.fault_rank},step={self.fault_step}"]

    def check_within(self, ranks: int, steps: int) -> None:
        """Rank and step of the run (nothing to check while the fault is off)."""
        if self.fault != "none":
            check_rank("fault_rank", self.fault_rank, ranks)
            check_step("fault_step", self.fault_step, steps)


@dataclass(frozen=True)
class SlowRank(Params):
    """A straggler: one rank's local compute `slow_factor` times as long (1: none)."""

    slow_rank: int = integer(1, 0)
    slow_factor: float = number(1.0, 1.0, MAX_SLOW_FACTOR)

    @property
    def on(self) -> bool:
        return self.slow_factor > 1.0

    def specs(self) -> list[str]:
        return [f"slow:rank={self.slow_rank},factor={self.slow_factor:g}"] if self.on else []

    def check_within(self, ranks: int) -> None:
        if self.on:
            check_rank("slow_rank", self.slow_rank, ranks)


@dataclass(frozen=True)
class Overflow(Params):
    """An inf in one rank's gradients in one training step (0: none)."""

    overflow_step: int = integer(0, 0)
    overflow_rank: int = integer(0, 0)

    def specs(self) -> list[str]:
        if not self.overflow_step:
            return []
        return [f"overflow:step={self.overflow_step},rank={self.overflow_rank}"]

    def check_within(self, ranks: int, steps: int) -> None:
        if self.overflow_step:
            check_step("overflow_step", self.overflow_step, steps)
            check_rank("overflow_rank", self.overflow_rank, ranks)
