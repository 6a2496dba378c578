"""A job the budget guard owns: nothing it starts outlives the guard, signals end it first.

`playground budget guard … -- CMD` (playground.budget) runs CMD through `Guard`:
- CMD runs in its own session and process group, with PR_SET_PDEATHSIG (Linux) so
  that a SIGKILL of the guard kills it too;
- the guard makes itself a child subreaper (PR_SET_CHILD_SUBREAPER, Linux), so that
  anything CMD starts and leaves behind, `setsid` daemons included, becomes the
  guard's child instead of init's; when the job ends (by itself, at its budget, or
  on a signal) every descendant found through /proc is sent SIGTERM, then SIGKILL
  after GRACE_S: nothing the job started is left running when the guard exits;
- SIGINT, SIGTERM and SIGHUP to the guard are caught from the moment `Guard` is
  entered (before the ledger is read): before the job starts it is not started;
  while it runs (or while it is being killed at its budget) it is ended as above;
  the caller then writes the ledger line and exits 128 + the signal (130/143/129).
Not covered: a SIGKILL of the guard itself leaves the job's own descendants to
their fate once PDEATHSIG has killed the direct child (no cgroup is used: a user's
session rarely may create one).

Imports: stdlib only.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, TracebackType

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_S = 2.0  # between SIGTERM and SIGKILL: time for a job to save and close
POLL_S = 0.05
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
LINUX = sys.platform.startswith("linux")


@dataclass(frozen=True)
class Outcome:
    started: bool
    status: str  # finished, failed, killed (at its budget), interrupted (a signal)
    how: str  # "exit 0", "signal 9", "budget", "SIGTERM", "budget, SIGINT"
    elapsed_s: float  # real seconds the job ran
    returncode: int | None  # the job's own, when it ended by itself
    received: int | None  # the signal the guard was sent, if any


def _prctl() -> Callable[..., int] | None:
    if not LINUX:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc.prctl


class Guard:
    """`with Guard() as guard:` catches the forwarded signals; `guard.run(cmd, over)`."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}
        self._prctl = _prctl()
        # Children this process had before the job (a fork server, another job): never the
        # job's, never signalled or reaped here, nor anything below them.
        self._others: frozenset[int] = frozenset()

    def __enter__(self) -> Guard:
        for sig in FORWARDED:
            self._previous[sig] = signal.signal(sig, self._caught)
        if self._prctl is not None:
            self._prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        if self._prctl is not None:  # orphans of later work are no longer ours to adopt
            self._prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

    def _caught(self, signum: int, frame: FrameType | None) -> None:
        # Only noted here: the loop ends the job, and the ledger line is written after.
        if self.received is None:
            self.received = signum

    def run(self, command: list[str], over_budget: Callable[[float], bool]) -> Outcome:
        """Run `command` until it ends, `over_budget(elapsed_s)` says so, or a signal."""
        if self.received is not None:
            return Outcome(False, "interrupted", signal.Signals(self.received).name, 0.0, None,
                           self.received)  # fmt: skip
        self._others = frozenset(_children(os.getpid()))
        child = subprocess.Popen(
            command, start_new_session=True, preexec_fn=_die_with(os.getpid(), self._prctl)
        )
        start = time.monotonic()
        code: int | None = None
        why = ""
        while why == "":
            # The job is this guard's own child: wait on it alone (a scan of /proc every
            # tick is for _end, where orphans must be found too).
            pid, status = os.waitpid(child.pid, os.WNOHANG)
            code = os.waitstatus_to_exitcode(status) if pid == child.pid else None
            if code is not None:
                why = "exit"
            elif self.received is not None:
                why = "signal"
            elif over_budget(time.monotonic() - start):
                why = "budget"
            else:
                time.sleep(POLL_S)
        code = self._end(child, code)
        elapsed = time.monotonic() - start
        child.returncode = code  # reaped here, not by Popen
        received = self.received
        if why == "budget":
            how = "budget" + (f", {signal.Signals(received).name}" if received else "")
            return Outcome(True, "killed", how, elapsed, None, received)
        if why == "signal":
            return Outcome(True, "interrupted", signal.Signals(received).name, elapsed, None,
                           received)  # fmt: skip
        how = f"exit {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
        return Outcome(True, "finished" if code == 0 else "failed", how, elapsed, code, received)

    def _end(self, child: subprocess.Popen, code: int | None) -> int | None:
        """SIGTERM to the job's group and every descendant; SIGKILL to what is left after
        GRACE_S (at once if a signal comes meanwhile); reap them all. The job's own status."""
        received_before = self.received
        targets = self._job()
        if code is None or targets:
            _signal_all(None if code is not None else child.pid, targets, signal.SIGTERM)
            deadline = time.monotonic() + GRACE_S
            while time.monotonic() < deadline and self.received == received_before:
                latest = self._reap(child.pid)
                code = latest if latest is not None else code
                if code is not None and not self._job():
                    return code
                time.sleep(POLL_S)
        for _ in range(50):  # a job forking while it is killed: until none is left
            targets = self._job()
            if not targets and code is not None:
                break
            _signal_all(None if code is not None else child.pid, targets, signal.SIGKILL)
            time.sleep(POLL_S / 5)
            latest = self._reap(child.pid)
            code = latest if latest is not None else code
        if code is None:  # killed: it cannot take long to go
            code = os.waitstatus_to_exitcode(os.waitpid(child.pid, 0)[1])
        return code

    def _job(self) -> list[int]:
        """Every live process of the job: below this process, outside the children it
        had before the job (orphans the job left are reparented here: they count)."""
        return _descendants(os.getpid(), skip=self._others)

    def _reap(self, job: int) -> int | None:
        """Reap the job and the orphans it left here once they end (never another child:
        waitpid(-1) would reap a fork server its owner still waits for); the job's exit
        code (negative: its signal) if it ended."""
        code = None
        for pid in _children(os.getpid(), zombies=True):
            if pid in self._others:
                continue
            try:
                reaped, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if reaped == job:
                code = os.waitstatus_to_exitcode(status)
        return code


