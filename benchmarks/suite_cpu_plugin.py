"""pytest plugin of benchmarks/suite_cpu.py: the machine's CPU work during each test.

Loaded with `-p benchmarks.suite_cpu_plugin` in a serial run (no xdist): for each test
it records the wall time and the CPU the whole machine spent meanwhile (`/proc/stat`,
all processes), so the ranks, fork servers, apps in tmux and helpers a test starts are
counted even where pytest never waits for them. On a machine doing nothing else, that is
the test's own work; whatever else runs adds to it (the script says so). The rows go, as
JSON, to the file named by SUITE_CPU_OUT when the session ends.

Imports: pytest and the stdlib only (it runs inside the suite's process).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

_ROWS: list[tuple[str, float, float]] = []
_START: dict[str, float] = {}


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent since boot, every core, idle and I/O wait
    left out (/proc/stat's first line, in clock ticks)."""
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    idle, iowait = ticks[3], ticks[4]
    return (sum(ticks[:8]) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def pytest_sessionstart(session: pytest.Session) -> None:
    _START.update(busy=busy_seconds(), wall=time.monotonic())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    wall, busy = time.monotonic(), busy_seconds()
    yield  # setup, call and teardown: a fixture's processes are the test's too
    _ROWS.append((item.nodeid, time.monotonic() - wall, busy_seconds() - busy))


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("SUITE_CPU_OUT")
    if not out:
        return
    document = {
        "rows": _ROWS,
        "session_wall": time.monotonic() - _START["wall"],
        "session_busy": busy_seconds() - _START["busy"],
    }
    with open(out, "w") as handle:
        json.dump(document, handle)
