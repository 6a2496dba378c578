"""What `playground predict|run|replay` print: an Outcome as text or JSON, and its exports.

The CLI's output half (playground.cli parses and dispatches). Exports are
written first, so an unwritable path is reported before anything is printed;
the text is the lesson, its params as the learner typed them, and the typed
metrics through the one rendering path (playground.formatting), with control
characters stripped from anything a saved file could carry.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from playground.formatting import metric_lines, plain
from playground.i18n import t
from playground.session import Outcome, UsageError


def report(outcome: Outcome, args: argparse.Namespace) -> int:
    """Write the exports the user asked for, then print the Outcome (text or --json)."""
    try:
        if args.export:
            from playground.export.html import write_html

            write_html(outcome, args.export)
        if args.trace:
            from playground.export.chrome_trace import write_trace

            write_trace(outcome, args.trace)
    except OSError as exc:
        raise UsageError(
            f"cannot write {exc.filename or 'the export'}: {exc.strerror or exc}"
        ) from None
    if args.json:
        print(json.dumps(outcome.to_doc(), allow_nan=False))
    else:
        world = outcome.params.world_size
        print(
            f"{outcome.lesson.name} · {t('cli.ranks')} {world} · {t('cli.profile')} "
            f"{plain(outcome.profile.name)}"
            + (f" · {t('cli.backend')} {plain(outcome.backend)}" if outcome.backend else "")
        )
        typed = outcome.params.typed()
        print(f"{t('cli.params')}: " + ", ".join(f"{k}={plain(v)}" for k, v in typed.items()))
        words = {w: t(f"app.{w}") for w in ("measured", "predicted", "error")}
        for line in metric_lines(outcome.metrics, words):
            print(plain(line))
        if outcome.run_dir:
            print(t("cli.run_dir", path=outcome.run_dir))
    for path in (args.export, args.trace):
        if path:
            print(t("cli.exported", path=path), file=sys.stderr if args.json else sys.stdout)
    return 0


def check_outputs(args: argparse.Namespace) -> None:
    """--export and --trace must name files this user can write: checked before any work,
    by writing (and removing) a probe file beside them."""
    for flag, path in (("--export", args.export), ("--trace", args.trace)):
        if path is None:
            continue
        where = Path(path)
        if not path.strip():
            raise UsageError(f"{flag} '': give a file name, e.g. {flag} run.html")
        if where.is_dir():
            raise UsageError(f"{flag} {plain(path)}: is a directory; give a file name")
        parent = where.parent if str(where.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError(f"{flag} {plain(path)}: no directory {plain(parent)}")
        try:
            with tempfile.NamedTemporaryFile(dir=parent, prefix=".playground-probe-"):
                pass
            if where.exists() and not os.access(where, os.W_OK):
                raise PermissionError(f"{where} is not writable")
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise UsageError(f"{flag} {plain(path)}: cannot write there ({reason})") from None
