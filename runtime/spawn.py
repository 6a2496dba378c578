"""Starting rank processes: what each is handed, the spawn itself, and the teardown.

The first half of the launcher (runtime.launch calls `start`, then watches the
ranks; runtime.pool starts ranks that stay for further jobs). Each rank gets a
RankSpec (runtime.bootstrap) as data and is started with the spawn context, with
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

import contextlib
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.bootstrap import RankSpec, rank_process

if TYPE_CHECKING:
    from runtime.launch import LaunchSpec

LOOPBACK = "127.0.0.1"


def loopback_interface() -> str:
    """The name of the loopback network interface ("lo" on Linux, "lo0" on macOS)."""
    names = [name for _, name in socket.if_nameindex()]
    return next((n for n in names if n.startswith("lo")), "lo")


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
    jobs: list[Any] = field(default_factory=list)  # parent -> rank: next jobs (runtime.pool)

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def stop(self, patience_s: float = 0.0) -> None:
        """Every rank gone (killed after `patience_s`), every pipe closed."""
        _teardown(self.procs, patience_s)
        for conn in (*self.conns, *self.jobs):
            conn.close()


_MAIN_LOCK = threading.Lock()


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
    each rank also gets a pipe for further jobs, read after `done` (runtime.pool)."""
    if spec.host is None:
        store = store or run_dir / "rendezvous.store"
        rendezvous, interface = f"file://{store}", loopback_interface()
    else:
        rendezvous, interface = f"tcp://{spec.host}:{free_port(spec.host)}", None
    specs = rank_specs(spec, run_dir, rendezvous, interface)
    ctx = mp.get_context("spawn")
    ranks = Ranks()
    try:
        with _main_hidden():
            for rank_spec in specs:
                reader, writer = ctx.Pipe(duplex=False)
                job_reader, job_writer = ctx.Pipe(duplex=False) if jobs else (None, None)
                proc = ctx.Process(
                    target=rank_process,
                    args=(rank_spec, writer, job_reader),
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
