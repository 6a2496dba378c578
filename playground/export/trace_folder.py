"""The folder `--trace DIR/` writes each rank's trace into, checked and written safely.

In the "playground/ exports" box of docs/design.md, under playground.export.chrome_trace
(which hands a path ending in a separator here) and above
playground.export.rank_traces (the documents written).

That folder is new (made 0755), or an existing one of this user's that is empty or
holds only an earlier export of ours (regular `rank-N.json` files, replaced, and those
of ranks this run has not removed, so that reading it back reads this run alone);
anything else is refused in one line (`check_trace_folder`, also before any work): a
symbolic link (never written through), a file, a folder of another user's or with
other files. Writing goes through the folder's descriptor, opened without following a
link, so a link swapped in after the check is not followed either.

Imports: stdlib, runtime's file modes, the catalogs and the rank documents; never torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from playground.export.rank_traces import rank_documents
from playground.formatting import plain
from playground.i18n import t
from playground.usage import UsageError, os_reason
from runtime.engine.files import SHARED_FILE

if TYPE_CHECKING:
    from playground.outcome import Outcome

RANK_FILE = re.compile(r"rank-(0|[1-9][0-9]{0,6})\.json")
# An earlier export holds a file per rank; past this many entries it is not one of ours.
MAX_EARLIER = 1 << 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def write_rank_traces(outcome: Outcome, folder: str | os.PathLike[str]) -> list[Path]:
    """`rank-N.json` per rank (the measured run, else the prediction) in a new folder, or
    in an existing one `check_trace_folder` accepts (an earlier export's files replaced)."""
    where = Path(folder)
    docs = rank_documents(outcome)
    with contextlib.suppress(FileExistsError):  # judged below, through the descriptor
        where.mkdir(mode=0o755)
    try:
        fd = os.open(where, _DIR_FLAGS)
    except OSError as exc:
        raise _folder_error(where, exc) from None
    written = []
    try:
        earlier = _earlier_export(where, fd, os.fstat(fd))
        for rank, doc in docs.items():
            # json's default separators on purpose: HTA finds a file's rank by the text
            # `"rank": N` (with the space) before it parses the file.
            name = f"rank-{rank}.json"
            _write_in(fd, name, json.dumps(doc, allow_nan=False))
            written.append(where / name)
        for name in sorted(earlier - {p.name for p in written}):
            os.unlink(name, dir_fd=fd)  # a rank this run does not have: not read back as its
    finally:
        os.close(fd)
    return written


def check_trace_folder(folder: str | os.PathLike[str]) -> None:
    """`--trace DIR/` before any work: nothing there (a new folder), or a folder that
    `write_rank_traces` writes into; else a UsageError in one line."""
    where = Path(folder)
    try:
        os.lstat(where)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _folder_error(where, exc) from None
    try:
        fd = os.open(where, _DIR_FLAGS)
    except OSError as exc:
        raise _folder_error(where, exc) from None
    try:
        _earlier_export(where, fd, os.fstat(fd))
    finally:
        os.close(fd)


def _earlier_export(where: Path, fd: int, st: os.stat_result) -> set[str]:
    """The names of an earlier export's files in the open folder `fd` (none if empty);
    a UsageError if the folder is another user's or holds anything else."""
    if st.st_uid != os.geteuid():
        raise UsageError.said("export.trace_folder_owner", path=plain(where))
    names: set[str] = set()
    with os.scandir(fd) as entries:
        for entry in entries:
            ours = RANK_FILE.fullmatch(entry.name) and entry.is_file(follow_symlinks=False)
            if not ours or len(names) >= MAX_EARLIER:
                raise UsageError.said(
                    "export.trace_folder_other", path=plain(where), name=plain(entry.name)[:80]
                )
            names.add(entry.name)
    return names


def _folder_error(where: Path, exc: OSError) -> UsageError:
    """Why the folder cannot be written into, said in one line."""
    try:
        st = os.lstat(where)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        return UsageError.said("export.trace_folder_link", path=plain(where))
    if st is not None and not stat.S_ISDIR(st.st_mode):
        return UsageError.said("export.trace_folder_not_dir", path=plain(where))
    said = {
        lang: t("export.trace_folder_cannot", lang, path=plain(where), reason=os_reason(exc, lang))
        for lang in ("en", "es")
    }
    return UsageError(said["en"], es=said["es"])


def _write_in(fd: int, name: str, text: str) -> None:
    """`name` in the folder `fd`, whole or not at all, 0644: a temporary file made there
    (O_EXCL, no link followed), then renamed over `name` (a rename replaces a link
    planted there, never writes through it)."""
    tmp = f".{name}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    out = os.open(tmp, flags, 0o600, dir_fd=fd)
    try:
        with os.fdopen(out, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), SHARED_FILE)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise
