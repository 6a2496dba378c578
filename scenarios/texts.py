"""A lesson's learner-facing texts, Spanish and English, from its package's texts.toml.

Part of docs/design.md's lesson contract: everything a learner reads about a lesson
(its title and summary, the help of each parameter, the steps of its
narrative with their formulas) lives in one catalog per lesson,
`scenarios/<lesson>/texts.toml`, beside the Spanish/English catalog of the UI
(playground/i18n). Code holds no prose, a translator edits one file, and two
lessons' narratives never read as copies of each other's code. The MiniGPT's
shape knobs, shared by several lessons, are explained once in
scenarios/shape.toml.

The files are read with the standard library's tomllib, once per process, and
checked: both languages for every text, and the fields each narrative step needs.

Imports: stdlib only (and the NarrativeStep type).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

LANGUAGES = ("es", "en")


@dataclass(frozen=True)
class NarrativeStep:
    """One step of the lesson, shown when the cursor is in one of its phases; `metric`
    names the Metric whose value it quotes (of the series under the cursor)."""

    id: str
    title: dict[str, str]
    body: dict[str, str]
    formula: str = ""
    metric: str | None = None
    phases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Texts:
    title: dict[str, str]
    summary: dict[str, str]
    help: dict[str, dict[str, str]]  # parameter -> language -> text
    narrative: tuple[NarrativeStep, ...]


class TextsError(ValueError):
    """A catalog that lacks a language or a field: a bug of the lesson, found at import."""


def _bilingual(data: Any, where: str) -> dict[str, str]:
    if not isinstance(data, dict) or any(not isinstance(data.get(k), str) for k in LANGUAGES):
        raise TextsError(f"{where} needs a text in each of {', '.join(LANGUAGES)}")
    return {k: data[k] for k in LANGUAGES}


@cache
def _read(package: str, name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))


def shared_help() -> dict[str, dict[str, str]]:
    """The help of the knobs several lessons share (the MiniGPT's shape)."""
    data = _read("scenarios", "shape.toml")
    return {name: _bilingual(h, f"shape.toml [help] {name}") for name, h in data["help"].items()}


@cache
def load_texts(package: str) -> Texts:
    """The texts of the lesson in `package` (e.g. "scenarios.zero")."""
    data = _read(package, "texts.toml")
    where = f"{package}/texts.toml"
    help_ = {**shared_help()}
    for name, text in data.get("help", {}).items():
        help_[name] = _bilingual(text, f"{where} [help] {name}")
    steps = []
    for n, step in enumerate(data.get("narrative", []), 1):
        if not isinstance(step.get("id"), str) or not step.get("phases"):
            raise TextsError(f"{where}: narrative step {n} needs an id and its phases")
        steps.append(
            NarrativeStep(
                step["id"],
                _bilingual(step.get("title"), f"{where} step {step['id']} title"),
                _bilingual(step.get("body"), f"{where} step {step['id']} body"),
                step.get("formula", ""),
                step.get("metric"),
                tuple(step["phases"]),
            )
        )
    return Texts(
        _bilingual(data.get("title"), f"{where} title"),
        _bilingual(data.get("summary"), f"{where} summary"),
        help_,
        tuple(steps),
    )
