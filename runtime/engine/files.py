"""Files the playground reads and writes, safely: bounded reads, whole writes, private files.

- `read_bounded`: at most `limit` bytes of a regular file. A path from a user (a
  saved run, a sidecar) may name a device (/dev/zero never ends), a FIFO (a read
  blocks for ever) or a socket: each is refused before it is opened for reading,
  and a file that grows past the limit while read is refused too.
- `write_text_atomic`: a temporary sibling, fsync, then os.replace, so a reader
  sees the old file or the new one, never a torn one. It never replaces anything
  but a regular file (an export onto /dev/null or a FIFO would replace it), and
  the file is private (0600) unless the caller says otherwise (an export).
- `open_private`: a private file (0600) opened for writing without following a
  symlink planted where it goes (a rank's log), and only if it is a regular file.
- `make_private_dir`: a folder only its owner can enter (0700), whatever the umask.

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
# Documents meant to be shared (an HTML export, a trace): readable by others, as a
# file the user's editor writes.
SHARED_FILE = 0o644

# (test, slug, English words): the slug names it in the catalogs (files.kind.<slug>).
_KINDS = (
    (stat.S_ISDIR, "directory", "a directory"),
    (stat.S_ISCHR, "character_device", "a character device"),
    (stat.S_ISBLK, "block_device", "a block device"),
    (stat.S_ISFIFO, "fifo", "a FIFO"),
    (stat.S_ISSOCK, "socket", "a socket"),
    (stat.S_ISLNK, "symlink", "a symbolic link"),
)


class NotRegularFile(OSError):
    """The path is a device, a FIFO, a socket, a directory or a link where a regular file
    must be: refused before a byte is read or written. `kind` says which (English),
    `slug` names it for the catalogs (files.kind.<slug>)."""

    def __init__(self, path: str | os.PathLike[str], mode: int):
        self.slug, self.kind = kind_of(mode)
        super().__init__(errno.EINVAL, f"not a regular file ({self.kind})", os.fspath(path))


class TooLarge(OSError):
    """The file holds more than the reader accepts (`limit`, bytes)."""

    def __init__(self, path: str | os.PathLike[str], limit: int):
        super().__init__(errno.EFBIG, f"larger than {limit} bytes", os.fspath(path))
        self.limit = limit


def kind_of(mode: int) -> tuple[str, str]:
    """What a non-regular file is: (slug, English words)."""
    for test, slug, kind in _KINDS:
        if test(mode):
            return slug, kind
    return "other", "not a regular file"


def check_regular(path: str | os.PathLike[str], *, follow: bool = True) -> os.stat_result:
    """The stat of `path` if it is a regular file; NotRegularFile if not (FileNotFoundError
    and the like as they come). `follow`: a symlink is judged by what it points to (a link
    to /dev/zero is a device); without it, a symlink itself is refused."""
    st = os.stat(path) if follow else os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, st.st_mode)
    return st


def read_bounded(path: str | os.PathLike[str], limit: int, *, follow: bool = True) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them: NotRegularFile for
    anything else (checked before opening it for reading), TooLarge beyond `limit`."""
    st = check_regular(path, follow=follow)
    if st.st_size > limit:
        raise TooLarge(path, limit)
    # O_NONBLOCK: if a FIFO took the file's place since the stat, open returns at once
    # instead of waiting for a writer (fstat below then refuses it).
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, st.st_mode)
        chunks, total = [], 0
        while True:  # st_size may lie (a file still growing, /proc): count what comes
            # One read, as a rule: a single chunk is returned as it is by join, where a
            # list of small ones held the file twice in memory.
            want = max(st.st_size + 1 - total, 1 << 16)  # the whole file and 1 byte more
            chunk = os.read(fd, min(want, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise TooLarge(path, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_bounded(path: str | os.PathLike[str], limit: int, *, follow: bool = True) -> str:
    """`read_bounded` decoded as UTF-8 (UnicodeDecodeError, a ValueError, if it is not)."""
    return read_bounded(path, limit, follow=follow).decode("utf-8")


def _refuse_non_regular(path: Path) -> None:
    """NotRegularFile if `path` exists and is not a regular file (a symlink judged by its
    target): os.replace would put a file in the place of a device or a FIFO."""
    try:
        check_regular(path)
    except FileNotFoundError:  # a new path, or a dangling link: the link is replaced
        return


def write_text_atomic(path: str | os.PathLike[str], text: str, mode: int = PRIVATE_FILE) -> None:
    """Write `text` to `path` whole or not at all, as a file of `mode` (private unless
    said otherwise); never in the place of anything but a regular file."""
    path = Path(path)
    _refuse_non_regular(path)
    # mkstemp: O_EXCL and 0600, so nothing planted at the temporary name is followed.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        _refuse_non_regular(path)  # again, just before: the window is as small as it gets
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_private(path: str | os.PathLike[str], *, append: bool = True) -> int:
    """A file descriptor open for writing on the private (0600) regular file `path`:
    created if absent; a symlink there is not followed (ELOOP), and a FIFO, a device or
    anything else that is not a regular file is refused (NotRegularFile) without waiting
    for a reader. `append`: write at its end (a log), else from the start, truncated."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if append else 0
    fd = os.open(path, flags, PRIVATE_FILE)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, st.st_mode)
        if not append:
            os.ftruncate(fd, 0)
        if st.st_mode & 0o777 != PRIVATE_FILE:  # an older file of ours, made under a looser umask
            os.fchmod(fd, PRIVATE_FILE)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def make_private_dir(path: str | os.PathLike[str], *, tighten: bool = True) -> Path:
    """`path` as a folder of mode 0700, whatever the umask, and each missing parent made
    0700 too; a symlink or a file in its place is refused (NotRegularFile). `tighten`:
    an existing folder is made 0700 too (False: a folder the user chose is left as it is)."""
    path = Path(path)
    missing = []
    for folder in (path, *path.parents):
        if os.path.lexists(folder):
            break
        missing.append(folder)
    for folder in reversed(missing):  # each one we create is private, not just the last
        with contextlib.suppress(FileExistsError):  # made meanwhile: judged below
            folder.mkdir(mode=PRIVATE_DIR)
        if folder != path:
            os.chmod(folder, PRIVATE_DIR)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotRegularFile(path, st.st_mode)
    if (missing or tighten) and st.st_mode & 0o777 != PRIVATE_DIR:
        os.chmod(path, PRIVATE_DIR)
    return path
