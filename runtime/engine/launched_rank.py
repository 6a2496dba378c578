"""A rank launched by runtime.engine.launch: its entry, rendezvous and warm-pool loop.

runtime.engine.bootstrap calls `launched_main` (spawn.WORKER_MAIN) in each rank process:
it joins the process group on loopback (the run's FileStore, or a TCPStore bound to the
host asked for), runs its job through runtime.engine.worker.run_rank with records
streamed packed over the rank's pipe, and, as a rank of a warm pool
(runtime.engine.pool), waits for its next job there, set up as a fresh rank's would be.
Any exception is reported in one line (`error`) before the process exits non-zero, so
the parent names the rank; a clean exit skips interpreter teardown (gloo's threads).

Real engine part: torch, rank processes only.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.bootstrap import RankSpec, log_to
from runtime.engine.rank_setup import resolve_backend
from runtime.engine.worker import run_rank


def launched_main(spec: RankSpec, channel: Any, jobs: Any = None) -> None:
    """Entry from runtime.engine.bootstrap: rendezvous on loopback, report over the pipe.
    With `jobs` (a warm pool's pipe), run each job that arrives there, until it closes."""
    rank = spec.rank
    try:
        torch.set_num_threads(spec.threads)
        backend = resolve_backend(spec.backend)
        timeout = timedelta(seconds=spec.timeout_s)
        dist.init_process_group(
            backend, rank=rank, world_size=spec.world_size, timeout=timeout, **_store(spec)
        )
        job: RankSpec | None = spec
        warm = False
        while job is not None:
            channel.send(("ready", rank, backend, os.getpid(), warm))
            envelope = run_rank(
                job, backend, emit=channel.send, stream=job.stream, channel=channel, packed=True
            )
            channel.send(("done", rank, envelope))
            gc.collect()  # the job's cycles, after its result is on its way (run_rank)
            job, warm = _next_job(jobs), True
    except BaseException as exc:  # report, then exit non-zero: the parent names the rank
        traceback.print_exc()
        with contextlib.suppress(OSError, ValueError):
            channel.send(("error", rank, f"{type(exc).__name__}: {exc}".splitlines()[0][:500]))
        sys.stdout.flush()
        os._exit(1)
    with contextlib.suppress(Exception):  # teardown after success; the result is already sent
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: gloo threads can make a clean exit slow


def _store(spec: RankSpec) -> dict[str, Any]:
    """How init_process_group meets its peers: the FileStore's URL as it is; for
    tcp://HOST:PORT, rank 0's TCPStore on a socket it bound to HOST itself. torch's own
    tcp:// handler listens on every interface whatever HOST says, and `--host 127.0.0.1`
    must not put a listener on the network."""
    if not spec.rendezvous.startswith("tcp://"):
        return {"init_method": spec.rendezvous}
    host, _, port = spec.rendezvous[len("tcp://") :].rpartition(":")
    timeout = timedelta(seconds=spec.timeout_s)
    if spec.rank != 0:
        return {"store": dist.TCPStore(host, int(port), spec.world_size, False, timeout)}
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen()
    store = dist.TCPStore(
        host, int(port), spec.world_size, True, timeout, master_listen_fd=listener.fileno()
    )
    _LISTENERS.append(listener)  # the store serves on its descriptor: kept open with it
    return {"store": store}


_LISTENERS: list[socket.socket] = []


def _next_job(jobs: Any) -> RankSpec | None:
    """A warm rank's next job, with the process set up as a fresh rank's would be (a job
    may change torch's thread count; grad mode is per thread); None once the pool closes."""
    if jobs is None:
        return None
    try:
        job = jobs.recv()
    except (EOFError, OSError):
        return None
    if job is None:
        return None
    log_to(job.run_dir, job.rank)
    torch.set_num_threads(job.threads)
    torch.set_grad_enabled(True)
    return job
