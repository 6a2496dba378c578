"""`playground trace PATH... [--hardware NAME] [--json] [--export FILE.html]`: a job's own traces.

Part of playground.kineto (issue 39): the CLI front of the reader and the report.
playground.cli_parser calls `add_parser`, playground.cli dispatches to `cmd_trace`.
Bad input (a missing file, a hostile trace, an unknown profile) is a UsageError: one
line, exit 2. Never imports torch.
"""

from __future__ import annotations

import argparse
import sys

from playground.formatting import metric_lines, plain
from playground.i18n import default_language, t
from playground.kineto.reader import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_EVENTS
from playground.kineto.schema import MAX_EVENTS
from playground.usage import UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    from playground.cli_help import attach, hardware_names

    p = sub.add_parser(
        "trace",
        help="read a real job's PyTorch profiler traces: HTA's figures, collectives named "
        "by mechanism, the cost model beside them",
        description=(
            "Read PyTorch profiler (Kineto) JSON traces, plain or gzipped, one per rank, or a "
            f"folder of them (at most {MAX_FILES} files; each at most "
            f"{MAX_FILE_BYTES >> 20} MiB once decompressed and {MAX_EVENTS:,} events; "
            f"{MAX_TOTAL_EVENTS:,} events in all)."
        ),
    )
    p.add_argument("path", nargs="+", help="trace files (*.json, *.json.gz) or folders of them")
    hardware = p.add_argument(
        "--hardware",
        metavar="NAME",
        help="the profile to predict with (default: the one matching the trace's GPU, else an "
        "assumed one, said in the output)",
    )
    attach(hardware, hardware_names)
    p.add_argument("--json", action="store_true", help="print one JSON document (format 2)")
    p.add_argument(
        "--export",
        metavar="FILE.html",
        help="write a self-contained offline Plotly timeline: the ranks above, the prediction "
        "below",
    )
    p.add_argument("--compact", action="store_true", help="with --json: the document on one line")


def cmd_trace(args: argparse.Namespace) -> int:
    from playground.kineto.reader import read_traces
    from playground.kineto.report import build, mechanism_lines
    from playground.report import check_outputs, dumps

    args.trace = None  # check_outputs checks --export and --trace; this command has no --trace
    check_outputs(args)  # before reading: a bad path must not cost a whole read
    report = build(read_traces(args.path), args.hardware)
    if args.export:
        _export(report, args.export)
        print(
            t("cli.exported", path=plain(args.export)), file=sys.stderr if args.json else sys.stdout
        )
    if args.json:
        print(dumps(report.to_doc(), args.compact))
        return 0
    language = default_language()
    for trace in report.traces:
        print(
            t(
                "trace.rank_line",
                language,
                rank=trace.rank,
                world=trace.world_size if trace.world_size is not None else "?",
                backend=plain(trace.backend or "?"),
                device=plain(trace.device or "—"),
                path=plain(trace.path),
            )
        )
    key = "trace.profile_assumed" if report.assumed else "trace.profile"
    print(t(key, language, name=plain(report.profile.name)))
    words = {w: t(f"app.{w}", language) for w in ("measured", "predicted", "error")}
    for line in metric_lines(report.metrics, words, language=language):
        print(plain(line))
    print(t("trace.mechanisms", language))
    for line in mechanism_lines(report, language):
        print(plain(line))
    return 0


def _export(report: object, path: str) -> None:
    from playground.kineto.export import write_trace_html

    try:
        write_trace_html(report, path)  # type: ignore[arg-type]
    except OSError as exc:
        raise UsageError.said(
            "cli.cannot_write", path=plain(path), reason=exc.strerror or exc
        ) from None
