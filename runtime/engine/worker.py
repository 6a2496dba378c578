"""The rank process: rendezvous, run a lesson's rank code, record a Span per Action.

The real engine of docs/design.md's picture. Two ways in, one rank code:

- launched by runtime.engine.launch (via runtime.engine.bootstrap): rendezvous through a
  FileStore in the run's private directory (loopback only: no listener), records
  streamed to the parent over the rank's pipe, heartbeats watched by the parent;
  a rank of a warm pool (runtime.engine.pool) then waits for its next job, a RankSpec
  like the first, and runs it in the same process group;
- under torchrun (scenarios/torchrun.py looks the lesson up and calls
  runtime.engine.torchrun_rank): env:// rendezvous, and each rank writes its spans
  and result to an output directory (read back by `playground replay`).

The caller hands each rank everything as data (docs/design.md's dependency
injection): the rank entry ("module:function", chosen by the lesson), the
typed params, this rank's Actions, its faults and, under the restart
supervisor, its Attempt. Nothing here names a lesson or imports `scenarios`.
The entry gets a RankContext and returns the lesson's typed result record (a
dataclass), sent back as plain JSON-able data.

A slowed rank (the `slow` fault) is slowed in `RankContext.execute`, for every
lesson alike: after each compute Action it sleeps (factor − 1) times what the
action took (a sleep, not a busy loop: the cores go to the others meanwhile),
after a ring step in proportion to the seconds its handler says it reduced.
CUDA ranks also record device memory and utilisation (runtime.engine.device_stats).

Records (Spans and Counters) are batched every 50 ms; time zero is rank 0's
CLOCK_MONOTONIC reading when all ranks left the start barrier
(perf_counter_ns is CLOCK_MONOTONIC on Linux, shared by the processes of one
host). Across hosts the offsets are not corrected yet.

Engine part: imports torch, only ever inside rank processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, Generic, TypeVar

import torch
import torch.distributed as dist

from runtime.engine.bootstrap import RankSpec, log_to
from runtime.engine.device_stats import device_counters
from runtime.engine.faults import Fault, slow_factors
from runtime.engine.restart import Attempt
from runtime.sim.program import Action
from runtime.sim.simulate import span_for
from runtime.sim.trace import Counter

STREAM_INTERVAL_S = 0.05
P = TypeVar("P")


class RankContext(Generic[P]):
    """What a lesson's rank entry gets: who it is, its typed params, its Actions, and
    the recorder of Spans and Counters."""

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        params: P,
        actions: list[Action],
        backend: str,
        device: torch.device,
        emit: Callable[[tuple], None],
        stream: bool,
        channel: Any = None,
        faults: list[Fault] | None = None,
        attempt: Attempt | None = None,
    ):
        self.rank = rank
        self.world_size = world_size
        self.params = params
        self.actions = actions
        self.backend = backend
        self.device = device
        self._emit = emit
        self._stream = stream
        self._channel = channel
        # Parsed --fault specs: rank code fires the step-based ones (timers fire the rest).
        self.faults = list(faults or [])
        # The `slow` fault: how many times slower this rank's compute is (1.0: as it is).
        self.slow = slow_factors(self.faults).get(rank, 1.0)
        self._last_device_ns = 0
        # Under the restart supervisor: which attempt, where checkpoints live, and
        # the first attempt's time origin. None when launched plainly or by torchrun.
        self.attempt = attempt
        self.t0_ns = time.perf_counter_ns()
        self.spans: list[dict[str, Any]] = []
        self.counters: list[dict[str, Any]] = []
        self._last_flush_ns = time.perf_counter_ns()

    def start_clock(self) -> None:
        """Barrier, then agree on time zero: rank 0's clock as the barrier released it."""
        dist.barrier()
        t0 = torch.tensor([time.perf_counter_ns()], dtype=torch.int64)
        dist.broadcast(t0, src=0)
        self.t0_ns = int(t0.item())

    def now(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9

    def record(self, action: Action, start_ns: int, end_ns: int) -> None:
        span = span_for(
            action, (start_ns - self.t0_ns) / 1e9, (end_ns - self.t0_ns) / 1e9
        ).to_dict()
        self.spans.append(span)
        if self._stream:
            self._flush_soon()

    def sample(self, category: str, value: float, series: str | None = None) -> None:
        """A Counter sample now (memory in bytes, microbatches in flight, ...)."""
        counter = Counter(self.rank, category, self.now(), float(value), series).to_dict()
        self.counters.append(counter)
        if self._stream:
            self._flush_soon()

    def _flush_soon(self) -> None:
        # Batches of records, at most STREAM_INTERVAL_S old: one message per span
        # would wake the parent (which shares the cores) hundreds of times a second.
        if time.perf_counter_ns() - self._last_flush_ns >= STREAM_INTERVAL_S * 1e9:
            self.flush()

    def flush(self) -> None:
        """Send the records not yet streamed to the parent."""
        if self._stream and (self.spans or self.counters):
            self._emit(("records", self.rank, self.spans, self.counters))
            self.spans, self.counters = [], []
        self._last_flush_ns = time.perf_counter_ns()

    def execute(self, actions: Iterable[Action], handler: Callable[[Action], float | None]) -> None:
        """Run each action with `handler`, timing it into a Span. A handler may return the
        seconds of local compute inside a communication action (a ring step's reduction):
        what a slowed rank slows besides its compute actions; or, for a compute action
        whose span also waits on its peers (FSDP2's forward runs its all-gathers), the
        seconds of its own compute, which is all a slowed rank slows of it (the
        simulator slows the compute alone: runtime.sim.eventloop)."""
        for action in actions:
            if self._channel is not None:
                self._channel.current_action = action.id
            start = time.perf_counter_ns()
            local = handler(action)
            if self.slow != 1.0:
                took = local
                if action.is_compute and not isinstance(local, float):
                    took = (time.perf_counter_ns() - start) / 1e9
                if isinstance(took, float) and took > 0:
                    time.sleep((self.slow - 1.0) * took)
            self.record(action, start, time.perf_counter_ns())
            if self.device.type == "cuda":
                self.sample_device()
        if self._channel is not None:
            self._channel.current_action = None

    def sample_device(self) -> None:
        """CUDA ranks, at most every STREAM_INTERVAL_S: runtime.engine.device_stats' Counters."""
        now = time.perf_counter_ns()
        if now - self._last_device_ns >= STREAM_INTERVAL_S * 1e9:
            self._last_device_ns = now
            for category, value in device_counters(self.device):
                self.sample(category, value)


def resolve_backend(requested: str) -> str:
    if requested == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if requested == "nccl" and not torch.cuda.is_available():
        raise RuntimeError(
            "backend nccl needs CUDA, and torch sees no GPU here; use --backend gloo"
        )
    return requested


def rank_device(backend: str) -> torch.device:
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def load_entry(entry: str) -> Callable[[RankContext[Any]], Any]:
    """The rank entry a lesson chose ("package.module:function")."""
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


def plain(result: Any) -> dict[str, Any]:
    """A lesson's result record (a dataclass) as JSON-able data; jobs may return dicts."""
    if result is None:
        return {}
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.asdict(result)
    return dict(result)


def _schedule_faults(faults: list[Fault], rank: int) -> None:
    for fault in faults:
        if fault.rank != rank or fault.after_s is None:
            continue  # step and checkpoint faults are fired by the rank code (ctx.faults)
        sig = signal.SIGKILL if fault.kind == "kill" else signal.SIGSTOP
        timer = threading.Timer(fault.after_s, os.kill, args=(os.getpid(), sig))
        timer.daemon = True
        timer.start()


def run_rank(
    spec: RankSpec,
    backend: str,
    *,
    emit: Callable[[tuple], None],
    stream: bool,
    channel: Any = None,
) -> dict[str, Any]:
    """Shared by both ways in, after the process group exists: the envelope of the
    rank's result (the lesson's record, the backend, torch's version, and the
    records not streamed)."""
    torch.manual_seed(1234 + spec.rank)
    _schedule_faults(spec.faults, spec.rank)
    ctx: RankContext[Any] = RankContext(
        rank=spec.rank,
        world_size=spec.world_size,
        params=spec.params,
        actions=list(spec.actions),
        backend=backend,
        device=rank_device(backend),
        emit=emit,
        stream=stream,
        channel=channel,
        faults=spec.faults,
        attempt=spec.attempt,
    )
    # The cyclic garbage collector stays off while the rank runs its job. A full
    # collection scans every object the imports made (torch's: hundreds of thousands),
    # which takes far longer than a small compute and would land inside timed spans.
    # Those objects are frozen out of every later collection, the job's own cycles
    # wait for its end (launched_main collects between a warm rank's jobs), and
    # reference counting frees the rest as it goes.
    gc.freeze()
    gc.disable()
    try:
        result = plain(load_entry(spec.entry)(ctx))
    finally:
        gc.enable()
    ctx.flush()
    envelope: dict[str, Any] = {
        "result": result,
        "backend": backend,
        # A plain str: torch.__version__ is a TorchVersion, and unpickling one would
        # import torch into the parent (the UI process, which must never import it).
        "torch_version": str(torch.__version__),
        "t0_ns": ctx.t0_ns,  # the spans' time zero: when the first action ran, for the parent
    }
    if not stream:
        envelope["spans"] = ctx.spans
        envelope["counters"] = ctx.counters
    return envelope


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
            envelope = run_rank(job, backend, emit=channel.send, stream=job.stream, channel=channel)
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
