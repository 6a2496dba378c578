"""A lesson's parameters as the learner reads them: name, default, what is allowed on a
real run and on `predict`, and the one-line help, in either language.

Read from the lesson's Params declaration (scenarios.params: the same Knobs the app's
form and the parser use) and its texts, so the CLI's `--help`, `playground list
LESSON` and the generated lesson pages (docs/lessons/) cannot drift from what the
lesson accepts. Never imports torch.
"""

from __future__ import annotations

import textwrap
from dataclasses import asdict, dataclass
from typing import Any

from playground.i18n import t
from playground.usage import phrases
from scenarios.base import Lesson
from scenarios.params import Knob, Mode


@dataclass(frozen=True)
class ParamRow:
    name: str
    group: str | None  # None: the lesson's own; else the shared group (`model`)
    kind: str
    default: str  # as the learner would type it
    run: str  # what a real run accepts, in words
    predict: str  # what `predict` accepts (the same words when it allows no more)
    choices: tuple[str, ...]
    help: str
    minimum: float | None = None  # the bounds as numbers (`list LESSON --json`)
    maximum: float | None = None  # on a real run
    predict_maximum: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "choices": list(self.choices)}


def allowed(knob: Knob, mode: Mode, language: str) -> str:
    """What `knob` accepts in `mode`: "an integer from 2 to 8", in `language`."""
    said = phrases(language)
    return "".join(said[key].format(**values) for key, values in knob.allowed_parts(mode))


def param_rows(lesson: Lesson, language: str) -> list[ParamRow]:
    """Every parameter of `lesson`, its own first, then each shared group's."""
    defaults = lesson.params().typed()
    rows = []
    for group, knobs in lesson.params.knob_groups():
        for name, knob in knobs:
            texts = lesson.texts.help.get(name, {})
            rows.append(
                ParamRow(
                    name=name,
                    group=group,
                    kind=knob.kind,
                    default=defaults.get(name, ""),
                    run=allowed(knob, "run", language),
                    predict=allowed(knob, "predict", language),
                    choices=knob.choices,
                    help=texts.get(language) or texts.get("en", ""),
                    minimum=knob.minimum,
                    maximum=knob.maximum,
                    predict_maximum=knob.upper("predict"),
                )
            )
    return rows


def params_text(lesson: Lesson, language: str, width: int = 100) -> list[str]:
    """The parameters as lines for a terminal: name and default, then what is allowed
    (and what `predict` allows beyond it), then the help, wrapped to `width`."""
    rows = param_rows(lesson, language)
    wide = max((len(r.name) for r in rows), default=0) + 2
    pad = " " * (2 + wide)
    lines = [t("cli.params_heading", language, name=lesson.name)]
    group: str | None = None
    for row in rows:
        if row.group != group:
            group = row.group
            lines.append("  " + t("cli.params_group", language, group=group))
        lines.append(f"  {row.name:<{wide}}{t('cli.params_default', language)}: {row.default}")
        said = [row.run]
        if row.predict != row.run:
            said.append(f"{t('cli.params_predict', language)}: {row.predict}")
        for text in [*said, row.help]:
            if text:
                lines += textwrap.wrap(
                    text, width, initial_indent=pad, subsequent_indent=pad + "  "
                )
    return lines
