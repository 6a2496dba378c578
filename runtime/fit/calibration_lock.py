"""One calibration at a time per cache folder: the lock a calibration holds.

Part of runtime/fit (docs/design.md): `playground calibrate`, and a `run` that finds no
calibration for its world size, calibrate under it (playground.session). Why:
- Two calibrations at once time each other: each would fit the other's load into the
  rates it saves, and a learner with two terminals (or a suite with two workers) starts
  two first runs at once.
- Each calibration saves the cache by reading it, adding its entry and writing it back:
  two at once could lose one entry.
A run that waited for the lock looks the cache up again before it calibrates: the
calibration it waited for may be the one it needs.

The lock is `flock` on a file beside the cache, released by the kernel when its holder
ends however it ends. Where the file cannot be opened (a read-only folder), the
calibration goes on unlocked, as it always did: the lock spares work, it is not needed
for a correct result.

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from runtime.fit.calibration import make_cache_dir

LOCK_NAME = "calibration.lock"


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """Hold this cache folder's calibration lock (waiting for it) inside the block."""
    fd = _open()
    if fd is None:  # no lock file: unlocked, as calibrations always were
        yield
        return
    try:
        with contextlib.suppress(OSError):  # not a file flock can lock: unlocked too
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and with it the lock


def _open() -> int | None:
    try:
        # O_NOFOLLOW: a link planted in the folder is never followed; O_NONBLOCK: a FIFO
        # planted there does not hang the open.
        return os.open(
            make_cache_dir() / LOCK_NAME,
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o600,
        )
    except OSError:
        return None
