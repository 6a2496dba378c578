"""The `playground` command's parser: every command, its options and their help.

playground.cli runs the commands; this module only declares them, so that the
reference (docs/cli.md) and shell completion (playground.cli_help) read the same
parser the command parses with. Never imports torch.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from playground.cli_help import (
    LessonHelp,
    Version,
    add_completion_parser,
    attach,
    hardware_names,
    lesson_names,
    param_pairs,
)
from playground.formatting import plain
from playground.i18n import default_language, t
from playground.usage import argparse_text

# The commands whose parser lives with them: command -> module declaring `add_parser`.
# Their modules (and what they import) load only when the parser is wanted whole.
ELSEWHERE = {
    "budget": "playground.budget",  # lesson 0's budget guard
    "trace": "playground.kineto.command",  # a real job's profiler traces
    "cloud": "playground.cloud",  # the lab on rented GPUs
    "lab": "playground.lab_nodes",  # two nodes on this machine
    "progress": "playground.progress_cli",  # each lesson's challenges
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, status 2: no usage dump
        language = default_language()
        said = t("cli.see_help", language, error=plain(argparse_text(message, language)))
        print(f"playground: {t('cli.error', language)}: {said}", file=sys.stderr)
        raise SystemExit(2)


def _scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-h", "--help", action=LessonHelp)
    attach(p.add_argument("scenario", help="scenario name (see `playground list`)"), lesson_names)
    pairs = p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a scenario parameter, e.g. -p size=4MiB (repeatable; `--help` after the "
        "scenario lists them)",
    )
    attach(pairs, param_pairs)
    p.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help="how many ranks: shorthand for -p ranks=N (the pipeline's stages=N)",
    )


def _json_args(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--json", action="store_true", help=help)
    p.add_argument(
        "--compact",
        action="store_true",
        help="with --json: the document on one line (default: indented, for head and less)",
    )


def _output_args(p: argparse.ArgumentParser) -> None:
    _json_args(p, "print one JSON document (indented) instead of a summary")
    p.add_argument(
        "--export", metavar="FILE.html", help="write a self-contained offline Plotly timeline"
    )
    p.add_argument("--trace", metavar="FILE.json", help="write Chrome trace-event JSON (Perfetto)")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; or, given the command about to run (one of those declared
    here), that command's with the others' by name only: `predict` then starts without
    importing what `cloud` or `budget` need. Built once per command and language (its
    help is in the learner's language): a process that runs many commands (the app's
    tests, a script calling `main`) parses each with the same one, as parsing never
    changes a parser. A TAB's completion (argcomplete) rewrites the parser's actions
    as it answers: it gets a parser of its own."""
    if "_ARGCOMPLETE" in os.environ:
        return _built.__wrapped__(command, default_language())
    return _built(command, default_language())


@functools.lru_cache(maxsize=16)
def _built(command: str | None, language: str) -> argparse.ArgumentParser:
    from runtime.sim.profiles import profile_names

    parser = _Parser(prog="playground", description=t("cli.description"))
    parser.add_argument("--version", action=Version)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    p = sub.add_parser("list", help="list the lessons and their scenarios")
    attach(p.add_argument("scenario", nargs="?", help=t("cli.list_params_help")), lesson_names)
    _json_args(p, "the lessons as one JSON document")

    p = sub.add_parser(
        "predict",
        help="simulate a scenario with the cost model (no torch, no ranks)",
        add_help=False,
    )
    _scenario_args(p)
    hardware = p.add_argument(
        "--hardware",
        metavar="NAME",
        help=f"a hardware profile: {', '.join(profile_names())} (default: this machine's calibration)",
    )
    attach(hardware, hardware_names)
    _output_args(p)

    p = sub.add_parser(
        "run",
        help="run a scenario for real on N rank processes, beside its prediction",
        add_help=False,
    )
    _scenario_args(p)
    p.add_argument(
        "--backend",
        choices=["auto", "gloo", "nccl"],
        default="auto",
        help="gloo on CPU, nccl on GPUs; auto picks nccl when CUDA is present",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        help="inject a failure: kill:rank=R,after=0.5s or hang:rank=R,after=1s, or a "
        "straggler: slow:rank=R,factor=F; in lessons with steps also kill:rank=R,step=K, "
        "kill:rank=R,during=checkpoint, corrupt:checkpoint=latest (repeatable)",
    )
    p.add_argument("--metrics-port", type=int, metavar="PORT", help=t("cli.metrics_port_help"))
    hardware = p.add_argument(
        "--hardware", metavar="NAME", help="predict with a named profile instead of calibration"
    )
    attach(hardware, hardware_names)
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the run's checkpoints (a finished run's are removed; its logs stay)",
    )
    p.add_argument(
        "--host",
        metavar="ADDR",
        help="rendezvous over TCP on this address and let the ranks listen there (default: "
        "loopback only, with no network listener)",
    )
    _output_args(p)

    p = sub.add_parser(
        "replay", help="show a saved run: a `run --json` file or a torchrun --out dir"
    )
    p.add_argument("path")
    _output_args(p)

    p = sub.add_parser(
        "show",
        help="print the Program: each rank's actions in order (F0 F1 B0 …, sends, collectives)",
        add_help=False,
    )
    _scenario_args(p)
    _json_args(p, "every action of every rank as JSON")

    p = sub.add_parser(
        "calibrate", help="measure alpha, beta, gamma on this machine and cache them"
    )
    p.add_argument(
        "--ranks", type=int, default=4, metavar="N", help="world size to calibrate (default 4)"
    )
    p.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    _json_args(p, "what was measured as one JSON document")
    for name, module in ELSEWHERE.items():
        if command is None or command in ELSEWHERE:
            add: Callable[[argparse._SubParsersAction], object]
            add = importlib.import_module(module).add_parser
            add(sub)
        else:
            sub.add_parser(name)  # a name to tell apart; never parsed in this process
    add_completion_parser(sub)
    return parser
