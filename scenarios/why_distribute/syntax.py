"""Lesson 0's two knobs typed as a small syntax: the MLP's width and a pinned layout.

`ffn` takes `auto`, a width or a multiple of hidden (`14336`, `4h`); `layout` takes
`auto` or the degrees of a plan (`tp8,pp12,dp8`). `Spec` is the knob that checks such
a value as it is typed and keeps it as typed; `read_ffn` and `read_layout` turn it
into numbers for params.py, the module below which this one sits. `refused` says a
broken rule in both languages, for this module and params.py alike.

Imports: the lesson contract's params and the lesson's phrases (texts.toml).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from scenarios.params import KNOB, Knob, Mode, ParamError, shown
from scenarios.why_distribute.phrases import phrase

LAYOUT_SYNTAX = "auto, tpT,ppP,dpD[,cpC][,vV][,zero1|zero2|zero3][,mbsB][,deepspeed]"
FFN_SYNTAX = "auto, N, Nh (14336, 4h)"
LAYOUT_PART = re.compile(r"(tp|pp|dp|cp|v|mbs)([0-9]{1,6})|(ddp|zero1|zero2|zero3)|(deepspeed)")


def refused(field: str, key: str, **values: object) -> ParamError:
    """A rule between the params, broken: texts.toml [phrases] `key`, English and Spanish."""
    return ParamError(field, phrase(key, "en", **values), es=phrase(key, "es", **values))


@dataclass(frozen=True)
class Spec(Knob):
    """A knob whose value is a short syntax (`4h`, `tp8,pp12,dp8`), checked by `read`;
    kept as typed. Wrong input names the field and the syntax, in both languages."""

    syntax: str = ""
    read: Any = None  # str -> parsed value, ValueError when wrong
    examples: tuple[str, ...] = ()  # values the syntax accepts, for help and tests

    def allowed_parts(self, mode: Mode) -> list[tuple[str, dict[str, str]]]:
        return [("one_of", {"choices": self.syntax})]

    def parse(self, name: str, text: Any, mode: Mode) -> Any:
        value = str(text).strip().replace(" ", "")
        try:
            if not value.isprintable() or len(value) > 80:
                raise ValueError(value)
            if value != "auto":
                self.read(value)
        except ValueError:
            values = dict(name=name, value=shown(str(text)[:80]), syntax=self.syntax)
            raise refused(name, "bad_syntax", **values) from None
        return value

    def format(self, value: Any) -> str:
        return str(value)


def spec(default: str, syntax: str, read: Any, examples: tuple[str, ...]) -> Any:
    knob = Spec("text", syntax=syntax, read=read, examples=examples)
    return field(default=default, metadata={KNOB: knob})


def read_ffn(text: str) -> tuple[int, bool]:
    """`14336` -> (14336, False); `4h` -> (4, True): a multiple of hidden."""
    multiple = text.endswith("h")
    number = int(text[:-1] if multiple else text, 10)
    if number < 1:
        raise ValueError(text)
    return number, multiple


def read_layout(text: str) -> dict[str, Any]:
    """`tp8,pp12,dp8,cp2,v2,zero1,mbs2` -> its degrees (each at most once);
    `deepspeed`: DeepSpeed's pipeline engine runs it (engine)."""
    out: dict[str, Any] = {}
    for part in text.split(","):
        match = LAYOUT_PART.fullmatch(part)
        if match is None:
            raise ValueError(part)
        if match.group(4):
            key, value = "engine", match.group(4)
        else:
            key = "zero" if match.group(3) else match.group(1)
            value = match.group(3) or int(match.group(2))
        if key in out or value == 0:
            raise ValueError(part)
        out[key] = value
    return out
