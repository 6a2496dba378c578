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
import re
import sys
import tempfile
from pathlib import Path

from playground.formatting import metric_lines, plain
from playground.i18n import default_language, t
from playground.outcome import Outcome
from playground.prediction_error import budget_lines, budget_words, staleness_line
from playground.session import UsageError
from runtime.engine.files import NotRegularFile, check_regular
from runtime.fit import calibration, conditions
from runtime.sim.costmodel import CostModel
from runtime.sim.units import format_seconds
from scenarios.failure_resume.rates import ResumeRates
from scenarios.metrics import finite
from scenarios.pipeline.rates import PipelineRates


def report(outcome: Outcome, args: argparse.Namespace) -> int:
    """Write the exports the user asked for, then print the Outcome (text or --json)."""
    try:
        if args.export:
            from playground.export.html import write_html

            write_html(outcome, args.export)
        if args.trace:
            from playground.export.chrome_trace import write_trace

            write_trace(outcome, args.trace)
    except NotRegularFile as exc:  # became a FIFO or a device since check_outputs
        flag = "--export" if str(exc.filename) == str(args.export) else "--trace"
        raise _not_regular(flag, exc.filename, exc.slug) from None
    except OSError as exc:
        path = plain(str(exc.filename or args.export or args.trace))
        raise UsageError.said("cli.cannot_write", path=path, reason=exc.strerror or exc) from None
    if args.json:
        # finite(): strict JSON whatever a lesson computed. A curve's lines and marks held
        # NaN and inf at extreme params (failure-resume, mtbf=1e300s), and allow_nan=False
        # ended in a ValueError traceback.
        print(dumps(finite(outcome.to_doc()), compact=args.compact))
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
        for line in metric_lines(outcome.metrics, words, language=default_language()):
            print(plain(line))
        language = default_language()
        for line in budget_lines(outcome.budget_rows, budget_words(language)):
            print(plain(line))
        # A stale calibration (or one that recorded no spread), and how to calibrate again.
        stale = staleness_line(outcome.calibration, world, language)
        if stale is not None:
            print(plain(stale))
        if outcome.workers is not None:  # each rank's figures, and the straggler
            from playground.workers_text import text_lines

            for line in text_lines(outcome.workers, default_language()):
                print(plain(line))
        if outcome.run_dir:
            # plain: a replayed torchrun dir's name is whatever the archive held.
            print(t("cli.run_dir", path=plain(outcome.run_dir)))
    for path in (args.export, args.trace):
        if path:
            out = sys.stderr if args.json else sys.stdout
            print(t("cli.exported", path=plain(path)), file=out)
    return 0


def dumps(doc: object, compact: bool = False) -> str:
    """A `--json` document: indented, each record that fits a line (a span, a metric, a
    point) on a line of its own (readable with head, less and grep), or on one line with
    `--compact`. Strict JSON (no NaN); accented text as it is, anything a terminal could
    act on (a bidi override, a C1 control, a lone surrogate) escaped."""
    text = _line(doc) if compact else _indented(doc, 0)
    return UNSAFE.sub(_escaped, text)


RECORD_WIDTH = 480  # a record up to this many characters is one line (a span); longer opens


def _line(value: object, encoder: json.JSONEncoder | None = None) -> str:
    return (encoder or _COMPACT).encode(value)


_COMPACT = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
_RECORD = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(", ", ": "))


