"""Where runs live: private run directories under the user's state directory, pruned.

Part of the real engine of docs/design.md (the launcher and the restart supervisor
write rank logs, the rendezvous file and checkpoints here). Choices, and why:

- Under `$XDG_STATE_HOME/playground/runs` (by default ~/.local/state/...), not
  a shared, predictable /tmp folder: another user can neither read a run's
  logs and checkpoints nor plant files where a run will write. The folder and
  every run directory are 0700, every file in them 0600 (runtime.engine.files), and the
  process's umask is 077 from the first run on (`private_umask`).
  `PLAYGROUND_RUNS_DIR` chooses another place (the tests use it).
- Owned directories only: the runs folder holds a marker file the playground
  wrote (`.playground-runs`), and each run directory its own (`.playground-run`).
  A folder is used as the runs folder only if it holds the marker, is new or
  empty, or holds nothing but entries named like ours (a folder of an older
  version); anything else is refused (RunsDirError, one line) with nothing
  changed in it: a `PLAYGROUND_RUNS_DIR` that points at a project is neither
  chmodded nor pruned.
- Only the newest `PLAYGROUND_KEEP_RUNS` runs are kept (default 20): older ones
  are removed when a new one starts, so runs never pile up. Only folders named
  like a run AND holding the run marker are ever removed, never anything else.
- A finished run's checkpoints (megabytes per failure-resume run) are removed
  unless the user asked to keep them (`playground run --keep`).

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

from runtime.engine.files import PRIVATE_DIR, make_private_dir, open_private

DEFAULT_KEEP = 20
CHECKPOINTS = "checkpoints"
ROOT_MARKER = ".playground-runs"
RUN_MARKER = ".playground-run"
_ROOT_TEXT = b"playground runs folder: the playground prunes the runs in it\n"
_RUN_TEXT = b"playground run\n"
# A run directory: `new_run_dir`'s name (a time stamp, the sanitized name, mkdtemp's 8
# characters). The other entries a runs folder holds: the pool's FileStore, calibration's
# scratch folders (mkdtemp, TemporaryDirectory) and their probes.
RUN_NAME = re.compile(r"^\d{8}-\d{6}-[A-Za-z0-9_-]{1,40}-[a-z0-9_]{8}$")
_OURS = re.compile(
    r"^(\d{8}-\d{6}-[A-Za-z0-9_-]{1,40}-[a-z0-9_]{8}|\.pool-[a-z0-9_]{8}\.store"
    r"|calibrate-checkpoint-[a-z0-9_]{8}|tmp[a-z0-9_]{8}|\.playground-runs)$"
)


class RunsDirError(ValueError):
    """The runs folder cannot be used (not ours, not a folder): one line, in English
    (`str`) and in Spanish (`es`, as playground.usage.as_usage_error reads it)."""

    def __init__(self, message: str, es: str, path: Path, kind: str):
        super().__init__(message)
        self.es = es
        self.path = path
        self.kind = kind  # "not_ours" or "not_a_folder" (the catalogs' cli.runs_dir_<kind>)


def private_umask() -> None:
    """From now on this process (and every rank it starts) creates files 0600 and folders
    0700 unless it says otherwise: a mkdir or open anywhere in a run stays private."""
    os.umask(0o077)


def configured_root() -> Path:
    """The runs folder's path (not checked, not created)."""
    configured = os.environ.get("PLAYGROUND_RUNS_DIR")
    if configured:
        return Path(configured)
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "playground" / "runs"


# Why the runs folder is refused, in English and Spanish, by RunsDirError's kind.
REFUSALS = {
    "not_ours": (
        "the runs folder {shown} is not empty and was not made by the playground: "
        "set PLAYGROUND_RUNS_DIR to a new or empty folder",
        "la carpeta de ejecuciones {shown} no está vacía y no la creó el playground: "
        "ponga en PLAYGROUND_RUNS_DIR una carpeta nueva o vacía",
    ),
    "not_a_folder": (
        "the runs folder {shown} is not a folder: set PLAYGROUND_RUNS_DIR to a new or empty folder",
        "la carpeta de ejecuciones {shown} no es una carpeta: ponga en PLAYGROUND_RUNS_DIR "
        "una carpeta nueva o vacía",
    ),
}


