"""Whether the process that left a file behind still runs: a pid in the file's name,
checked against /proc and dated, so what a SIGKILLed process could not clean up is swept
by the next one (a rank pool's FileStore, a lab's namespaces).

A pid alone is not enough: the kernel reuses pids, so the owner counts as alive only if
a process with that pid runs and started before the file was made or last written.

Engine part (playground.lab_netns uses it too). Pure: stdlib only, Linux's /proc.
"""

from __future__ import annotations

import os
from pathlib import Path

# The stat's mtime and the start tick are each rounded: a second of slack keeps a live
# owner from ever reading as a newer process.
SLACK_S = 1.0


def started_at(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))  # fmt: skip
    except (OSError, StopIteration):
        return None
    # Field 22 (starttime, clock ticks after boot), counted after the name's ")".
    ticks = int(stat.rsplit(")", 1)[1].split()[19])
    return int(boot.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")


def owner_alive(pid: int, made: float) -> bool:
    """Whether `pid` runs and is the process that made something at time `made` (epoch
    seconds): a process that started after it holds a reused pid."""
    started = started_at(pid)
    return started is not None and started <= made + SLACK_S
