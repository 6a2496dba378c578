"""Saved runs read back: a `run --json` document, or the --out dir of a torchrun run.

Part of `playground/` in DESIGN.md, beside playground.session: `replay` turns
a file into the same Outcome a new run gives, so the app, the CLI and the
exports show it alike. A saved file is untrusted input: its params are parsed
by the lesson's own Params (with predict's bounds), its metrics must be the
typed list of the current format, and anything else is a UsageError with one
line, never a traceback.

Never imports torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playground.session import FORMAT, Outcome, UsageError, decode_results, finish, resolve
from runtime import calibration
from runtime.costmodel import CostModel
from runtime.launch import LaunchResult
from runtime.profiles import PROFILES
from runtime.trace import Counter, Mark, Span, Timeline
from scenarios.metrics import Curve, Metric


def replay(path: str | Path) -> Outcome:
    """Show a saved run: a `--json` document, or the --out dir of a torchrun run."""
    path = Path(path)
    try:
        if path.is_dir():
            return _replay_dir(path)
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"cannot read {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or "scenario" not in doc or "predicted" not in doc:
        raise UsageError(
            f"{path} is not a playground run (expected the JSON of `run --json` or a torchrun --out dir)"
        )
    if doc.get("format") != FORMAT:
        raise UsageError(
            f"{path} has format {doc.get('format', 1)!r}; this playground reads format {FORMAT} "
            "(run the lesson again with --json to get one)"
        )
    try:
        return _from_doc(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path} is not a valid playground run: {exc}") from None


def _from_doc(doc: dict[str, Any]) -> Outcome:
    lesson, params = resolve(str(doc["scenario"]), dict(doc["params"]), "predict")
    measured = None
    if "measured" in doc:
        measured = Timeline(
            [Span.from_dict(s) for s in doc["measured"]],
            counters=[Counter(**c) for c in doc.get("counters", [])],
            marks=[Mark(**m) for m in doc.get("marks", [])],
        )
    return Outcome(
        lesson,
        params,
        CostModel.from_dict(doc.get("profile") or PROFILES["cpu-default"].describe()),
        Timeline([Span.from_dict(s) for s in doc["predicted"]]),
        measured,
        [Metric.from_dict(m) for m in doc.get("metrics", [])],
        doc.get("backend"),
        curves=[Curve(**c) for c in doc.get("curves", [])],
    )


def _replay_dir(path: Path) -> Outcome:
    run_file = path / "run.json"
    if not run_file.exists():
        raise UsageError(f"{path} has no run.json: not a finished torchrun --out dir")
    meta = json.loads(run_file.read_text())
    lesson, params = resolve(meta["scenario"], meta["params"], "run")
    raw_results = []
    spans: list[Span] = []
    counters: list[Counter] = []
    for rank in range(meta["world_size"]):
        rank_file = path / f"rank{rank}.json"
        if not rank_file.exists():
            raise UsageError(f"{path} lacks {rank_file.name}: rank {rank} did not finish")
        envelope = json.loads(rank_file.read_text())
        spans.extend(Span.from_dict(s) for s in envelope.get("spans", []))
        counters.extend(Counter(**c) for c in envelope.get("counters", []))
        raw_results.append(envelope["result"])
    try:
        decode_results(lesson, raw_results)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    world = meta["world_size"]
    model = calibration.lookup(meta["backend"], world, nearest=True) or PROFILES["cpu-default"]
    launched = LaunchResult(
        sorted(spans, key=lambda s: (s.start, s.rank)),
        raw_results,
        meta["backend"],
        path,
        0.0,
        sorted(counters, key=lambda c: (c.t, c.rank)),
    )
    return finish(lesson, params, lesson.prepare_model(params, model), launched)
