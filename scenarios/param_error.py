"""ParamError: a parameter the user got wrong, as an English line and as data.

Raised by scenarios.params (and a lesson's rules between its params). The line is
English (`str(exc)`: torchrun, the ranks and the tests read it); the errors of
scenarios.params also carry it as data, a template key of PHRASES, its values and
what is allowed as parts, so that the edge (playground.usage) writes the same
sentence from its catalogs (`param.<key>`) in the learner's language; a lesson's
own rule may give its Spanish twin as `es`.

Imports: stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The English templates of the errors raised here, by key; playground's catalogs hold
# the same keys as `param.<key>` in every language (tests hold the two English in step).
# An `allowed` value is a list of parts, (key, values), joined: "an integer" + " from 1
# to 8".
PHRASES = {
    "must_be": "{name}={value}: {name} must be {allowed}",
    "run_only": "{name}={value}: {name} must be {allowed} on a real run (predict allows more)",
    "list_once": "{name}={value}: list each one once",
    "alias": "{alias}={value} and {target}={other}: {alias} is another name for {target}; "
    "give one of them",
    "unknown": "unknown parameter {value}; allowed: {names}",
    "one_of": "one of {choices}",
    "one_of_list": "one of {choices} (or a comma list)",
    "count_up_to": "a whole number from 1 to {top}T (e.g. 7e9, 7B, 70B, 125M) or auto",
    "count_any": "a whole number of at least 1 (e.g. 7e9, 7B, 70B, 125M) or auto",
    "noun_int": "an integer",
    "noun_float": "a number",
    "noun_bytes": "a size",
    "noun_duration": "a duration",
    "range": " from {low} to {high}",
    "at_least": " of at least {low}",
    "unit_bytes": " with a unit, e.g. 64KiB, 4MiB",
    "unit_duration": " with a unit, e.g. 0.5s, 90s, 3h",
}
Parts = list[tuple[str, dict[str, str]]]


def render(key: str, values: dict[str, Any], phrases: Mapping[str, str] = PHRASES) -> str:
    """The template `key` of `phrases` filled with `values` (an `allowed` list of parts
    joined first, from the same phrases)."""
    filled = dict(values)
    if isinstance(filled.get("allowed"), list):
        filled["allowed"] = "".join(phrases[k].format(**v) for k, v in filled["allowed"])
    return phrases[key].format(**filled)


class ParamError(ValueError):
    """A parameter the user got wrong: `field` names it (None: the command line itself).
    `key` and `values`: the sentence as data (PHRASES), for the edge to write in the
    learner's language; `es`: a Spanish twin written by the raiser."""

    def __init__(
        self,
        field: str | None,
        message: str | None = None,
        *,
        key: str | None = None,
        values: dict[str, Any] | None = None,
        es: str | None = None,
    ):
        self.key, self.values, self.es = key, dict(values or {}), es
        if message is None:
            assert key is not None, "a ParamError needs a message or a key"
            message = render(key, self.values)
        super().__init__(message)
        self.field = field
