"""Saved runs read back: a `run --json` document, or the --out dir of a torchrun run.

Part of `playground/` in DESIGN.md, beside playground.session: `replay` turns
a file into the same Outcome a new run gives, so the app, the CLI and the
exports show it alike. A saved file is untrusted input: it is decoded against
playground.saved_schema (types, ranges, finite numbers, bounded strings
without control characters, bounded sizes), its params are parsed by the
lesson's own Params (with predict's bounds), a torchrun rank's result by the
lesson's own result type, and anything else is a UsageError with one line
naming the first bad field, never a traceback.

Never imports torch.
"""

from __future__ import annotations

from pathlib import Path

from playground import saved_schema as schema
from playground.formatting import plain
from playground.session import FORMAT, Outcome, UsageError, decode_results, finish, resolve
from runtime import calibration
from runtime.compute import ComputeRates
from runtime.costmodel import CostModel
from runtime.launch import LaunchResult
from runtime.profiles import PROFILES


def replay(path: str | Path) -> Outcome:
    """Show a saved run: a `--json` document, or the --out dir of a torchrun run."""
    path = Path(path)
    where = plain(path)
    try:
        if path.is_dir():
            return _replay_dir(path)
        return _replay_file(path)
    except OSError as exc:
        raise UsageError(f"cannot read {where}: {exc.strerror or exc}") from None
    except schema.SavedRunError as exc:
        raise UsageError(f"{where} is not a valid playground run: {exc}") from None


def _read(path: Path) -> bytes:
    if path.stat().st_size > schema.MAX_FILE_BYTES:
        raise schema.SavedRunError(f"larger than {schema.MAX_FILE_BYTES // 2**20} MiB")
    return path.read_bytes()


def _replay_file(path: Path) -> Outcome:
    data = _read(path)
    if b'"format"' not in data[:4096] and b'"scenario"' in data[:4096]:
        raise UsageError(
            f"{plain(path)} is a playground run of format 1; this playground reads format "
            f"{FORMAT} (run the lesson again with --json to get one)"
        )
    doc: schema.RunDoc = schema.decode(data, schema.RunDoc)
    lesson, params = _lesson(doc.scenario, doc.params)
    measured = None
    if doc.measured is not None:
        measured = schema.timeline(doc.measured, doc.counters, doc.marks)
    profile = PROFILES["cpu-default"]
    if doc.profile is not None:
        fields = schema.msgspec.structs.asdict(doc.profile)
        if doc.profile.rates is not None:
            fields["rates"] = ComputeRates(**schema.msgspec.structs.asdict(doc.profile.rates))
        fields["slow"] = tuple(doc.profile.slow)
        profile = CostModel(**fields)
    return Outcome(
        lesson,
        params,
        profile,
        schema.timeline(doc.predicted),
        measured,
        [schema.metric(m) for m in doc.metrics],
        doc.backend,
        curves=[schema.curve(c) for c in doc.curves],
    )


def _lesson(name: str, raw: dict) -> tuple:
    """The lesson and its params, parsed like the CLI's (predict's bounds): one line if not."""
    try:
        return resolve(name, raw, "predict")
    except UsageError as exc:
        raise schema.SavedRunError(f"params: {exc}") from None


def _replay_dir(path: Path) -> Outcome:
    run_file = path / "run.json"
    if not run_file.is_file():
        raise UsageError(f"{plain(path)} has no run.json: not a finished torchrun --out dir")
    try:  # named, as a rank file is: the dir holds several
        meta: schema.TorchrunMeta = schema.decode(_read(run_file), schema.TorchrunMeta)
        lesson, params = _lesson(meta.scenario, meta.params)
    except schema.SavedRunError as exc:
        raise schema.SavedRunError(f"{run_file.name}: {exc}") from None
    if params.world_size != meta.world_size:
        raise schema.SavedRunError(
            f"run.json says {meta.world_size} ranks but its params run {params.world_size}"
        )
    raw_results, timelines = [], []
    for rank in range(meta.world_size):
        rank_file = path / f"rank{rank}.json"
        if not rank_file.is_file():
            raise UsageError(f"{plain(path)} lacks {rank_file.name}: rank {rank} did not finish")
        try:
            doc: schema.TorchrunRank = schema.decode(_read(rank_file), schema.TorchrunRank)
            schema.check_costs(doc.result)
            decode_results(lesson, [doc.result])
        except ValueError as exc:  # SavedRunError too: say which of the files is wrong
            raise schema.SavedRunError(f"{rank_file.name}: {exc}") from None
        if doc.rank != rank or any(s.rank != rank for s in doc.spans):
            raise schema.SavedRunError(f"{rank_file.name} holds records of another rank")
        timelines.append(schema.timeline(doc.spans, doc.counters))
        raw_results.append(doc.result)
    model = calibration.lookup(meta.backend, meta.world_size, nearest=True)
    launched = LaunchResult(
        sorted((s for t in timelines for s in t.spans), key=lambda s: (s.start, s.rank)),
        raw_results,
        meta.backend,
        path,
        0.0,
        sorted((c for t in timelines for c in t.counters), key=lambda c: (c.t, c.rank)),
    )
    model = lesson.prepare_model(params, model or PROFILES["cpu-default"])
    return finish(lesson, params, model, launched)
