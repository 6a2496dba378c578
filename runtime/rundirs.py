"""Where runs live: private run directories under the user's state directory, pruned.

Part of the real engine of DESIGN.md (the launcher and the restart supervisor
write rank logs, the rendezvous file and checkpoints here). Choices, and why:

- Under `$XDG_STATE_HOME/playground/runs` (by default ~/.local/state/...), not
  a shared, predictable /tmp folder: another user can neither read a run's
  logs and checkpoints nor plant files where a run will write. The folder and
  every run directory are 0700. `PLAYGROUND_RUNS_DIR` chooses another place
  (the tests use it).
- Only the newest `PLAYGROUND_KEEP_RUNS` runs are kept (default 20): older ones
  are removed when a new one starts, so runs never pile up.
- A finished run's checkpoints (megabytes per failure-resume run) are removed
  unless the user asked to keep them (`playground run --keep`).

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

DEFAULT_KEEP = 20
CHECKPOINTS = "checkpoints"


def runs_root() -> Path:
    """The folder that holds every run directory (created 0700)."""
    configured = os.environ.get("PLAYGROUND_RUNS_DIR")
    if configured:
        root = Path(configured)
    else:
        state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
        root = Path(state) / "playground" / "runs"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):  # a folder the user made: tighten it anyway
        root.chmod(0o700)
    return root


def keep_count() -> int:
    """How many runs to keep (PLAYGROUND_KEEP_RUNS, at least 1)."""
    try:
        return max(1, int(os.environ.get("PLAYGROUND_KEEP_RUNS", DEFAULT_KEEP)))
    except ValueError:
        return DEFAULT_KEEP


def new_run_dir(name: str) -> Path:
    """A fresh private directory for one run (mkdtemp makes it 0700), the oldest pruned."""
    root = runs_root()
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:40] or "run"
    path = Path(tempfile.mkdtemp(prefix=f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-", dir=root))
    prune(root, keep_count())
    return path


def prune(root: Path, keep: int) -> list[Path]:
    """Remove all but the newest `keep` run directories of `root`; returns the removed."""
    runs = sorted(
        (p for p in root.iterdir() if p.is_dir() and not p.is_symlink()),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    removed = runs[keep:]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def drop_checkpoints(run_dir: Path) -> None:
    """A finished run's checkpoints are not needed any more (unless kept on purpose)."""
    shutil.rmtree(run_dir / CHECKPOINTS, ignore_errors=True)
