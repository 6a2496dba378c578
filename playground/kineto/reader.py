"""Trace files to typed events, one RankTrace per rank, refusing hostile input in one line.

Part of playground.kineto (issue 39). A trace is untrusted and can be huge, so a file
is read in bounded steps: a regular file only (a FIFO or a device is refused before it
is read), decompressed chunk by chunk when it is gzipped, never more than
MAX_FILE_BYTES once decompressed and never more than MAX_EVENTS events (counted on
the bytes as they arrive, so a 10⁷-event file is refused before it is decoded); then
decoded by msgspec against playground.kineto.schema. Every refusal is a UsageError:
one line naming the file and, for a bad value, the first bad field, in the learner's
language; the CLI prints it and exits 2. Nothing in a trace is executed or unpickled.

Ranks come from each file's `distributedInfo` (`rank`, `world_size`, `backend`);
a single file without it is rank 0; two files claiming the same rank are refused.

Imports: stdlib, msgspec, the catalogs.
"""

from __future__ import annotations

import gzip
import itertools
import os
import re
import shlex
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from playground.formatting import plain
from playground.i18n import t
from playground.kineto.schema import MAX_EVENTS, TRACE_TYPE, Event, TraceDoc
from playground.usage import UsageError, os_reason

MAX_FILE_BYTES = 1 << 30  # decompressed: 1 GiB of JSON per rank
MAX_FILES = 1024  # ranks read at once (a folder of traces)
MAX_TOTAL_EVENTS = 8_000_000  # all files together: what is held in memory at once
CHUNK = 1 << 20
SUFFIXES = (".json", ".json.gz")
PEEK_BYTES = 1 << 16  # what `typed_traces` reads of a file to tell a trace from a saved run
_PH = b'"ph"'  # every event has one: counting it bounds the events before decoding

_DECODER = msgspec.json.Decoder(TRACE_TYPE)


@dataclass
class RankTrace:
    """One rank's trace: where it came from, what the job said about itself, its events."""

    path: str
    rank: int
    world_size: int | None
    backend: str | None
    device: str | None
    nccl_version: str | None
    events: list[Event] = field(repr=False)
    pg_sizes: dict[str, int] = field(default_factory=dict)


def trace_files(paths: list[str]) -> list[Path]:
    """The files the user named: each file itself, each folder's *.json and *.json.gz."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            matching = (p for p in path.iterdir() if p.name.endswith(SUFFIXES))
            # Never more than the cap held in memory, whatever the folder holds.
            inside = sorted(itertools.islice(matching, MAX_FILES + 1))
            if not inside:
                raise UsageError.said("trace.no_files", path=plain(raw))
            found += inside
        else:
            found.append(path)
        if len(found) > MAX_FILES:
            raise UsageError.said("trace.too_many_files", most=MAX_FILES)
    return found


def typed_traces(text: str) -> list[str] | None:
    """The paths typed in an Open box if they name profiler traces, None if not (a saved
    run, a torchrun --out folder, nothing there): the lesson screen's box takes both.

    Traces are: several paths (a saved run is one), a folder of *.json / *.json.gz
    without the `run.json` of a torchrun folder, a gzipped file, or a JSON file whose
    first PEEK_BYTES hold `"traceEvents"` (or a bare array of events) and not a saved
    run's `"scenario"`. Only regular files are peeked at, without blocking."""
    text = text.strip()
    if not text:
        return None
    try:
        paths = [text] if os.path.lexists(text) else shlex.split(text)
    except ValueError:  # an unclosed quote: one path as typed
        paths = [text]
    if len(paths) != 1:
        return paths or None
    path = Path(paths[0])
    try:
        if path.is_dir():
            if (path / "run.json").exists():
                return None
            names = itertools.islice(path.iterdir(), MAX_FILES + 1)
            return paths if any(p.name.endswith(SUFFIXES) for p in names) else None
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as raw:
            head = raw.read(PEEK_BYTES)
    except OSError:
        return None
    if head[:2] == b"\x1f\x8b":
        return paths
    if b'"scenario"' in head:
        return None
    return paths if b'"traceEvents"' in head or head.lstrip()[:1] == b"[" else None


