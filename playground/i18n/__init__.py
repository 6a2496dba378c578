"""Spanish and English catalogs for every learner-facing string of the UI and the CLI.

The course is Spanish-first: Spanish is the default when the locale says so
(LANG/LC_ALL/LC_MESSAGES starting with "es"), or when PLAYGROUND_LANG=es;
otherwise English. Scenario narratives carry their own es/en texts
(scenarios.base.NarrativeStep); this catalog holds the rest.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

LANGUAGES = ("es", "en")


def default_language() -> str:
    forced = os.environ.get("PLAYGROUND_LANG", "")
    if forced in LANGUAGES:
        return forced
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var, "")
        if value:
            return "es" if value.lower().startswith("es") else "en"
    return "en"


@cache
def catalog(lang: str) -> dict[str, str]:
    return json.loads((Path(__file__).parent / f"{lang}.json").read_text(encoding="utf-8"))


def t(key: str, lang: str | None = None, **values: object) -> str:
    """The text for `key` in `lang` (default: the learner's language), formatted with `values`."""
    text = catalog(lang or default_language()).get(key) or catalog("en").get(key, key)
    return text.format(**values) if values else text