def _indented(value: object, depth: int) -> str:
    """`value` as indented JSON, where a record that fits RECORD_WIDTH (a span, a metric,
    a point) is written on one line by the C encoder: `indent=` would run Python's over
    every value of a large timeline."""
    pad = "  " * depth
    if depth >= 1 and not (isinstance(value, dict | list) and value):
        return _line(value, _RECORD)
    if depth >= 1 and len(value) <= RECORD_WIDTH // 4:  # type: ignore[arg-type]
        line = _line(value, _RECORD)  # (more items than that cannot fit: not tried)
        if len(line) <= RECORD_WIDTH:
            return line
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value):
        items = (f"{pad}  {_line(k)}: {_indented(v, depth + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value:
        items = (f"{pad}  {_indented(v, depth + 1)}" for v in value)
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return _line(value, _RECORD)


UNSAFE = re.compile(r"[^\x20-\x7e\n]")  # not printable ASCII: looked at one by one


def _escaped(match: re.Match[str]) -> str:
    """A character as JSON writes it: itself if printable, else its \\u escape(s)."""
    char = match.group()
    if char.isprintable():
        return char
    code = ord(char)
    if code > 0xFFFF:  # a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _not_regular(flag: str, path: object, slug: str) -> UsageError:
    said = {
        lang: t(
            "cli.output_not_regular",
            lang,
            flag=flag,
            path=plain(path),
            kind=t(f"files.kind.{slug}", lang),
        )
        for lang in ("en", "es")
    }
    return UsageError(said["en"], es=said["es"])


def check_outputs(args: argparse.Namespace) -> None:
    """--export and --trace must name files this user can write: checked before any work,
    by writing (and removing) a probe file beside them. Each is a new path or a regular
    file (a FIFO, a device or a socket there is refused, never replaced). A run's runs
    folder is playground.session.run's to check, before any rank starts."""
    for flag, path in (("--export", args.export), ("--trace", args.trace)):
        if path is None:
            continue
        where = Path(path)
        if not path.strip():
            raise UsageError.said("cli.output_empty", flag=flag)
        if flag == "--trace" and path.endswith((os.sep, "/")):  # a folder, one file a rank
            from playground.export.trace_folder import check_trace_folder

            check_trace_folder(path)  # new, empty and ours, or an earlier export of ours
            if where.is_dir():
                continue
        if where.is_dir():
            raise UsageError.said("cli.output_is_dir", flag=flag, path=plain(path))
        try:  # judged by what a link points to: a link to /dev/null is a device
            check_regular(where)
        except NotRegularFile as exc:
            raise _not_regular(flag, path, exc.slug) from None
        except OSError:  # a new path (or a dangling link, replaced): the probe below says
            pass
        parent = where.parent if str(where.parent) else Path(".")
        if not parent.is_dir():
            raise UsageError.said(
                "cli.output_no_dir", flag=flag, path=plain(path), parent=plain(parent)
            )
        try:
            with tempfile.NamedTemporaryFile(dir=parent, prefix=".playground-probe-"):
                pass
            if where.exists() and not os.access(where, os.W_OK):
                raise PermissionError(f"{where} is not writable")
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise UsageError.said(
                "cli.output_cannot_write", flag=flag, path=plain(path), reason=reason
            ) from None


def report_calibration(model: CostModel, as_json: bool, compact: bool = False) -> None:
    """What `playground calibrate` measured: links, then compute (runtime.sim.compute)."""
    if as_json:
        print(dumps(model.describe(), compact))
        return
    print(
        t(
            "cli.calibrated",
            name=plain(model.name),
            alpha=format_seconds(model.alpha),
            bw=f"{1 / model.beta / 1e9:.2f}",
            gbw=f"{1 / model.gamma / 1e9:.2f}",
            path=calibration.cache_file(),
        )
    )
    rates = model.rates
    if rates is not None:
        # Two lessons' own rates (their probes: scenarios.<lesson>.rates) beside the
        # generic ones, as this line has always shown them.
        split, checkpoint = PipelineRates.of(rates), ResumeRates.of(rates)
        print(
            t(
                "cli.calibrated_compute",
                fo=format_seconds(rates.forward_overhead_s),
                fr=f"{rates.forward_flops_per_s / 1e9:.1f}",
                bo=format_seconds(rates.backward_overhead_s),
                br=f"{rates.backward_flops_per_s / 1e9:.1f}",
                fe=f"{rates.forward_s_per_element * 1e9:.1f}",
                be=f"{rates.backward_s_per_element * 1e9:.1f}",
                bi=f"{split.split_input_fraction:.2f}",
                w=f"{split.split_weight_fraction:.2f}",
                adam=f"{rates.adam_s_per_element * 1e9:.2f}",
                adam_tensor=format_seconds(rates.adam_s_per_tensor),
                op=format_seconds(rates.op_seconds()),
                wake=format_seconds(model.corrections.wake),
                disk=f"{checkpoint.disk_bytes_per_s / 1e6:.0f}",
                ckpt=format_seconds(checkpoint.checkpoint_s),
            )
        )
    recorded = conditions.of(model)
    if recorded is not None and recorded.spread is not None:
        spread, figures = recorded.spread, recorded.figures or {}
        alpha = figures.get("alpha")
        print(
            t(
                "cli.calibrated_spread",
                compute=_factors(spread.compute),
                links=_factors(spread.communication),
                alpha="—" if alpha is None else "–".join(format_seconds(a) for a in alpha),
                load="—" if recorded.load1 is None else f"{recorded.load1:.2f}",
            )
        )


def _factors(pair: tuple[float, float]) -> str:
    return f"{pair[0]:.2f}–{pair[1]:.2f}"