def read_traces(paths: list[str]) -> list[RankTrace]:
    """Every rank's trace, in rank order; a UsageError (one line) for the first bad file."""
    traces: list[RankTrace] = []
    total = 0
    for path in trace_files(paths):
        traces.append(read_trace(path))
        total += len(traces[-1].events)
        if total > MAX_TOTAL_EVENTS:  # what all ranks together may hold in memory
            raise UsageError.said("trace.too_many_all", most=f"{MAX_TOTAL_EVENTS:,}")
    if len(traces) == 1 and traces[0].rank < 0:
        traces[0].rank = 0
    seen: dict[int, str] = {}
    for trace in traces:
        if trace.rank < 0:
            raise UsageError.said("trace.no_rank", path=plain(trace.path))
        if trace.rank in seen:
            raise UsageError.said(
                "trace.same_rank", a=plain(seen[trace.rank]), b=plain(trace.path), rank=trace.rank
            )
        seen[trace.rank] = trace.path
    return sorted(traces, key=lambda tr: tr.rank)


def read_trace(path: Path) -> RankTrace:
    """One file, decoded and checked (rank -1 when it does not say which rank it is)."""
    shown = plain(path)
    data = _read_bounded(path, shown)
    try:
        doc = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise _bad_field(shown, str(exc)) from None
    except msgspec.DecodeError as exc:
        raise UsageError.said("trace.malformed", path=shown, detail=plain(exc)) from None
    except RecursionError:
        raise UsageError.said("trace.too_deep", path=shown) from None
    del data
    if isinstance(doc, TraceDoc):
        events, info, devices = doc.traceEvents, doc.distributedInfo, doc.deviceProperties
    else:
        events, info, devices = doc, None, None
    device = next((d.name for d in devices or () if d.name), None)
    pg_sizes: dict[str, int] = {}
    for group in (info.pg_config or ()) if info else ():
        if group.pg_name is not None and group.pg_size is not None:
            pg_sizes[group.pg_name] = group.pg_size
    return RankTrace(
        path=str(path),
        rank=info.rank if info and info.rank is not None else -1,
        world_size=info.world_size if info else None,
        backend=info.backend if info else None,
        device=device,
        nccl_version=info.nccl_version if info else None,
        events=events,
        pg_sizes=pg_sizes,
    )


def _read_bounded(path: Path, shown: str) -> bytearray:
    """The file's JSON bytes (decompressed), at most MAX_FILE_BYTES and MAX_EVENTS events."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError.said("trace.not_a_file", path=shown)
        # O_NONBLOCK: a FIFO put in the file's place since the stat does not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        said = {
            lang: t("trace.cannot_read", lang, path=shown, reason=os_reason(exc, lang))
            for lang in ("en", "es")
        }
        raise UsageError(said["en"], "path", es=said["es"]) from None
    with os.fdopen(fd, "rb") as raw:
        if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
            raise UsageError.said("trace.not_a_file", path=shown)
        zipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if zipped else raw
        out = bytearray()
        events, tail = 0, b""
        try:
            while chunk := stream.read(CHUNK):
                out += chunk
                if len(out) > MAX_FILE_BYTES:
                    raise UsageError.said("trace.too_big", path=shown, most="1 GiB")
                window = tail + chunk
                events += window.count(_PH)
                tail = window[-(len(_PH) - 1) :]
                if events > MAX_EVENTS:
                    raise UsageError.said("trace.too_many", path=shown, most=f"{MAX_EVENTS:,}")
        except (OSError, EOFError, zlib.error) as exc:
            raise UsageError.said("trace.bad_gzip", path=shown, detail=plain(exc)) from None
    return out  # msgspec decodes a bytearray as it is: no second copy of a big file


# msgspec's reasons, said in Spanish too (anything else is kept as msgspec wrote it).
_REASONS_ES = (
    (
        re.compile(r"Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`"),
        "se esperaba {want}, llegó {got}",
    ),
    (re.compile(r"Number out of range"), "número fuera de rango"),
    (re.compile(r"Expected `(?P<want>[^`]+)` of length <= (?P<n>\d+)"), "{want} de más de {n}"),
    (re.compile(r"Object missing required field `(?P<name>[^`]+)`"), "falta el campo {name}"),
)


def _bad_field(shown: str, message: str) -> UsageError:
    """msgspec's "reason - at `$.path`" as one line naming the file and the field."""
    reason, _, where = message.partition(" - at ")
    where = plain(where.strip("`")) or "$"
    reason = plain(reason)
    es = reason
    for pattern, text in _REASONS_ES:
        match = pattern.search(reason)
        if match:
            es = text.format(**match.groupdict())
            break
    return UsageError(
        t("trace.bad_field", "en", path=shown, field=where, detail=reason),
        "path",
        es=t("trace.bad_field", "es", path=shown, field=where, detail=es),
    )
