"""A lesson's parameters: declared once, as a frozen dataclass, parsed the same everywhere.

The first part of docs/design.md's lesson contract. Each lesson declares its
parameters as a `Params` subclass whose fields carry, through `field` metadata,
a `Knob`: the kind (integer, size with units, duration, choice…) and the bounds
of a real run and of `predict` (the help a learner reads, in Spanish and
English, is in the lesson's texts.toml: scenarios.texts). The CLI, the app's
form, torchrun and the ranks all receive the same typed object; the values
cross process boundaries as that object (spawn) or as its `to_dict()` (JSON),
which `parse` reads back with the same checks.

A field whose default is itself a `Params` (the MiniGPT's shape, scenarios
/shape.py) is a group: its knobs are typed at top level (`-p hidden=128`) and
its own rules are checked with the lesson's.

Bad input raises ParamError (scenarios.param_error) naming the field, with one
line that says what is allowed: the form shows it under that field, the CLI
prints it, in the learner's language, and exits 2.

Imports: runtime's pure part only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal, Self

from runtime.sim.units import (
    format_bytes,
    parse_bytes,
    parse_count,
    parse_duration,
    typed_bytes,
    typed_duration,
)
from scenarios.param_error import ParamError, Parts

Mode = Literal["run", "predict"]
Kind = Literal["int", "float", "bytes", "duration", "choice", "choices", "count", "text"]
KNOB = "knob"


def shown(text: Any) -> str:
    """A value as the user typed it, on one printable line (repr if it is not)."""
    text = str(text)
    return text if text.isprintable() else repr(text)


def _number(value: float) -> str:
    """1048576, not 1.04858e+06: a bound the learner reads and types back."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Knob:
    """How one field is typed and bounded."""

    kind: Kind
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None  # on a real run (what this machine runs in a lesson's time)
    predict_maximum: float | None = None  # on `predict`, when it goes further

    def upper(self, mode: Mode) -> float | None:
        if mode == "predict" and self.predict_maximum is not None:
            return self.predict_maximum
        return self.maximum

    def allowed_parts(self, mode: Mode) -> Parts:
        """What a value may be, as PHRASES parts (the edge words them in any language)."""
        if self.kind in ("choice", "choices"):
            key = "one_of_list" if self.kind == "choices" else "one_of"
            return [(key, {"choices": ", ".join(self.choices)})]
        if self.kind == "count":
            if self.maximum:
                return [("count_up_to", {"top": f"{self.maximum // 10**12:g}"})]
            return [("count_any", {})]
        low, high = self.minimum, self.upper(mode)
        show = {"bytes": format_bytes, "duration": typed_duration}.get(self.kind, _number)
        parts: Parts = [(f"noun_{self.kind}", {})]
        if low is not None and high is not None:
            parts.append(("range", {"low": show(low), "high": show(high)}))
        elif low is not None:
            parts.append(("at_least", {"low": show(low)}))
        if self.kind in ("bytes", "duration"):
            parts.append((f"unit_{self.kind}", {}))
        return parts

    def parse(self, name: str, text: Any, mode: Mode) -> Any:
        """The typed value of `text` (a string as typed, or an already typed value)."""
        said = {"name": name, "value": shown(text), "allowed": self.allowed_parts(mode)}
        wrong = ParamError(name, key="must_be", values=said)
        if isinstance(text, str) and not text.isprintable():
            raise wrong  # a newline or an escape sequence is never part of a value
        if self.kind == "choice":
            if str(text) not in self.choices:
                raise wrong
            return str(text)
        if self.kind == "choices":
            items = text if isinstance(text, list | tuple) else str(text).split(",")
            picked = tuple(str(t).strip() for t in items if str(t).strip())
            if not picked or any(t not in self.choices for t in picked):
                raise wrong
            if len(set(picked)) != len(picked):
                raise ParamError(name, key="list_once", values=said)
            return picked
        if self.kind == "count":
            if text == "auto":
                return "auto"
            try:
                value = text if _is_int(text) else parse_count(str(text))
            except ValueError:
                raise wrong from None
            if value < 1 or (self.maximum is not None and value > self.maximum):
                raise wrong
            return value
        try:
            value = self._number(text)
        except (ValueError, OverflowError):
            raise wrong from None
        if isinstance(value, float) and not math.isfinite(value):
            raise wrong
        low, high = self.minimum, self.upper(mode)
        if (low is not None and value < low) or (high is not None and value > high):
            if mode == "run" and self.predict_maximum is not None:
                raise ParamError(name, key="run_only", values=said)
            raise wrong
        return value

    def _number(self, text: Any) -> float:
        if self.kind == "int":
            return text if _is_int(text) else int(str(text), 10)
        if self.kind == "float":
            return float(text)
        if self.kind == "bytes":
            return text if _is_int(text) else parse_bytes(str(text))
        if isinstance(text, int | float) and not isinstance(text, bool):
            return float(text)
        return parse_duration(str(text))

    def format(self, value: Any) -> str:
        """The value as the learner would type it back: 4MiB, 3h, gpipe,1f1b."""
        if self.kind == "bytes":
            return typed_bytes(value)
        if self.kind == "duration":
            return typed_duration(value)
        if self.kind == "choices":
            return ",".join(value)
        if self.kind == "float":
            return _number(value)
        return str(value)

    def predict_extremes(self) -> list[str]:
        """The values at the far end of what `predict` accepts, as typed: the predict
        maximum, each choice, or every choice at once (benchmarks/predict_max.py)."""
        if self.kind == "choice":
            return list(self.choices)
        if self.kind == "choices":
            return [",".join(self.choices)]
        top = self.upper("predict")
        return [] if top is None else [self.format(top if self.kind == "float" else int(top))]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _knob(kind: Kind, default: Any, **bounds: Any) -> Any:
    return field(default=default, metadata={KNOB: Knob(kind, **bounds)})


