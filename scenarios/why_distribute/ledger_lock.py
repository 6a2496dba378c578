"""The ledger's files on disk: the ledger under an exclusive flock, its key, its seal.

scenarios.why_distribute.ledger_lines says what a line is and checks a ledger's bytes;
this module is the only one that opens the files, so that every read and every
append happens under `fcntl.flock` on the ledger itself: a shared lock to read,
an exclusive one to check the ceiling, reserve and append (`locked`), so that N
guards started at once see each other's reservations and never lose a line.

Beside the ledger `L` (by default ~/.local/share/playground/ledger.jsonl):
- `L.key`: the user's HMAC key, 32 random bytes in hex, created once with O_EXCL,
  mode 0600, under the lock; without it authenticated lines cannot be checked, and
  nothing more is appended (LedgerError) rather than start a new key over old lines;
- `L.seal`: the number of lines and the last line's mac, authenticated, replaced
  (write + rename) after each append: lines removed from the end are caught by it.
  (A ledger and a seal both rolled back together from a backup cannot be told from
  the real thing: no local file can; the key stops anyone without it forging one.)
The ledger is 0600 and a folder this module creates 0700 (the default folder is
tightened to 0700 if it is looser). Nothing is opened through a symlink
(O_NOFOLLOW), and only regular files are read, at most MAX_BYTES.

Imports: stdlib only (and the pure scenarios.why_distribute.ledger_lines).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from scenarios.why_distribute.ledger_lines import (
    MAX_WHAT,
    STATUSES,
    Entry,
    Ledger,
    LedgerError,
    default_folder,
    ledger_path,
    line,
    now,
    seal_tag,
    verify,
)

MAX_BYTES = 16 * 1024 * 1024  # a course's ledger is a few KiB; this is thousands of runs
KEY_BYTES = 32


def key_path(path: Path) -> Path:
    return path.with_name(path.name + ".key")


def seal_path(path: Path) -> Path:
    return path.with_name(path.name + ".seal")


class Locked:
    """The ledger held under an exclusive lock: `book` as it stands, `append` to add."""

    def __init__(self, path: Path, fd: int, book: Ledger, key: bytes):
        self.path, self._fd, self.book, self._key = path, fd, book, key

    def append(self, entry: Entry) -> Entry:
        """Write one line chained to the last, fsync it, then the seal."""
        if entry.status not in STATUSES:
            raise ValueError(f"status {entry.status!r}")
        entry = replace(entry, what=entry.what[:MAX_WHAT])
        text, tag = line(self._key, entry, self.book.last_mac)
        data = ("\n" if self.book.ends_open else "") + text  # never glue onto a torn line
        _write_all(self._fd, data.encode())
        os.fsync(self._fd)
        lines = self.book.lines + 1
        self.book = replace(
            self.book,
            entries=[*self.book.entries, entry],
            last_mac=tag,
            lines=lines,
            authenticated=self.book.authenticated + 1,
            ends_open=False,
        )
        _write_seal(self.path, {"lines": lines, "mac": tag, "tag": seal_tag(self._key, lines, tag)})
        return entry


@contextmanager
def locked(path: Path | None = None) -> Iterator[Locked]:
    """The ledger under an exclusive lock, created (with its key) if need be."""
    path = path or ledger_path()
    _make_folder(path.parent, path)
    fd = _open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        key = _read_key(path)
        data = _read_all(fd, path)
        if key is None:
            if verify(data, None, None).authenticated:
                raise LedgerError(
                    "key_missing",
                    f"{key_path(path)} is missing: the ledger's lines cannot be checked;"
                    " move the ledger aside to start a new one",
                    path=str(key_path(path)),
                )
            key = _create_key(path)
        book = verify(data, key, _read_seal(path))
        yield Locked(path, fd, book, key)
    finally:
        os.close(fd)  # releases the lock


def read(path: Path | None = None) -> Ledger:
    """The ledger as it stands, read under a shared lock (an empty one if there is none)."""
    path = path or ledger_path()
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return verify(b"", None, None)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        data = _read_all(fd, path)
        return verify(data, _read_key(path), _read_seal(path))
    finally:
        os.close(fd)


def append(
    what: str, estimate_usd: float, actual_usd: float, status: str, path: Path | None = None
) -> Entry:
    """Append one entry with nothing reserved (a refusal, or a test's past run)."""
    entry = Entry(what, round(estimate_usd, 6), round(actual_usd, 6), now(), status)
    with locked(path) as ledger:
        return ledger.append(entry)


def _make_folder(folder: Path, path: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if folder == default_folder() and path.name == "ledger.jsonl":
            info = folder.stat()
            if info.st_uid == os.geteuid() and info.st_mode & 0o077:
                folder.chmod(0o700)  # the project's own folder: private
    except OSError as exc:
        raise _os_error(path, exc) from None


def _open(path: Path, flags: int) -> int:
    """A regular file's descriptor: no symlink followed, no FIFO waited on."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _os_error(path, exc) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _not_a_file(path)
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        os.fchmod(fd, 0o600)  # ours: private, as it was always meant to be
    return fd


def _not_a_file(path: Path) -> LedgerError:
    return LedgerError("not_a_file", f"{path} is not a regular file", path=str(path))


def _os_error(path: Path, exc: OSError) -> LedgerError:
    if exc.errno in (errno.EISDIR, errno.ELOOP, errno.ENOTDIR):
        return _not_a_file(path)
    reason = exc.strerror or str(exc)
    return LedgerError("cannot_open", f"{path}: {reason}", path=str(path), reason=reason)


def _read_all(fd: int, path: Path, limit: int | None = None) -> bytes:
    limit = MAX_BYTES if limit is None else limit
    size = os.fstat(fd).st_size
    if size > limit:
        raise LedgerError(
            "too_big", f"{path} is over {limit} bytes: not a ledger", path=str(path), max=limit
        )
    chunks, total = [], 0
    while total <= limit:
        chunk = os.pread(fd, 1 << 20, total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise LedgerError(
            "too_big", f"{path} is over {limit} bytes: not a ledger", path=str(path), max=limit
        )
    return b"".join(chunks)


def _read_small(path: Path) -> bytes | None:
    """A small companion file (key, seal), or None where there is none."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return _read_all(fd, path, 4096)
    finally:
        os.close(fd)


def _read_key(path: Path) -> bytes | None:
    text = _read_small(key_path(path))
    if text is None:
        return None
    try:
        key = bytes.fromhex(text.decode("ascii").strip())
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        where = str(key_path(path))
        raise LedgerError("key_bad", f"{where} is not a ledger key", path=where)
    return key


def _create_key(path: Path) -> bytes:
    """A new key, written once: O_EXCL, so two guards cannot each make their own."""
    key = secrets.token_bytes(KEY_BYTES)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(key_path(path), flags, 0o600)
    except OSError as exc:
        raise _os_error(key_path(path), exc) from None
    try:
        _write_all(fd, (key.hex() + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def _read_seal(path: Path) -> dict[str, Any] | None:
    text = _read_small(seal_path(path))
    if text is None:
        return None
    try:
        seal = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return seal if isinstance(seal, dict) else {}


def _write_seal(path: Path, seal: dict[str, Any]) -> None:
    target = seal_path(path)
    temporary = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        temporary.unlink(missing_ok=True)  # ours, from a guard killed mid-write
        fd = os.open(temporary, flags, 0o600)
        try:
            _write_all(fd, (json.dumps(seal) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except OSError as exc:
        raise _os_error(target, exc) from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
