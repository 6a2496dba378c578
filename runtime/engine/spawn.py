"""Starting rank processes: what each is handed, the spawn itself, and the teardown.

The first half of the launcher (runtime.engine.launch calls `start`, then watches the
ranks; runtime.engine.pool starts ranks that stay for further jobs). Each rank gets a
RankSpec (runtime.engine.bootstrap) as data and is forked from a server that imported
torch once (`rank_context`; spawned afresh with PLAYGROUND_START=spawn), with
one one-way pipe to the parent (a rank killed mid-write can only break its own
pipe, never the others' channel, as a shared Queue's lock would) and, for a
pool, one more the other way for its next jobs.

Loopback only, by construction: a local run rendezvouses through a FileStore (in
its private run directory, or the pool's private store file): no TCP listener
at all, and its ranks bind gloo/NCCL to the loopback interface. Asking for a
`host` is the explicit way to rendezvous over TCP and listen beyond this machine.

Spawned children re-import the parent's `__main__` unless it is hidden while
they start (`_main_hidden`): a rank needs nothing from it (its entry is a module
name), and the CLI's `__main__` would cost every rank the front end again.

Engine part, but torch-free.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from runtime.engine.bootstrap import RankSpec, rank_process
from runtime.engine.launch_spec import LaunchSpec

LOOPBACK = "127.0.0.1"
# What a rank runs once bootstrap has set it up: handed to it by name, not imported
# here (torch comes with it, and only inside the rank).
WORKER_MAIN = "runtime.engine.launched_rank:launched_main"


def loopback_interface() -> str:
    """The name of the loopback network interface ("lo" on Linux, "lo0" on macOS)."""
    names = [name for _, name in socket.if_nameindex()]
    return next((n for n in names if n.startswith("lo")), "lo")


class HostError(ValueError):
    """A `--host` refused before any rank starts: `str(exc)` English, `es` Spanish (the
    front ends print the learner's language; runtime imports no catalog)."""

    def __init__(self, message: str, es: str):
        super().__init__(message)
        self.es = es
        self.field: str | None = "host"


def check_host(host: str) -> None:
    """HostError unless `host` is an address of this machine that a listener can bind:
    the rendezvous store and the ranks listen there, so an empty name or a foreign
    address would only fail later, inside a rank, as a traceback."""
    try:
        if not host.strip():
            raise OSError("an empty address")
        free_port(host)
    except (OSError, UnicodeError, ValueError, TypeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise HostError(
            f"--host {host!r} is not an address of this machine ({why}): give one of its "
            "own addresses (127.0.0.1, or an interface's IPv4 address), or leave --host out "
            "for loopback only",
            f"--host {host!r} no es una dirección de esta máquina ({why}): dé una de sus "
            "propias direcciones (127.0.0.1, o la dirección IPv4 de una interfaz), u omita "
            "--host para solo loopback",
        ) from None


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where SIGINT raises KeyboardInterrupt (`end_on_sigterm`)."""


def end_on_sigterm() -> None:
    """SIGTERM ends this process as SIGINT does: raised as Terminated, so the launcher's
    teardown kills every rank and the exit hooks stop the fork server and the resource
    tracker (the default action would kill this process alone and leave them running).
    A second SIGTERM during that teardown is ignored, so the teardown can finish."""

    def terminated(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    signal.signal(signal.SIGTERM, terminated)


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def threads_for(spec: LaunchSpec) -> int:
    """Math-library threads per rank: the cores shared fairly unless the spec says."""
    return spec.threads_per_rank or max(1, (os.cpu_count() or 1) // spec.world_size)


def rank_specs(
    spec: LaunchSpec, run_dir: Path, rendezvous: str = "", interface: str | None = None
) -> list[RankSpec]:
    """What each rank of `spec` is handed (at its start, or as a warm rank's next job)."""
    n = spec.world_size
    if spec.program is not None and spec.program.world_size != n:
        raise ValueError(f"program for {spec.program.world_size} ranks launched on {n}")
    return [
        RankSpec(
            rank=rank,
            world_size=n,
            entry=spec.entry,
            params=spec.params,
            actions=tuple(spec.program.ranks[rank]) if spec.program else (),
            backend=spec.backend,
            faults=spec.faults,
            attempt=spec.attempt,
            stream=spec.stream,
            run_dir=str(run_dir),
            rendezvous=rendezvous,
            interface=interface,
            threads=threads_for(spec),
        )
        for rank in range(n)
    ]


@dataclass
class Ranks:
    """Started rank processes and the parent's ends of their pipes."""

    procs: list[Any] = field(default_factory=list)
    conns: list[Any] = field(default_factory=list)  # rank -> parent: every message
    jobs: list[Any] = field(default_factory=list)  # parent -> rank: next jobs (runtime.engine.pool)

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def stop(self, patience_s: float = 0.0) -> None:
        """Every rank gone (killed after `patience_s`), every pipe closed."""
        _teardown(self.procs, patience_s)
        for conn in (*self.conns, *self.jobs):
            conn.close()


_MAIN_LOCK = threading.Lock()
# What every rank imports before its first job: preloaded once in the fork server.
PRELOAD = ("runtime.engine.bootstrap", "runtime.engine.launched_rank", "torch", "torch.distributed")


def rank_context() -> Any:
    """How ranks are started: forked from multiprocessing's fork server, which imported
    torch once (a rank then starts in milliseconds instead of importing torch itself,
    which on a machine with fewer cores than ranks costs seconds of every cold run), or
    spawned afresh with `PLAYGROUND_START=spawn`. The server is a child of this process
    (its socket a file in a private temporary folder), forks nothing but ranks, and is
    stopped when this process exits; a rank dies with it (runtime.engine.bootstrap)."""
    if os.environ.get("PLAYGROUND_START") == "spawn":
        return mp.get_context("spawn")
    return mp.get_context("forkserver")


def warm_start(preload: Sequence[str] = ()) -> None:
    """Start the fork server now, so that its torch import runs while the caller still
    prepares the run (checks, calibration lookup, the Program, its prediction), or while
    the app shows its first screen (it passes no stderr, so a UI that replaced
    sys.stderr can start it). Each rank takes on the
    launcher's environment as it starts (RankSpec.environment); what torch itself read
    as it was imported is what the server's environment held then (fresh_server).
    `preload`: what the coming ranks import besides torch (their lesson's rank module,
    FSDP2), imported once in the server by the call that starts it."""
    global _STARTED
    if rank_context().get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    if not _STARTED:
        forkserver.set_forkserver_preload([*PRELOAD, *preload])
    forkserver.ensure_running()
    if not _STARTED:
        _STARTED = True
        atexit.register(_stop_at_exit)


_STARTED = False


def fresh_server() -> None:
    """A new fork server, under this process's environment as it is now (the old one
    stops, and with it any rank it started: never while ranks run)."""
    _stop_server()
    warm_start()


def _stop_server() -> None:
    """Stop the fork server and reap it (at exit it would stop by itself, but a moment
    later: nothing of a run outlives the command). Killed, not asked: asked, it exits
    through the interpreter's teardown with torch loaded, and waiting for that took
    0.7 s of every cold `playground run` after its report; it holds no state, and the
    ranks it forked are gone by then (or die with it: runtime.engine.bootstrap)."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        server._stop()  # the one way the stdlib offers to reap it and remove its socket


def _stop_at_exit() -> None:
    """The fork server, then multiprocessing's resource tracker (the server held its
    pipe open too), each stopped and reaped: left to exit on their own after this
    process, they would linger as orphans until init reaps them."""
    _stop_server()
    from multiprocessing import resource_tracker

    with contextlib.suppress(Exception):
        resource_tracker._resource_tracker._stop()


@contextlib.contextmanager
def _main_hidden():
    """While ranks start: hide `__main__`'s file and spec, which spawn would re-import in
    every child ("safe importing of main module"). A rank imports only what it needs:
    the bootstrap, then torch and its lesson's rank module."""
    main = sys.modules.get("__main__")
    with _MAIN_LOCK:
        if main is None:
            yield
            return
        saved = {k: vars(main)[k] for k in ("__file__", "__spec__") if k in vars(main)}
        vars(main).pop("__file__", None)
        main.__spec__ = None
        try:
            yield
        finally:
            vars(main).pop("__spec__", None)
            vars(main).update(saved)


def start(
    spec: LaunchSpec, run_dir: Path, *, store: Path | None = None, jobs: bool = False
) -> Ranks:
    """Spawn the ranks of `spec` (their logs in `run_dir`). A local run rendezvouses
    through the FileStore `store` (default: `rendezvous.store` in `run_dir`); `jobs`:
    each rank also gets a pipe for further jobs, read after `done` (runtime.engine.pool)."""
    if spec.host is None:
        store = store or run_dir / "rendezvous.store"
        rendezvous, interface = f"file://{store}", loopback_interface()
    else:
        rendezvous, interface = f"tcp://{spec.host}:{free_port(spec.host)}", None
    environment = dict(os.environ)
    specs = [
        replace(s, environment=environment)
        for s in rank_specs(spec, run_dir, rendezvous, interface)
    ]
    ctx = rank_context()
    try:
        warm_start()  # running (a no-op when it is), and stopped at exit
    except (OSError, ValueError):  # ChildProcessError is an OSError
        # The server is gone and cannot be started again from here (under a UI that
        # replaced sys.stderr, say): these ranks are spawned, each importing torch.
        ctx = mp.get_context("spawn")
    ranks = Ranks()
    try:
        with _main_hidden():
            for rank_spec in specs:
                reader, writer = ctx.Pipe(duplex=False)
                job_reader, job_writer = ctx.Pipe(duplex=False) if jobs else (None, None)
                proc = ctx.Process(
                    target=rank_process,
                    args=(rank_spec, writer, job_reader, WORKER_MAIN),
                    name=f"rank{rank_spec.rank}",
                    daemon=True,
                )
                proc.start()
                writer.close()  # the child holds its end; EOF then means the child is gone
                ranks.procs.append(proc)
                ranks.conns.append(reader)
                if job_reader is not None:
                    job_reader.close()
                    ranks.jobs.append(job_writer)
    except BaseException:
        ranks.stop()
        raise
    return ranks


def _teardown(procs: list[Any], patience_s: float = 0.0) -> None:
    """Kill every rank still alive (after `patience_s`) and wait until each one is gone."""
    deadline = time.monotonic() + patience_s
    for proc in procs:
        if proc.exitcode is None and patience_s > 0:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)  # SIGKILL also ends a SIGSTOPped rank
    deadline = time.monotonic() + 5
    for proc in procs:
        proc.join(timeout=max(0.1, deadline - time.monotonic()))
