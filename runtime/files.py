"""Writing files so that nothing is ever written half.

Every file the playground writes (exports, traces, calibration cache, torchrun
results) goes through `write_text_atomic`: a temporary sibling, fsync, then
os.replace, so a reader sees the old file or the new one, never a torn one.

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_text_atomic(path: str | os.PathLike[str], text: str, mode: int = 0o644) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file 0600; exports are documents to share.
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