def _die_with(parent: int, prctl: Callable[..., int] | None) -> Callable[[], None]:
    """Run in the child before exec: SIGKILL when the guard dies, even by SIGKILL."""

    def setup() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the guard died before the line above
                os._exit(1)

    return setup


def _children(root: int, *, zombies: bool = False) -> list[int]:
    """The direct children of `root` (live ones; `zombies`: ended and not reaped too)."""
    return [pid for pid, (parent, state) in _processes().items()
            if parent == root and (zombies or state != b"Z")]  # fmt: skip


def _processes() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, state letter), from /proc (empty off Linux)."""
    table: dict[int, tuple[int, bytes]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue  # gone meanwhile
        fields = text[text.rfind(b")") + 2 :].split()
        if len(fields) >= 2:
            table[int(name)] = (int(fields[1]), fields[0])
    return table


def _descendants(root: int, skip: frozenset[int] = frozenset()) -> list[int]:
    """Every live process below `root`, from /proc's parent links (empty off Linux),
    leaving out `skip` and everything below them. A zombie is reaped, not killed."""
    children: dict[int, list[int]] = {}
    for pid, (parent, state) in _processes().items():
        if state != b"Z":
            children.setdefault(parent, []).append(pid)
    found, queue = [], [pid for pid in children.get(root, []) if pid not in skip]
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def _signal_all(group: int | None, pids: list[int], sig: int) -> None:
    """`sig` to the job's process group (None once the job is reaped: its id may be
    reused) and to each of `pids`."""
    sends = [(os.kill, pid) for pid in pids]
    if group is not None:
        sends.insert(0, (os.killpg, group))
    for send, target in sends:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
            send(target, sig)