def integer(
    default: int,
    minimum: int | None = None,
    maximum: int | None = None,
    predict_maximum: int | None = None,
) -> Any:
    """An integer field; `maximum` bounds a real run, `predict_maximum` (if larger) predict."""
    return _knob("int", default, minimum=minimum, maximum=maximum, predict_maximum=predict_maximum)


# The most a size or a duration takes when its knob names no bound: past them a value
# means nothing to a lesson (512 TiB of memory; a hundred thousand hours, eleven years,
# between failures or for one save), and 1e400 is not a number at all.
MAX_SIZE = 512 * 2**40
MAX_DURATION = 100_000 * 3600.0


def size(
    default: int,
    minimum: int = 0,
    maximum: int = MAX_SIZE,
    predict_maximum: int | None = None,
) -> Any:
    """A size in bytes, typed with or without units (4096, 64KiB, 4MiB, 80GB)."""
    return _knob(
        "bytes", default, minimum=minimum, maximum=maximum, predict_maximum=predict_maximum
    )


def duration(default: float, minimum: float | None = None, maximum: float = MAX_DURATION) -> Any:
    """A duration in seconds, typed with units (0.5s, 90s, 19min, 3h)."""
    return _knob("duration", default, minimum=minimum, maximum=maximum)


def number(
    default: float,
    minimum: float | None = None,
    maximum: float | None = None,
    predict_maximum: float | None = None,
) -> Any:
    """A real number (a price in dollars, TFLOP/s, a request rate, a fraction): 0.35,
    1.5, 312; `maximum` bounds a real run, `predict_maximum` predict."""
    return _knob(
        "float", default, minimum=minimum, maximum=maximum, predict_maximum=predict_maximum
    )


def choice(default: str, options: Iterable[str]) -> Any:
    """One of a few names."""
    return _knob("choice", default, choices=tuple(options))


def choices(default: tuple[str, ...], options: Iterable[str]) -> Any:
    """One or several of a few names, typed as a comma list (each once)."""
    return _knob("choices", default, choices=tuple(options))


# The most a count takes: far past any model (a quadrillion parameters), far below where
# a lesson's byte arithmetic leaves floats (ZeRO's predict at params=1e307 raised an
# OverflowError traceback).
MAX_COUNT = 10**15


