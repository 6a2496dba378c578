"""The rank process: rendezvous, run a lesson's rank code, record a Span per Action.

The real engine of docs/design.md's picture. Two ways in, one rank code:

- launched by runtime.engine.launch (via runtime.engine.bootstrap, then
  runtime.engine.launched_rank, which calls `run_rank`): rendezvous through a
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
returns. A launched rank ships its records packed (runtime.engine.span_buffer.pack:
Action indices and clock readings as bytes, one message per batch), so neither it nor
the parent builds a Span while the ranks run; the parent builds them at the end, or at
once for a listener (runtime.engine.launch.watch). `benchmarks/ring_allreduce.py`
measures what streaming costs, within one run: PLAYGROUND_STREAM_BLOCKS=B (a whole
number; unset or 0: off) makes a streamed run alternate blocks of B steps shipped as
usual (steps 0..B-1, 2B..3B-1, ...) with blocks of B steps that ship nothing: a
shipment due inside one is skipped and its records wait for the next, so streamed
blocks ship exactly as often as a streamed run does, and streamed and kept steps of
the same run can be compared side by side (`stream_blocks`).

Time zero is rank 0's CLOCK_MONOTONIC reading when all ranks left the start barrier
(perf_counter_ns is CLOCK_MONOTONIC on Linux, shared by the processes of one
host). Across hosts, runtime.engine.torchrun_rank estimates each rank's offset to rank
0 over the process group and shifts its records by it.

Engine part: imports torch, only ever inside rank processes.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import torch
import torch.distributed as dist

from runtime.engine.bootstrap import RankSpec
from runtime.engine.device_stats import device_counters
from runtime.engine.faults import Fault, schedule_timed_faults, slow_factors
from runtime.engine.rank_setup import load_entry, plain, rank_device
from runtime.engine.restart import Attempt
from runtime.engine.span_buffer import PACKED, STREAM_BLOCKS_ENV, SpanBuffer
from runtime.sim.program import Action
from runtime.sim.trace import Counter

# Records ship at most this often: each shipment wakes the parent, which shares the
# cores with the ranks, and a core taken mid-ring stalls the whole ring; five a second
# still moves a live view.
STREAM_INTERVAL_S = 0.2
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
        packed: bool = False,
        stream_blocks: int = 0,
    ):
        self.rank = rank
        self.world_size = world_size
        self.params = params
        self.actions = actions
        self.backend = backend
        self.device = device
        self._emit = emit
        self._stream = stream
        # Ship records packed (a launched rank, whose parent has its Actions), or as
        # Span dicts (torchrun's ranks, which write them out themselves).
        self._packed = packed
        # >0: streaming only in every other block of this many steps (STREAM_BLOCKS_ENV).
        self._blocks = stream_blocks
        self._channel = channel
        # Parsed --fault specs: rank code fires the step-based ones (timers fire the rest).
        self.faults = list(faults or [])
        # The `slow` fault: how many times slower this rank's compute is (1.0: as it is).
        self.slow = slow_factors(self.faults).get(rank, 1.0)
        self._last_device_ns = 0
        # Under the restart supervisor: which attempt, where checkpoints live, and
        # the first attempt's time origin. None when launched plainly or by torchrun.
        self.attempt = attempt
        self._buffer = SpanBuffer(len(self.actions), self.actions if packed else ())
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
            self._flush_soon(ships=self._ships(action.step))

    def sample(self, category: str, value: float, series: str | None = None) -> None:
        """A Counter sample now (memory in bytes, microbatches in flight, ...)."""
        counter = Counter(self.rank, category, self.now(), float(value), series).to_dict()
        self.counters.append(counter)
        if self._stream and not self._executing:  # inside `execute`: shipped between steps
            self._flush_soon()

    def _ships(self, step: int | None) -> bool:
        """Whether records ship at the end of `step`: yes, unless it lies in a kept block."""
        return self._blocks <= 0 or step is None or (step // self._blocks) % 2 == 0

    def _flush_soon(self, interval_s: float | None = None, *, ships: bool = True) -> None:
        # Batches of records, at most `interval_s` (STREAM_INTERVAL_S) old: one message
        # per span would wake the parent (which shares the cores) hundreds of times a second.
        interval_s = STREAM_INTERVAL_S if interval_s is None else interval_s
        now = time.perf_counter_ns()
        if now - self._last_flush_ns >= interval_s * 1e9:
            if ships:
                self.flush()
            else:
                # Due inside a kept block: this shipment is skipped, its records wait for
                # a later one. So the streamed blocks ship as often as a streamed run does,
                # neither more (all that waited, at once) nor less.
                self._last_flush_ns = now

    def flush(self) -> None:
        """Send the records not yet streamed to the parent (without streaming: move them
        out of the buffer, kept for the end)."""
        if self._stream and self._packed:
            if self._buffer or self.spans or self.counters:
                message = (PACKED, self.rank, self.spans, self.counters, self.t0_ns)
                self._emit((*message, *self._buffer.pack()))
                self.spans, self.counters = [], []
            self._last_flush_ns = time.perf_counter_ns()
            return
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
        stream, step, ships = self._stream, None, True
        self._executing = True
        try:
            for action in actions:
                if stream and action.step != step:
                    # A new step: what is due ships now, before its first action (a
                    # barrier at its start lines the ranks up again), never between two
                    # timed actions of one step.
                    if step is not None:
                        self._flush_soon(ships=ships)
                    step = action.step
                    ships = self._ships(step)
                elif stream:  # a long step, or none: a live view still moves
                    self._flush_soon(STEPLESS_INTERVAL_S, ships=ships)
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
        if stream:  # the batch is done: between two of the lesson's steps
            self._flush_soon(ships=self._ships(step))

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
    packed: bool = False,
) -> dict[str, Any]:
    """Shared by both ways in, after the process group exists: the envelope of the
    rank's result (the lesson's record, the backend, torch's version, and the
    records not streamed). `packed`: records stream packed (a launched rank)."""
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
        packed=packed,
        stream_blocks=stream_blocks(),
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


def stream_blocks() -> int:
    """STREAM_BLOCKS_ENV as a number of steps (0 when unset): what a benchmark sets to
    compare streamed and kept steps within one run. ValueError (one line) otherwise."""
    text = os.environ.get(STREAM_BLOCKS_ENV, "").strip()
    if not text:
        return 0
    if not text.isdecimal() or len(text) > 6:
        raise ValueError(f"{STREAM_BLOCKS_ENV}={text[:40]!r}: give a whole number of steps")
    return int(text)
