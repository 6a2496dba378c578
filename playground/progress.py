"""The learner's progress through each lesson's challenges, kept on this machine.

Part of `playground/` in docs/design.md (issue 40, item 2). One JSON file per lesson,
`$XDG_STATE_HOME/playground/progress/<lesson>.json` (by default under
~/.local/state, the state directory the runs already live in: runtime.engine.rundirs),
holding for each challenge whether it was met, the learner's last answer, whether that
answer still waits for a run, and the last comparison shown (yours, the model's, the
measurement). `playground progress` lists it; `--reset LESSON` removes a lesson's file.

A saved file is untrusted (docs/security.md): it is read bounded
(runtime.engine.files.read_bounded), decoded by a msgspec schema with bounded strings
free of control characters, and a file that does not pass is reported, never trusted
(the app then starts that lesson afresh and says so). Files are written whole
(write_text_atomic) and private (0600), their folder 0700.

Imports: msgspec and runtime.engine.files (stdlib); never torch.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import msgspec
from msgspec import Meta, Struct

from runtime.engine.files import make_private_dir, read_bounded, write_text_atomic

VERSION = 1
LIMIT = 64 * 1024  # bytes of one lesson's file: room for 64 challenges' longest answers
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")

# No control characters (C0, DEL, C1): nothing read back can drive the terminal.
_PRINTABLE = r"^[^\x00-\x1f\x7f-\x9f]*$"
Short = Annotated[str, Meta(max_length=64, pattern=_PRINTABLE)]
Id = Annotated[str, Meta(max_length=40, pattern=r"^[a-z0-9][a-z0-9-]*$")]


class ChallengeState(Struct, forbid_unknown_fields=True):
    """One challenge: met, the last answer (as typed), whether it waits for a run, and
    the last comparison shown: the learner's answer, the model's, the measurement."""

    met: bool = False
    answer: Short | None = None
    pending: bool = False
    yours: Short | None = None
    model: Short | None = None
    measured: Short | None = None


class LessonProgress(Struct, forbid_unknown_fields=True):
    version: Annotated[int, Meta(ge=1, le=VERSION)]
    lesson: Annotated[str, Meta(max_length=40, pattern=r"^[a-z0-9][a-z0-9-]*$")]
    challenges: Annotated[dict[Id, ChallengeState], Meta(max_length=64)] = {}

    def state(self, challenge_id: str) -> ChallengeState:
        if challenge_id not in self.challenges:
            self.challenges[challenge_id] = ChallengeState()
        return self.challenges[challenge_id]


class ProgressError(ValueError):
    """A progress file that cannot be trusted: one line, English (`str`) and Spanish."""

    def __init__(self, en: str, es: str):
        super().__init__(en)
        self.es = es

    def text(self, language: str) -> str:
        return self.es if language == "es" else str(self)


def folder() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "playground" / "progress"


def path_of(lesson: str) -> Path:
    if not NAME.match(lesson):  # a lesson name is never a path
        raise ValueError(f"not a lesson name: {lesson!r}")
    return folder() / f"{lesson}.json"


def load(lesson: str) -> LessonProgress:
    """The lesson's progress (empty if none was kept); ProgressError if its file is not
    one the playground wrote (too large, not JSON, a field out of the schema)."""
    path = path_of(lesson)
    try:
        data = read_bounded(path, LIMIT)
    except FileNotFoundError:
        return LessonProgress(VERSION, lesson)
    except OSError as exc:
        raise ProgressError(
            f"the progress file {path} cannot be read ({exc.strerror or exc}): "
            f"reset it with `playground progress --reset {lesson}`",
            f"el archivo de progreso {path} no se puede leer ({exc.strerror or exc}): "
            f"bórrelo con `playground progress --reset {lesson}`",
        ) from None
    try:
        progress = msgspec.json.decode(data, type=LessonProgress)
    except msgspec.DecodeError as exc:
        detail = "".join(ch if ch.isprintable() else "?" for ch in str(exc))[:120]
        raise ProgressError(
            f"the progress file {path} is not valid ({detail}): "
            f"reset it with `playground progress --reset {lesson}`",
            f"el archivo de progreso {path} no es válido ({detail}): "
            f"bórrelo con `playground progress --reset {lesson}`",
        ) from None
    if progress.lesson != lesson:
        raise ProgressError(
            f"the progress file {path} belongs to lesson {progress.lesson}: "
            f"reset it with `playground progress --reset {lesson}`",
            f"el archivo de progreso {path} es de la lección {progress.lesson}: "
            f"bórrelo con `playground progress --reset {lesson}`",
        )
    return progress


def save(progress: LessonProgress) -> Path:
    """Write the lesson's progress whole, 0600, in its 0700 folder."""
    path = path_of(progress.lesson)
    make_private_dir(path.parent)
    write_text_atomic(path, msgspec.json.encode(progress).decode("utf-8"))
    return path


def reset(lesson: str) -> bool:
    """Forget the lesson's progress; whether there was any."""
    try:
        os.unlink(path_of(lesson))
    except FileNotFoundError:
        return False
    return True