def count(default: int | str, maximum: int = MAX_COUNT) -> Any:
    """A count such as a model's parameters: 7e9, 7B, 70B, 125M, or `auto`."""
    return _knob("count", default, maximum=maximum)


@dataclass(frozen=True)
class Params:
    """Base of every lesson's params; subclasses declare fields with the helpers above."""

    # Other names a field answers to (ZeRO's N_d is `dp`): {"dp": "ranks"}.
    aliases: ClassVar[dict[str, str]] = {}
    # The field `--ranks N` sets (the pipeline's ranks are its stages).
    ranks_field: ClassVar[str] = "ranks"

    # -- what is declared ---------------------------------------------------------
    @classmethod
    def knobs(cls) -> list[tuple[str, Knob]]:
        """Every knob, groups flattened, in declaration order."""
        out: list[tuple[str, Knob]] = []
        for f in fields(cls):
            if KNOB in f.metadata:
                out.append((f.name, f.metadata[KNOB]))
            elif isinstance(f.default, Params):
                out.extend(type(f.default).knobs())
        return out

    @classmethod
    def knob_groups(cls) -> list[tuple[str | None, list[tuple[str, Knob]]]]:
        """The lesson's own knobs (group None), then each shared group's knobs under its
        field's name (`model`: the MiniGPT's shape), in declaration order (the form)."""
        own = [(f.name, f.metadata[KNOB]) for f in fields(cls) if KNOB in f.metadata]
        groups = [(f.name, type(f.default).knobs()) for f in fields(cls)
                  if KNOB not in f.metadata and isinstance(f.default, Params)]  # fmt: skip
        return [(None, own), *groups]

    @classmethod
    def knob(cls, name: str) -> Knob:
        return dict(cls.knobs())[name]

    # -- parsing --------------------------------------------------------------------
    @classmethod
    def parse(cls, raw: Mapping[str, Any], mode: Mode) -> Self:
        """Defaults filled in, every value parsed and bounded, every rule checked."""
        raw = dict(raw)
        for alias, target in cls.aliases.items():
            if alias in raw:
                value = raw.pop(alias)
                if target in raw and str(raw[target]) != str(value):
                    said = {"value": shown(value), "other": shown(raw[target])}
                    raise ParamError(
                        alias, key="alias", values={"alias": alias, "target": target, **said}
                    )
                raw[target] = value
        names = [name for name, _ in cls.knobs()]
        unknown = sorted(set(raw) - set(names))
        if unknown:
            said = {"value": shown(unknown[0]), "names": ", ".join(names)}
            raise ParamError(None, key="unknown", values=said)
        params = cls()._filled(raw, mode)
        params._check_all(mode)
        return params

    def _filled(self, raw: Mapping[str, Any], mode: Mode) -> Self:
        values: dict[str, Any] = {}
        for f in fields(self):
            current = getattr(self, f.name)
            if KNOB in f.metadata:
                values[f.name] = f.metadata[KNOB].parse(f.name, raw.get(f.name, current), mode)
            elif isinstance(current, Params):
                values[f.name] = current._filled(raw, mode)
        return replace(self, **values)

    def _check_all(self, mode: Mode) -> None:
        for f in fields(self):
            group = getattr(self, f.name)
            if isinstance(group, Params):
                group._check_all(mode)
        self.check(mode)

    def check(self, mode: Mode) -> None:
        """Rules between fields; raise ParamError naming the field (never change a value)."""

    # -- reading -----------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        """How many ranks a real run starts."""
        return int(getattr(self, self.ranks_field))

    def values(self) -> dict[str, Any]:
        """Every knob's typed value, groups flattened."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Params):
                out.update(value.values())
            elif KNOB in f.metadata:
                out[f.name] = value
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (lists for comma lists); `parse(to_dict())` gives the same params."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.values().items()}

    def typed(self) -> dict[str, str]:
        """Every knob as the learner would type it (the form's fields, the CLI's echo)."""
        knobs = dict(self.knobs())
        return {name: knobs[name].format(value) for name, value in self.values().items()}
