"""The sentences lesson 0 writes with numbers in them, in Spanish and English.

scenarios.texts reads a lesson's title, summary, help and narrative from its
texts.toml; this lesson also writes sentences with figures in them (the verdict
and its reason, why a plan loses, the budget sentence). Their templates live in
the same texts.toml, in its [phrases] table, so that every learner-facing text
of the lesson is in one catalog; this module reads that table once and fills a
template in. A missing language or key is a bug, found at import by the tests.

Imports: stdlib only.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

from scenarios.texts import LANGUAGES, TextsError


@cache
def _phrases() -> dict[str, dict[str, str]]:
    text = resources.files(__package__).joinpath("texts.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text).get("phrases", {})
    out = {}
    for key, texts in table.items():
        if not isinstance(texts, dict) or any(not isinstance(texts.get(k), str) for k in LANGUAGES):
            raise TextsError(f"why_distribute/texts.toml [phrases] {key} needs es and en")
        out[key] = {k: texts[k] for k in LANGUAGES}
    return out


def phrase(key: str, language: str, **values: Any) -> str:
    """The template `key` in `language`, filled in with `values`."""
    return _phrases()[key][language].format(**values)


def both(key: str, **values: Any) -> dict[str, str]:
    """The template `key` filled in, in every language."""
    return {language: phrase(key, language, **values) for language in LANGUAGES}


def money(value: float) -> str:
    """$2.10, $1,234.50: dollars and cents, as the course writes them."""
    return f"-${-value:,.2f}" if value < 0 else f"${value:,.2f}"


def hours(value: float) -> str:
    """3, 3.25, 480: hours as a person says them (three significant digits below 100)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
