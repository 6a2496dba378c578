"""Saved runs read back: a `run --json` document, or the --out dir of a torchrun run.

Part of `playground/` in docs/design.md, beside playground.session: `replay` turns
a file into the same Outcome a new run gives, so the app, the CLI and the
exports show it alike. A saved file is untrusted input: it is decoded against
playground.saved_schema (types, ranges, finite numbers, bounded strings
without control characters, bounded sizes), its params are parsed by the
lesson's own Params (with predict's bounds), a torchrun rank's result by the
lesson's own result type, and anything else is a UsageError with one line
naming the first bad field, never a traceback, in the learner's language (what
playground.saved_schema says of a field stays English: its words are msgspec's).

Never imports torch.
"""

from __future__ import annotations

from pathlib import Path

from playground import saved_schema as schema
from playground.formatting import plain
from playground.i18n import t
from playground.outcome import FORMAT, Outcome
from playground.session import UsageError, decode_results, finish, resolve
from playground.usage import os_reason
from runtime.engine.files import NotRegularFile, TooLarge, read_bounded
from runtime.engine.launch import LaunchResult
from runtime.fit import calibration
from runtime.sim.costmodel import CostModel
from runtime.sim.profiles import PROFILES


class _Invalid(schema.SavedRunError):
    """What is wrong with a saved run, in English (`str`) and in Spanish (`es`)."""

    def __init__(self, message: str, es: str):
        super().__init__(message)
        self.es = es


def _said(key: str, **values: object) -> _Invalid:
    """The catalog's `key` filled in, in both languages."""
    return _Invalid(t(key, "en", **values), t(key, "es", **values))


def _within(where: str, exc: ValueError) -> _Invalid:
    """`where: what` of an error inside one of a run dir's files, in both languages."""
    return _Invalid(f"{where}: {exc}", f"{where}: {getattr(exc, 'es', None) or exc}")


def replay(path: str | Path) -> Outcome:
    """Show a saved run: a `--json` document, or the --out dir of a torchrun run."""
    path = Path(path)
    where = plain(path)
    try:
        if path.is_dir():
            return _replay_dir(path)
        return _replay_file(path)
    except NotRegularFile as exc:  # a device, a FIFO, a socket: refused before it is opened
        said = {
            lang: t(
                "saved.not_regular",
                lang,
                path=plain(exc.filename or path),
                kind=t(f"files.kind.{exc.slug}", lang),
            )
            for lang in ("en", "es")
        }
        raise UsageError(said["en"], es=said["es"]) from None
    except TooLarge as exc:  # grew past the cap while read (st_size said less)
        said = {
            lang: t(
                "saved.invalid",
                lang,
                path=plain(exc.filename or path),
                detail=t("saved.too_large", lang, mib=exc.limit // 2**20),
            )
            for lang in ("en", "es")
        }
        raise UsageError(said["en"], es=said["es"]) from None
    except OSError as exc:
        reason = {lang: os_reason(exc, lang) for lang in ("en", "es")}
        raise UsageError(
            t("saved.cannot_read", "en", path=where, reason=reason["en"]),
            es=t("saved.cannot_read", "es", path=where, reason=reason["es"]),
        ) from None
    except schema.SavedRunError as exc:
        raise UsageError(
            t("saved.invalid", "en", path=where, detail=exc),
            es=t("saved.invalid", "es", path=where, detail=getattr(exc, "es", None) or exc),
        ) from None


def _replay_file(path: Path) -> Outcome:
    data = read_bounded(path, schema.MAX_FILE_BYTES)
    if b'"format"' not in data[:4096] and b'"scenario"' in data[:4096]:
        raise UsageError.said("saved.old_format", path=plain(path), format=FORMAT)
    doc: schema.RunDoc = schema.decode(data, schema.RunDoc)
    lesson, params = _lesson(doc.scenario, doc.params)
    schema.check_ranks(params.world_size, doc.measured, doc.predicted, doc.counters, doc.marks)
    measured = None
    if doc.measured is not None:
        measured = schema.timeline(doc.measured, doc.counters, doc.marks)
    profile = PROFILES["cpu-default"]
    if doc.profile is not None:
        # As plain data: CostModel.from_dict reads this format and the older one (its
        # corrections kept as special keys of the compute table).
        try:
            profile = CostModel.from_dict(schema.msgspec.to_builtins(doc.profile))
        except ValueError as exc:  # a collective scale's key that is not one
            raise schema.SavedRunError(f"$.profile: {exc}") from None
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
        raise _Invalid(f"params: {exc}", f"params: {exc.text('es')}") from None


def _replay_dir(path: Path) -> Outcome:
    run_file = path / "run.json"
    if not run_file.exists():
        raise UsageError.said("saved.no_run_json", path=plain(path))
    # Every file of the dir counts against one cap: 4096 ranks of 256 MiB each were
    # a terabyte read in.
    budget = schema.MAX_FILE_BYTES
    try:  # named, as a rank file is: the dir holds several
        data = read_bounded(run_file, schema.SIDECAR_MAX_BYTES)
        meta: schema.TorchrunMeta = schema.decode(data, schema.TorchrunMeta)
        lesson, params = _lesson(meta.scenario, meta.params)
    except schema.SavedRunError as exc:
        raise _within(run_file.name, exc) from None
    if params.world_size != meta.world_size:
        raise _said("saved.world_mismatch", saved=meta.world_size, params=params.world_size)
    raw_results, timelines = [], []
    for rank in range(meta.world_size):
        rank_file = path / f"rank{rank}.json"
        if not rank_file.exists():
            raise UsageError.said(
                "saved.missing_rank", path=plain(path), file=rank_file.name, rank=rank
            )
        if budget <= 0:
            raise UsageError.said(
                "saved.dir_too_large", path=plain(path), mib=schema.MAX_FILE_BYTES // 2**20
            )
        try:
            data = read_bounded(rank_file, budget)
        except TooLarge:
            if budget == schema.MAX_FILE_BYTES:  # this one file is too large: said as such
                raise
            raise UsageError.said(
                "saved.dir_too_large", path=plain(path), mib=schema.MAX_FILE_BYTES // 2**20
            ) from None
        budget -= len(data)
        try:
            doc: schema.TorchrunRank = schema.decode(data, schema.TorchrunRank)
            schema.check_costs(doc.result)
            decode_results(lesson, [doc.result])
        except ValueError as exc:  # SavedRunError too: say which of the files is wrong
            raise _within(rank_file.name, exc) from None
        if doc.rank != rank or any(s.rank != rank for s in doc.spans):
            raise _said("saved.other_rank", file=rank_file.name)
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
