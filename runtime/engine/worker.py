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

Tracing that does not disturb what it traces (runtime.engine.span_buffer): a Span is
recorded into slots made before the run and shipped to the parent off the timed path,
batched: `execute` ships once its batch of actions is done, or where the step changes
inside the batch, at most every STREAM_INTERVAL_S; inside one long step, or a batch
without steps (a pipeline schedule), at most every STEPLESS_INTERVAL_S, so a live view
still moves. No thread ships them: one would hold the GIL just when a rank's wait
returns. `benchmarks/ring_allreduce.py` measures what streaming costs.

Time zero is rank 0's CLOCK_MONOTONIC reading when all ranks left the start barrier
(perf_counter_ns is CLOCK_MONOTONIC on Linux, shared by the processes of one
host). Across hosts, runtime.engine.torchrun_rank estimates each rank's offset to rank
0 over the process group and shifts its records by it.

Engine part: imports torch, only ever inside rank processes.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, Generic, TypeVar

import torch
import torch.distributed as dist

from runtime.engine.bootstrap import RankSpec, log_to
from runtime.engine.device_stats import device_counters
from runtime.engine.faults import Fault, schedule_timed_faults, slow_factors
from runtime.engine.rank_setup import load_entry, plain, rank_device, resolve_backend
from runtime.engine.restart import Attempt
from runtime.engine.span_buffer import SpanBuffer
from runtime.sim.program import Action
from runtime.sim.trace import Counter

STREAM_INTERVAL_S = 0.05
# Inside one long step, or a batch without steps (a pipeline schedule), records ship
# this often: a live view still moves.
STEPLESS_INTERVAL_S = 0.5
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
        self._buffer = SpanBuffer(len(self.actions))
        self._t0_ns = time.perf_counter_ns()
        self._executing = False
        # Spans taken out of the buffer and Counters, not yet shipped (all of them
        # until the end when not streaming).
        self.spans: list[dict[str, Any]] = []
        self.counters: list[dict[str, Any]] = []
        self._last_flush_ns = time.perf_counter_ns()

    @property
    def t0_ns(self) -> int:
        """Time zero of this rank's Spans (perf_counter_ns)."""
        return self._t0_ns

    @t0_ns.setter
    def t0_ns(self, value: int) -> None:
        # Records taken before time zero moves keep the zero they were taken under.
        if self._buffer:
            self.spans.extend(self._buffer.take(self._t0_ns))
        self._t0_ns = value

    def start_clock(self) -> None:
        """Barrier, then agree on time zero: rank 0's clock as the barrier released it."""
        dist.barrier()
        t0 = torch.tensor([time.perf_counter_ns()], dtype=torch.int64)
        dist.broadcast(t0, src=0)
        self.t0_ns = int(t0.item())

    def now(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9

    def record(self, action: Action, start_ns: int, end_ns: int) -> None:
        """A Span of `action` (perf_counter_ns readings). Called by a lesson's own timing
        loop, it ships what is due at once; `execute` ships between its steps instead."""
        self._buffer.add(action, start_ns, end_ns)
        if self._stream:
            self._flush_soon()

    def sample(self, category: str, value: float, series: str | None = None) -> None:
        """A Counter sample now (memory in bytes, microbatches in flight, ...)."""
        counter = Counter(self.rank, category, self.now(), float(value), series).to_dict()
        self.counters.append(counter)
        if self._stream and not self._executing:  # inside `execute`: shipped between steps
            self._flush_soon()

    def _flush_soon(self, interval_s: float | None = None) -> None:
        # Batches of records, at most `interval_s` (STREAM_INTERVAL_S) old: one message
        # per span would wake the parent (which shares the cores) hundreds of times a second.
        interval_s = STREAM_INTERVAL_S if interval_s is None else interval_s
        if time.perf_counter_ns() - self._last_flush_ns >= interval_s * 1e9:
            self.flush()

    def flush(self) -> None:
        """Send the records not yet streamed to the parent (without streaming: move them
        out of the buffer, kept for the end)."""
        if self._buffer:
            self.spans.extend(self._buffer.take(self.t0_ns))
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
        add, channel, cuda = self._buffer.add, self._channel, self.device.type == "cuda"
        stream, step = self._stream, None
        self._executing = True
        try:
            for action in actions:
                if stream and action.step != step:
                    # A new step: what is due ships now, before its first action (a
                    # barrier at its start lines the ranks up again), never between two
                    # timed actions of one step.
                    if step is not None:
                        self._flush_soon()
                    step = action.step
                elif stream:  # a long step, or none: a live view still moves
                    self._flush_soon(STEPLESS_INTERVAL_S)
                if channel is not None:
                    channel.current_action = action.id
                start = time.perf_counter_ns()
                local = handler(action)
                if self.slow != 1.0:
                    took = local
                    if action.is_compute and not isinstance(local, float):
                        took = (time.perf_counter_ns() - start) / 1e9
                    if isinstance(took, float) and took > 0:
                        time.sleep((self.slow - 1.0) * took)
                add(action, start, time.perf_counter_ns())
                if cuda:
                    self.sample_device()
        finally:
            self._executing = False
        if channel is not None:
            channel.current_action = None
        if stream:
            self._flush_soon()  # the batch is done: between two of the lesson's steps

    def sample_device(self) -> None:
        """CUDA ranks, at most every STREAM_INTERVAL_S: runtime.engine.device_stats' Counters."""
        now = time.perf_counter_ns()
        if now - self._last_device_ns >= STREAM_INTERVAL_S * 1e9:
            self._last_device_ns = now
            for category, value in device_counters(self.device):
                self.sample(category, value)


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
    schedule_timed_faults(spec.faults, spec.rank)
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
