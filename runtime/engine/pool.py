"""Warm ranks: keep a run's rank processes and their process group for the next run.

Starting ranks is most of what a short run costs on a small machine: spawn,
import torch, rendezvous (about 3.7 s for 4 ranks on 2 cores), while the run
itself may take a fraction of a second. The app runs one lesson again and
again, so a RankPool keeps the ranks of the last run alive, their process
group initialised, and hands them the next job:

- a job is what a cold launch hands its ranks (runtime.engine.spawn.rank_specs: the
  entry, typed params, this rank's Actions), sent over a second pipe per rank;
  the rank runs it through runtime.engine.worker.run_rank exactly as a fresh rank
  would (same seeds, same thread count), sends `done` and waits for the next
  (runtime.engine.launched_rank.launched_main). Its heartbeats keep flowing all the while;
- the parent side is the launcher's own (runtime.engine.spawn.start, then
  runtime.engine.launch.watch): the same streamed records, failure detection, root
  cause and cancel; the first job of a pool is a cold launch whose ranks stay;
- any failure, cancel or timeout tears the pool down (every rank killed, each
  one waited for): a group that saw a fault is never trusted again, and the
  next run starts cold. So does a job for another world size, backend or
  thread count, and a rank found dead while the pool was idle;
- runs meant to lose ranks stay cold (runtime.engine.pool refuses them: the caller
  launches them itself): faults kill or stop a rank on purpose, and the restart
  supervisor starts every rank of each attempt afresh, as torchrun does; so do
  runs that rendezvous over TCP (`host`), which listen beyond loopback.

Loopback only, like a cold launch: the ranks rendezvous through a FileStore (a
private file in the runs folder, which pruning never removes: it deletes
folders) and bind gloo/NCCL to the loopback interface. The store's name holds the
pool's pid: a process killed with its pool cannot unlink it, so the next pool to start
removes every store whose process is gone (runtime.engine.owners).

The ranks are spawned from a thread the pool owns for its whole life: each rank
asks the kernel for SIGKILL when its parent *thread* ends (PR_SET_PDEATHSIG), and
the app runs each job in a short-lived worker thread.

Engine part, but torch-free (the UI process holds the pool).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from runtime.engine.files import make_private_dir
from runtime.engine.launch import LaunchResult, LaunchSpec, RunCancelled, watch
from runtime.engine.owners import owner_alive
from runtime.engine.rundirs import new_run_dir, runs_root
from runtime.engine.spawn import Ranks, rank_specs, start, threads_for


def poolable(spec: LaunchSpec) -> bool:
    """Whether `spec` may run on warm ranks (see the module's docstring for why not)."""
    return not spec.faults and spec.attempt is None and spec.host is None


class RankPool:
    """At most one set of warm ranks, and the jobs run on them, one at a time."""

    def __init__(self) -> None:
        self._busy = threading.Lock()  # one job at a time
        self._state = threading.Lock()  # guards the fields below (close() may come any time)
        self._ranks: Ranks | None = None
        self._key: tuple[int, str, int] | None = None
        self._store: Path | None = None
        self._spawner: ThreadPoolExecutor | None = None
        self._closed = False

    def __enter__(self) -> RankPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pids(self) -> list[int]:
        """The warm ranks' process ids (empty when there are none)."""
        ranks = self._ranks
        return ranks.pids if ranks is not None else []

    def launch(
        self,
        spec: LaunchSpec,
        on_message: Callable[[tuple], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> LaunchResult:
        """Run `spec` on the warm ranks if they fit it, else on fresh ones kept afterwards.
        Raises like runtime.engine.launch.launch, and then no rank of the pool is left."""
        if not poolable(spec):
            raise ValueError("runs with faults, restarts or a host are launched cold")
        key = (spec.world_size, spec.backend, threads_for(spec))
        with self._busy:
            run_dir = spec.run_dir or new_run_dir(spec.name)
            make_private_dir(run_dir)  # 0700, whatever the umask; never through a symlink
            started = time.monotonic()
            ranks = self._send(spec, run_dir, key)
            warm = ranks is not None
            try:
                if ranks is None:
                    ranks = self._start(spec, run_dir, key)
                result = watch(spec, ranks, run_dir, on_message, cancel, started, warm=warm)
            except BaseException as exc:
                self.discard()  # never reuse a group after a fault, a cancel or a timeout
                with self._state:
                    closed = self._closed
                if closed and isinstance(exc, OSError):
                    # close() tore the ranks (and their pipes) down under the watch: that is
                    # a cancel, not a broken pipe for the caller to make sense of.
                    raise RunCancelled("the rank pool was closed during the run") from None
                raise
            result.warm = warm
            return result

    def discard(self) -> None:
        """Tear the warm ranks down: every one killed and waited for."""
        with self._state:
            ranks, store = self._ranks, self._store
            self._ranks = self._key = self._store = None
        if ranks is not None:
            ranks.stop()
        if store is not None:
            with contextlib.suppress(OSError):
                store.unlink()

    def close(self) -> None:
        """No more jobs: the ranks are torn down now, even while a job runs (it fails)."""
        with self._state:
            self._closed = True
            spawner, self._spawner = self._spawner, None
        self.discard()
        if spawner is not None:
            spawner.shutdown(wait=False)

    # -- inside launch ----------------------------------------------------------------
    def _send(self, spec: LaunchSpec, run_dir: Path, key: tuple) -> Ranks | None:
        """Hand the job to the warm ranks if they fit it and are all well; None: go cold."""
        with self._state:
            ranks, fits = self._ranks, self._key == key
        if ranks is None:
            return None
        if fits and _idle_and_well(ranks):
            try:
                for conn, rank_spec in zip(ranks.jobs, rank_specs(spec, run_dir), strict=True):
                    conn.send(rank_spec)
                return ranks
            except OSError:
                pass  # a rank went away just now: start afresh
        self.discard()
        return None

    def _start(self, spec: LaunchSpec, run_dir: Path, key: tuple) -> Ranks:
        with self._state:
            if self._closed:
                raise RunCancelled("the rank pool is closed")
            if self._spawner is None:
                self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rank-pool")
            spawner = self._spawner
        # The FileStore: a private file (0600, in the 0700 runs folder) for the pool's life,
        # named with this process's pid so that a later pool can tell it was left behind.
        root = runs_root()
        sweep_stale_stores(root)
        fd, name = tempfile.mkstemp(prefix=f".pool-{os.getpid()}-", suffix=".store", dir=root)
        os.close(fd)
        store = Path(name)
        try:
            ranks = spawner.submit(start, spec, run_dir, store=store, jobs=True).result()
        except BaseException:
            store.unlink(missing_ok=True)
            raise
        with self._state:
            self._ranks, self._key, self._store = ranks, key, store
            closed = self._closed
        if closed:  # closed while they started
            self.discard()
            raise RunCancelled("the rank pool is closed")
        return ranks


def _idle_and_well(ranks: Ranks) -> bool:
    """Every rank alive, its pipe open, and nothing but heartbeats said since its last job."""
    for proc, conn in zip(ranks.procs, ranks.conns, strict=True):
        if proc.exitcode is not None:
            return False
        try:
            while conn.poll():
                if conn.recv()[0] != "heartbeat":
                    return False
        except (EOFError, OSError):
            return False
    return True


def sweep_stale_stores(root: Path) -> list[Path]:
    """Remove the FileStores of pools whose process is gone (SIGKILLed: it could not
    unlink its own); a store whose owner runs, or whose name holds no pid (an older
    version's), stays. Returns what was removed."""
    removed = []
    for store in root.glob(".pool-*-*.store"):
        pid = store.name.removeprefix(".pool-").split("-", 1)[0]
        try:
            made = store.stat().st_mtime
        except OSError:
            continue  # removed meanwhile
        if pid.isdigit() and not owner_alive(int(pid), made):
            with contextlib.suppress(OSError):
                store.unlink()
                removed.append(store)
    return removed
