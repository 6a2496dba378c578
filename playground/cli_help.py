"""What the `playground` command says about itself: a lesson's parameters in
`predict|run|show LESSON --help`, `--version`, and shell completion.

playground.cli's part for discovery (issue: a CLI that explains itself). The
parameters come from the lesson's own declaration (playground.lesson_params);
completion is argcomplete's, which asks this same parser on every TAB, so lesson
names, parameter names and choices are always the installed ones. Never imports
torch (`--version` asks a child process for torch's version and CUDA).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from importlib import metadata
from typing import Any

from playground.i18n import default_language, t

SHELLS = ("bash", "zsh", "fish")


class LessonHelp(argparse.Action):
    """-h/--help of a command that takes a lesson: the command's options, then the
    parameters of the lesson named before it (`predict pipeline --help`)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **_: Any):
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0,
                         help=t("cli.help_help"))  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:  # fmt: skip
        from scenarios.registry import LESSONS, get_lesson

        parser.print_help()
        language = default_language()
        name = getattr(namespace, "scenario", None)
        print()
        if name in LESSONS:
            from playground.lesson_params import params_text

            width = min(shutil.get_terminal_size().columns, 100)
            print("\n".join(params_text(get_lesson(name), language, width)))
        else:
            print(t("cli.params_hint", language, command=parser.prog))
        parser.exit()


class Version(argparse.Action):
    """--version: this package's version, torch's, and whether CUDA is available."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **_: Any):
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0,
                         help=t("cli.version_help"))  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:  # fmt: skip
        print(version_line(default_language()))
        parser.exit()


def version_line(language: str) -> str:
    """One line; torch is asked in a child process (this process never imports it)."""
    ask = "import torch; print(torch.__version__, int(torch.cuda.is_available()))"
    try:
        done = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True,
                              timeout=60, check=True)  # fmt: skip
        torch_version, available = done.stdout.split()
    except (OSError, ValueError, subprocess.SubprocessError):
        torch_version, available = "—", "0"
    cuda = t("cli.cuda_yes" if available == "1" else "cli.cuda_no", language)
    own = metadata.version("distributed-ai-playground")
    return t("cli.version", language, version=own, torch=torch_version, cuda=cuda)


def add_completion_parser(sub: Any) -> None:
    p = sub.add_parser("completion", help=t("cli.completion_help"))
    p.add_argument("shell", choices=SHELLS)


def cmd_completion(args: argparse.Namespace) -> int:
    """The script that makes `playground` complete in `args.shell` (argcomplete's)."""
    import argcomplete

    print(argcomplete.shellcode(["playground"], shell=args.shell))
    return 0


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer a TAB (argcomplete sets _ARGCOMPLETE) and exit; else return at once."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser, always_complete_options=False)


# -- completers (argcomplete calls them with the prefix typed so far) ---------------------
def lesson_names(**_: Any) -> Iterable[str]:
    from scenarios.registry import NAMES

    return NAMES


def param_pairs(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> Iterable[str]:
    """`-p` of the lesson named: `name=` for each parameter, its choices after `name=`."""
    from scenarios.registry import LESSONS, get_lesson

    name = getattr(parsed_args, "scenario", None)
    if name not in LESSONS:
        return []
    knobs = dict(get_lesson(name).params.knobs())
    key, eq, _ = prefix.partition("=")
    if not eq:
        return [f"{k}=" for k in knobs]
    knob = knobs.get(key)
    return [f"{key}={c}" for c in knob.choices] if knob is not None else []


def hardware_names(**_: Any) -> Iterable[str]:
    from runtime.sim.profiles import profile_names

    return profile_names()


def attach(action: argparse.Action, completer: Any) -> None:
    action.completer = completer  # type: ignore[attr-defined]  # argcomplete reads it