def _refused(root: Path, kind: str) -> RunsDirError:
    shown = "".join(ch if ch.isprintable() else "?" for ch in str(root))
    english, spanish = REFUSALS[kind]
    return RunsDirError(english.format(shown=shown), spanish.format(shown=shown), root, kind)


def _write_marker(path: Path, text: bytes) -> None:
    fd = open_private(path, append=False)
    try:
        os.write(fd, text)
    finally:
        os.close(fd)


def _has_marker(folder: Path, name: str) -> bool:
    """`folder` holds our marker: a regular file (not a link) of that name."""
    try:
        return stat.S_ISREG(os.lstat(folder / name).st_mode)
    except OSError:
        return False


def is_ours(root: Path) -> bool:
    """`root` is a runs folder the playground made (or may take: empty, or holding only
    entries named like ours)."""
    if _has_marker(root, ROOT_MARKER):
        return True
    try:
        return all(_OURS.match(entry) for entry in os.listdir(root))
    except OSError:
        return False


def runs_root() -> Path:
    """The folder that holds every run directory: created 0700 with its marker, or an
    existing one of ours (tightened to 0700). RunsDirError if it exists and is not ours
    (nothing in it is changed) or is not a folder."""
    root = configured_root()
    try:
        st = os.stat(root)  # a link to a folder is fine: the user chose where runs go
    except FileNotFoundError:
        make_private_dir(root)
    else:
        if not stat.S_ISDIR(st.st_mode):
            raise _refused(root, "not_a_folder")
        if not is_ours(root):
            raise _refused(root, "not_ours")
        if stat.S_IMODE(st.st_mode) != PRIVATE_DIR:
            with contextlib.suppress(OSError):  # ours, made under a looser umask: tighten
                root.chmod(PRIVATE_DIR)
    if not _has_marker(root, ROOT_MARKER):
        with contextlib.suppress(FileExistsError):
            _write_marker(root / ROOT_MARKER, _ROOT_TEXT)
    return root


def check_runs_root() -> None:
    """RunsDirError now, before any rank starts, if the runs folder cannot be used."""
    runs_root()


def keep_count() -> int:
    """How many runs to keep (PLAYGROUND_KEEP_RUNS, at least 1)."""
    try:
        return max(1, int(os.environ.get("PLAYGROUND_KEEP_RUNS", DEFAULT_KEEP)))
    except ValueError:
        return DEFAULT_KEEP


def new_run_dir(name: str) -> Path:
    """A fresh private directory for one run (mkdtemp makes it 0700), marked as a run, the
    oldest runs pruned."""
    root = runs_root()
    private_umask()  # before any rank starts: they inherit it
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:40] or "run"
    path = Path(tempfile.mkdtemp(prefix=f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-", dir=root))
    _write_marker(path / RUN_MARKER, _RUN_TEXT)
    prune(root, keep_count())
    return path


def is_run_dir(path: Path) -> bool:
    """`path` is a run directory the playground made: a folder (not a link) named like a
    run that holds the run marker."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return False
    except OSError:
        return False
    return bool(RUN_NAME.match(path.name)) and _has_marker(path, RUN_MARKER)


def prune(root: Path, keep: int) -> list[Path]:
    """Remove all but the newest `keep` run directories of `root` (only folders that
    `is_run_dir`: nothing else is touched); returns the removed."""
    runs = []
    for path in root.iterdir():
        if is_run_dir(path):
            with contextlib.suppress(OSError):  # gone meanwhile: another run pruned it
                runs.append((path.lstat().st_mtime, path))
    runs.sort(reverse=True)
    removed = [path for _, path in runs[keep:]]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def drop_checkpoints(run_dir: Path) -> None:
    """A finished run's checkpoints are not needed any more (unless kept on purpose)."""
    shutil.rmtree(run_dir / CHECKPOINTS, ignore_errors=True)
