"""The first code a rank process runs, before torch is imported.

The launcher (runtime.engine.launch) starts each rank with the spawn context and this
module's `rank_process` as target. Keeping this module free of torch lets the
UI process import the launcher without loading torch (docs/design.md's rule) and
lets the rank set itself up before the heavy import:

- stdin from /dev/null, stdout/stderr into `rank<R>.log` in the run directory,
  so rank output never reaches (or wrecks) the learner's terminal;
- PR_SET_PDEATHSIG, so a rank dies with its parent and none is left behind;
- thread counts for the math libraries, so N ranks share the cores fairly;
- gloo and NCCL told to bind the loopback interface for a local run, so no
  socket of a rank listens beyond this machine;
- malloc told to keep freed memory for reuse (`keep_freed_memory`);
- a heartbeat thread, started at once, which the launcher watches: a rank that
  stops answering (SIGSTOP, a wedged call) stops beating and is named.

Then it imports the main the launcher named (runtime.engine.launched_rank, and with it torch)
and hands over. A rank of a
warm pool (runtime.engine.pool) is also handed the read end of a job pipe: after its
first job it waits there for the next (runtime.engine.launched_rank.launched_main), writing
each job's log into that job's run directory (`log_to`).

RankSpec is everything the parent hands one rank, as data: who it is, where
to rendezvous, the lesson's rank entry, typed params and this rank's Actions
(docs/design.md: the launcher is handed the rank entry and the Actions; it never
looks a lesson up).

Pure: stdlib only.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from runtime.engine.faults import Fault
from runtime.engine.restart import Attempt
from runtime.sim.program import Action

HEARTBEAT_INTERVAL_S = 0.25


@dataclass(frozen=True)
class RankSpec:
    """What one rank process is handed by its launcher (or by scenarios/torchrun.py)."""

    rank: int
    world_size: int
    entry: str  # "package.module:function", chosen by the lesson
    params: Any  # the lesson's typed params (a frozen dataclass), opaque here
    actions: tuple[Action, ...] = ()
    backend: str = "auto"
    faults: list[Fault] = field(default_factory=list)
    attempt: Attempt | None = None
    stream: bool = True
    run_dir: str = ""
    # torch.distributed's init_method: a FileStore in the private run directory for a
    # local run (no network listener at all), tcp://HOST:PORT when asked for a host.
    rendezvous: str = ""
    # The network interface gloo and NCCL bind to ("lo": loopback); None: their default.
    interface: str | None = None
    threads: int = 1
    timeout_s: float = 120.0
    # The launcher's environment when it started the rank: a rank forked from the fork
    # server (runtime.engine.spawn) takes it on first, as a spawned one inherits it.
    environment: dict[str, str] | None = None


class Channel:
    """The rank's end of its pipe to the parent, shared by the main and heartbeat threads."""

    def __init__(self, conn: Any):
        self._conn = conn
        self._lock = threading.Lock()
        self.current_action: str | None = None

    def send(self, message: tuple) -> None:
        with self._lock:
            self._conn.send(message)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except OSError:
        pass  # not Linux: the launcher's teardown still kills every rank


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 2**20  # the largest glibc accepts on 64-bit


def keep_freed_memory() -> None:
    """Make freed memory stay in the process for reuse, as CUDA's caching allocator does.

    By default glibc serves large blocks with mmap and hands freed memory back to
    the kernel, so a rank that holds m microbatches of activations (GPipe) page-
    faults its way through fresh memory at every forward and runs about 1.6x
    slower than the same forward measured alone. GPUs do not pay this (PyTorch
    caches device memory), and a timing lesson should not teach it as a property
    of the schedule; after one warm-up step the memory is simply reused.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
        libc.mallopt(_M_TRIM_THRESHOLD, 2**62)
    except (OSError, AttributeError):
        pass  # not glibc: only the first step runs slower


def log_to(run_dir: str, rank: int) -> None:
    """This process's stdout and stderr (file descriptors 1 and 2) into `rank<R>.log`
    of `run_dir`: at the start, and again for each job of a warm rank (each job has its
    own run directory). A new file, private: never one already there, nor the target of
    a symlink planted in its place (O_EXCL, O_NOFOLLOW; the rank then fails, named)."""
    sys.stdout.flush()
    sys.stderr.flush()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND
    log = os.open(os.path.join(run_dir, f"rank{rank}.log"), flags, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _redirect_stdio(run_dir: str, rank: int) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    log_to(run_dir, rank)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def _heartbeat(channel: Channel, rank: int) -> None:
    while True:
        try:
            channel.send(("heartbeat", rank, time.perf_counter_ns(), channel.current_action))
        except (OSError, EOFError, ValueError):
            return  # parent gone or pipe closed: the rank is being torn down
        time.sleep(HEARTBEAT_INTERVAL_S)


def rank_process(spec: RankSpec, conn: Any, jobs: Any, main: str) -> None:
    """Entry point of a launched rank (spawn target); `jobs`: a warm pool's job pipe;
    `main`: "module:function" that runs the rank once it is set up, named by the
    launcher (runtime.engine.spawn) so that this module imports none of the rank code."""
    rank = spec.rank
    _die_with_parent()
    _redirect_stdio(spec.run_dir, rank)
    if spec.environment is not None:
        os.environ.clear()
        os.environ.update(spec.environment)
    threads = str(spec.threads)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = threads
    if spec.interface:  # before torch is imported: gloo and NCCL read these at init
        os.environ["GLOO_SOCKET_IFNAME"] = spec.interface
        os.environ["NCCL_SOCKET_IFNAME"] = spec.interface
    keep_freed_memory()
    channel = Channel(conn)
    threading.Thread(target=_heartbeat, args=(channel, rank), daemon=True, name="heartbeat").start()
    module, function = main.split(":")
    getattr(importlib.import_module(module), function)(spec, channel, jobs)
