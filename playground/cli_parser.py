"""The `playground` command's parser: every command, its options and their help.

playground.cli runs the commands; this module only declares them, so that the
reference (docs/cli.md) and shell completion (playground.cli_help) read the same
parser the command parses with. Never imports torch.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from playground.budget import add_parser as add_budget_parser
from playground.cli_help import (
    LessonHelp,
    Version,
    add_completion_parser,
    attach,
    hardware_names,
    lesson_names,
    param_pairs,
)
from playground.cloud import add_parser as add_cloud_parser
from playground.formatting import plain
from playground.i18n import default_language, t
from playground.kineto.command import add_parser as add_trace_parser
from playground.lab_nodes import add_parser as add_lab_parser
from playground.progress_cli import add_parser as add_progress_parser
from playground.usage import argparse_text


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


def build_parser() -> argparse.ArgumentParser:
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
    add_budget_parser(sub)  # lesson 0's budget guard: playground.budget
    add_trace_parser(sub)  # a real job's profiler traces: playground.kineto
    add_cloud_parser(sub)  # the lab on rented GPUs: playground.cloud
    add_lab_parser(sub)  # two nodes on this machine: playground.lab_nodes
    add_progress_parser(sub)  # each lesson's challenges: playground.progress_cli
    add_completion_parser(sub)
    return parser
