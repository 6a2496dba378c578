"""Bad input from the user, said in the learner's language: UsageError and its sources.

The CLI prints a UsageError as one line and exits 2 (playground.cli); the app
shows it beside the field it names. `str(exc)` is English (tests and scripts read
it); the line in Spanish travels with it (`es`) and `text(language)` picks one.
Sources: the catalogs (`UsageError.said`), a ParamError carrying its sentence as
data or its Spanish twin (scenarios.param_error, `param_error_text`), and
argparse's own refusals (`argparse_text`); anything else refused with its Spanish
twin as `es` (runtime.engine.faults' FaultError: `as_usage_error`); the OS's reasons
(`os_reason`).

Imports: the catalogs and the pure scenarios.param_error.
"""

from __future__ import annotations

import errno
import re

from playground.i18n import catalog, t
from scenarios.param_error import PHRASES, ParamError, render


class UsageError(ValueError):
    """Bad input from the user: the CLI prints its one line and exits with status 2.
    `field` names the parameter at fault when there is one (the app's form uses it).
    `str(exc)` is English; `es`, when given, the same line in Spanish (`text`)."""

    def __init__(self, message: str, field: str | None = None, *, es: str | None = None):
        super().__init__(message)
        self.field = field
        self.es = es

    @classmethod
    def said(cls, key: str, field: str | None = None, **values: object) -> UsageError:
        """The catalog's `key` (playground.i18n) filled with `values`, in both languages."""
        return cls(t(key, "en", **values), field, es=t(key, "es", **values))

    def text(self, language: str) -> str:
        """The line in `language` (English where no Spanish was written)."""
        return self.es if language == "es" and self.es else str(self)


def phrases(language: str) -> dict[str, str]:
    """scenarios.param_error's phrases in `language` (its catalog's `param.<key>`)."""
    own = {k[len("param.") :]: v for k, v in catalog(language).items() if k.startswith("param.")}
    return {**PHRASES, **own}


def param_error_text(exc: ParamError, language: str) -> str:
    """A ParamError's line in `language`: written from the catalogs (`param.<key>`) when
    it carries its sentence as data, else its Spanish twin, else its English line."""
    if exc.key is not None:
        try:
            return render(exc.key, exc.values, phrases(language))
        except (KeyError, IndexError, ValueError):  # a catalog out of step: say it in English
            return str(exc)
    if language == "es" and exc.es:
        return exc.es
    return str(exc)


def param_usage_error(exc: ParamError) -> UsageError:
    """A ParamError as the UsageError the CLI prints, in both languages."""
    return UsageError(str(exc), exc.field, es=param_error_text(exc, "es"))


def as_usage_error(exc: ValueError) -> UsageError:
    """Refused input as the UsageError the CLI prints: a ParamError as param_usage_error
    says it; any other error with its own Spanish twin (`es`, as runtime.engine.faults'
    FaultError carries) and its `field`, when it has them."""
    if isinstance(exc, UsageError):
        return exc
    if isinstance(exc, ParamError):
        return param_usage_error(exc)
    return UsageError(str(exc), getattr(exc, "field", None), es=getattr(exc, "es", None))


def os_reason(exc: OSError, language: str) -> str:
    """Why the OS refused, in `language`: the catalog's `os.<ERRNO>` (ENOENT, EACCES…)
    where it has one; else the OS's own words (English: exactly `strerror`)."""
    said = exc.strerror or str(exc)
    name = errno.errorcode.get(exc.errno or 0)
    if language == "en" or name is None:
        return said
    return catalog(language).get(f"os.{name}") or said


# argparse's own refusals, as Python 3.11 words them, and the catalog key that says each
# in the learner's language (anything else argparse says is printed as it is).
ARGPARSE_SAYS = (
    (re.compile(r"unrecognized arguments: (?P<args>.*)"), "cli.argparse_unrecognized"),
    (re.compile(r"the following arguments are required: (?P<args>.*)"), "cli.argparse_required"),
    (
        re.compile(
            r"argument (?P<arg>\S+): invalid choice: (?P<value>.*) \(choose from (?P<choices>.*)\)"
        ),
        "cli.argparse_choice",
    ),
    (re.compile(r"argument (?P<arg>\S+): invalid int value: (?P<value>.*)"), "cli.argparse_int"),
    (re.compile(r"argument (?P<arg>\S+): expected one argument"), "cli.argparse_one"),
)


def argparse_text(message: str, language: str) -> str:
    """One of argparse's refusals in `language` (as argparse wrote it if it is not known)."""
    for pattern, key in ARGPARSE_SAYS:
        match = pattern.fullmatch(message)
        if match:
            return t(key, language, **match.groupdict())
    return message
