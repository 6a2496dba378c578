"""The `playground` command: the app, and the same scenarios headless.

    playground                          the terminal app
    playground list [--json]
    playground predict SCENARIO [-p k=v]... [--ranks N] [--hardware NAME] [--json]
    playground run SCENARIO [-p k=v]... [--ranks N] [--backend auto|gloo|nccl]
                   [--fault SPEC]... [--export FILE.html] [--trace FILE.json] [--json]
                   [--metrics-port PORT]
    playground replay PATH [--json] [--export ...] [--trace ...]
    playground show SCENARIO [-p k=v]... [--ranks N] [--json]
    playground calibrate [--ranks N] [--backend ...] [--json]

`--json` prints one indented document (with `--compact`, on one line). Exit status: 0
success; 2 bad input (one line on stderr, in the learner's language, saying what is
wrong and what is allowed, never a traceback); 1 a failed run (which rank, why);
130 interrupted (SIGINT), 143 terminated (SIGTERM: its ranks end too). Output piped into a reader that stops early (`| head -1`)
ends quietly.

The front end of docs/design.md's picture; never imports torch (`predict` stays
well under a second). Textual and Plotly are imported only by the commands
that need them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from playground.cli_params import raw_params
from playground.formatting import plain
from playground.i18n import default_language, t
from playground.usage import UsageError
from runtime.engine.rundirs import private_umask

if TYPE_CHECKING:
    from playground.outcome import Outcome

SHOW_MAX_RANKS = 256


# -- commands -------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    from playground.report import dumps
    from scenarios.registry import lessons

    lang = default_language()
    if args.scenario is not None:
        return _list_params(args, lang)
    infos = lessons()
    if args.json:
        doc = [
            {
                "lesson": i.lesson,
                "scenario": i.scenario,
                "available": i.available,
                "title": i.title,
                "summary": i.summary,
            }
            for i in infos
        ]
        print(dumps(doc, args.compact))
        return 0
    for info in infos:
        status = t("app.available") if info.available else t("app.planned")
        print(f"{info.lesson}  {info.scenario:<16} {status:<14} {info.title[lang]}")
    return 0


def _list_params(args: argparse.Namespace, lang: str) -> int:
    from playground.report import dumps

    """`list LESSON`: its parameters (playground.lesson_params), as text or data."""
    from playground.lesson_params import param_rows, params_text
    from playground.session import resolve

    lesson, _ = resolve(args.scenario, {}, "predict")  # an unknown name: one line, exit 2
    if args.json:
        rows = [row.to_dict() for row in param_rows(lesson, lang)]
        print(dumps({"scenario": lesson.name, "params": rows}, args.compact))
    else:
        print("\n".join(params_text(lesson, lang)))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from playground import session
    from playground.report import check_outputs, report

    check_outputs(args)
    outcome = session.predict(args.scenario, raw_params(args), hardware=args.hardware)
    status = report(outcome, args)
    say_challenges(outcome, args, ran=False)
    return status


def cmd_run(args: argparse.Namespace) -> int:
    from playground import session
    from playground.report import check_outputs, report
    from runtime.engine.launch import RunFailed

    def announce(world: int) -> None:
        print(t("cli.calibrating", n=world), file=sys.stderr)

    check_outputs(args)  # before any rank starts: a bad path must not cost a whole run
    raw = raw_params(args)
    from playground.metrics_server import serving

    try:  # --metrics-port: listening (or refused) before any rank starts, for the run's life
        with serving(args.scenario, raw, args.metrics_port) as on_message:
            outcome = session.run(
                args.scenario,
                raw,
                backend=args.backend,
                faults=args.fault,
                hardware=args.hardware,
                on_calibrate=announce,
                keep=args.keep,
                host=args.host,
                on_message=on_message,
            )
    except RunFailed as exc:
        print(f"playground: {t('cli.run_failed', error=exc)}", file=sys.stderr)
        return 1
    status = report(outcome, args)
    say_challenges(outcome, args, ran=outcome.measured is not None)
    return status


def say_challenges(outcome: Outcome, args: argparse.Namespace, ran: bool) -> None:
    """The lesson's challenges this outcome met, kept as the app keeps them (after the
    report; on stderr beside `--json`, whose stdout is one document)."""
    from playground.challenges import outcome_lines

    out = sys.stderr if args.json else sys.stdout
    for line in outcome_lines(outcome.lesson, outcome.params, outcome.metrics, ran):
        print(line, file=out)


def cmd_replay(args: argparse.Namespace) -> int:
    from playground.report import check_outputs, report
    from playground.saved import replay

    check_outputs(args)
    return report(replay(args.path), args)


def cmd_show(args: argparse.Namespace) -> int:
    from playground.program_text import program_doc, program_lines
    from playground.report import dumps
    from playground.session import resolve

    lesson, params = resolve(args.scenario, raw_params(args), "predict")
    if params.world_size > SHOW_MAX_RANKS:  # a line per rank: beyond this, nobody reads it
        raise UsageError.said("cli.show_too_many", most=SHOW_MAX_RANKS, n=params.world_size)
    program = lesson.build(params)
    if args.json:
        doc = {"scenario": lesson.name, "params": params.to_dict(), **program_doc(program)}
        print(dumps(doc, args.compact))
        return 0
    typed = ", ".join(f"{k}={plain(v)}" for k, v in params.typed().items())
    print(
        f"{lesson.name} · {t('cli.ranks')} {program.world_size} · {len(program)} {t('cli.actions')}"
    )
    print(f"{t('cli.params')}: {typed}")
    print(t("cli.show_legend"))
    width = os.get_terminal_size().columns if sys.stdout.isatty() else 100
    for line in program_lines(program, width):
        print(line)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from playground import session
    from playground.report import report_calibration
    from runtime.engine.launch import RunFailed

    if not 1 <= args.ranks <= 16:
        raise UsageError.said("cli.calibrate_ranks", ranks=args.ranks)
    try:
        model = session.calibrate(args.ranks, args.backend)
    except RunFailed as exc:
        print(f"playground: {t('cli.run_failed', error=exc)}", file=sys.stderr)
        return 1
    report_calibration(model, args.json, args.compact)
    return 0


def _start_app() -> int:
    from runtime.engine.launch import prepare

    prepare()  # before Textual replaces sys.stderr (docs/design.md)
    from playground.app import PlaygroundApp
    from playground.metrics_server import serve_app

    with serve_app() as metrics:  # PLAYGROUND_METRICS_PORT: bound before the first frame
        PlaygroundApp(metrics=metrics).run()
    return 0


COMMANDS = {
    "list": cmd_list,
    "predict": cmd_predict,
    "run": cmd_run,
    "replay": cmd_replay,
    "show": cmd_show,
    "calibrate": cmd_calibrate,
}
# Commands that live in their own modules, imported only when asked for: the app's first
# frame and `--help` do not pay for the budget guard, the cloud lab or the trace reader.
ELSEWHERE = {
    "budget": "playground.budget:cmd_budget",
    "trace": "playground.kineto.command:cmd_trace",
    "cloud": "playground.cloud:cmd_cloud",
    "lab": "playground.lab_nodes:cmd_lab",
    "progress": "playground.progress_cli:cmd_progress",
    "completion": "playground.cli_help:cmd_completion",
}


def command(name: str) -> Callable[[argparse.Namespace], int]:
    """The function that runs command `name`."""
    if name in COMMANDS:
        return COMMANDS[name]
    module, function = ELSEWHERE[name].split(":")
    return getattr(importlib.import_module(module), function)


def _command_in(given: list[str]) -> str | None:
    """The command `given` names first, if this module runs it (the parser then loads
    the others' by name only); None while a shell completes, or for anything else."""
    if "_ARGCOMPLETE" in os.environ or not given or given[0] not in COMMANDS:
        return None
    return given[0]


def main(argv: list[str] | None = None) -> int:
    from playground.worker_figures import check_settings

    private_umask()  # what a command writes under the state dir is the user's alone
    given = sys.argv[1:] if argv is None else argv
    if not given and "_ARGCOMPLETE" not in os.environ:
        # The app alone: its first frame does not wait for every command's parser.
        args = argparse.Namespace(command=None)
    else:
        from playground.cli_help import complete
        from playground.cli_parser import build_parser

        parser = build_parser(_command_in(given))
        complete(parser)  # a TAB asking (argcomplete): answered, then exit
        args = parser.parse_args(given)
    if args.command in ("run", "calibrate"):  # commands that start ranks: SIGTERM as SIGINT
        from runtime.engine.spawn import end_on_sigterm

        end_on_sigterm()
    try:
        check_settings()  # PLAYGROUND_STRAGGLER_RATIO, in one line before anything runs
        if args.command is None:
            return _start_app()
        status = command(args.command)(args)
        sys.stdout.flush()  # a closed pipe shows up here, not at exit
        return status
    except UsageError as exc:
        language = default_language()
        print(
            f"playground: {t('cli.error', language)}: {plain(exc.text(language))}", file=sys.stderr
        )
        return 2
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM as runtime.engine.spawn.Terminated
        term = type(exc).__name__ == "Terminated"
        print(f"playground: {t('cli.terminated' if term else 'cli.cancelled')}", file=sys.stderr)
        return 143 if term else 130
    except BrokenPipeError:
        # The reader went away (`| head -1`): stop quietly, as cat and grep do. Point
        # stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


if __name__ == "__main__":
    sys.exit(main())
