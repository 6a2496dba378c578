"""Bucketed DDP by hand, and torch's DDP watched through a comm hook: lesson 6's overlap.

The rank side of scenarios.mixed_precision.buckets (which parameters share an
all-reduce; the same rule, pure, that the Program and the prediction use):

- `HandDDP`: a post-accumulate-grad hook on every parameter marks it ready;
  when a bucket's gradients (and every earlier bucket's) are ready, its
  gradients are flattened, divided by the world size (as torch does, before the
  sum) and all-reduced with `async_op=True` at once, while backward goes on;
  `finish` waits for them all before the optimizer step and copies the sums
  back. Iteration 0 uses the construction-order buckets
  (`buckets.initial_buckets`); after it the buckets are rebuilt from the ready
  order this rank observed (`buckets.rebuilt_buckets`), as torch's Reducer does.
- `TorchDDP`: torch's DistributedDataParallel with the same caps; a comm hook
  reads each bucket's index and buffer size and launches the same async
  all-reduce, so both are timed alike.

Both record, per step, when each part of backward finished (`ready_ns`, from
the parameters' hooks), when each bucket's all-reduce was launched and when it
ended (a callback on its future: gloo's thread runs it at completion), so
scenarios.mixed_precision.rank can draw backward and the buckets on one clock.
`poison(step)` puts an inf into this rank's first bucket before it is reduced
(the `overflow` fault): the all-reduce spreads it to every rank.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

from scenarios.mixed_precision import buckets

MiB = float(2**20)


class Clock:
    """Per step: each parameter's ready time and each bucket's launch and end (ns)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # futures' callbacks run on gloo's threads
        self.reset()

    def reset(self) -> None:
        self.ready_ns: dict[int, int] = {}
        self.launched_ns: dict[int, int] = {}
        self.ended_ns: dict[int, int] = {}
        self.sizes: dict[int, int] = {}

    def ready(self, index: int) -> None:
        self.ready_ns[index] = time.perf_counter_ns()

    def launch(
        self, bucket: int, nbytes: int, work: torch.futures.Future, at_ns: int
    ) -> torch.futures.Future:
        """`at_ns`: read just before the all-reduce was called (the call itself may
        already do part of the work)."""
        self.launched_ns[bucket] = at_ns
        self.sizes[bucket] = nbytes

        def ended(fut: torch.futures.Future) -> torch.Tensor:
            with self.lock:
                self.ended_ns[bucket] = time.perf_counter_ns()
            return fut.value()[0] if isinstance(fut.value(), list) else fut.value()

        return work.then(ended)


class HandDDP:
    """Data parallelism with gradient buckets all-reduced while backward still runs."""

    def __init__(self, model: nn.Module, cap: int, first_cap: int, clock: Clock):
        self.params = list(model.parameters())
        self.world = dist.get_world_size()
        self.sizes = [p.numel() * p.element_size() for p in self.params]
        self.cap, self.first_cap = cap, first_cap
        self.buckets = buckets.initial_buckets(self.sizes, cap, first_cap)
        self.first_buckets = buckets.bucket_bytes(self.buckets, self.sizes)
        self.clock = clock
        self.iteration = 0
        self.observed: list[int] = []  # iteration 0's ready order
        self.poisoned = False  # the next first bucket carries an inf (overflow fault)
        self._begin()
        for index, param in enumerate(self.params):
            param.register_post_accumulate_grad_hook(self._hook(index))

    def _begin(self) -> None:
        self.bucket_of = {i: j for j, bucket in enumerate(self.buckets) for i in bucket}
        self.pending = [len(bucket) for bucket in self.buckets]
        self.next = 0
        self.flats: list[torch.Tensor] = []
        self.futures: list[torch.futures.Future] = []

    def _hook(self, index: int) -> Callable[[torch.Tensor], None]:
        def ready(param: torch.Tensor) -> None:
            self.clock.ready(index)
            if self.iteration == 0:
                self.observed.append(index)
            self.pending[self.bucket_of[index]] -= 1
            # Buckets are reduced in index order, each as soon as it and the ones before are full.
            while self.next < len(self.buckets) and self.pending[self.next] == 0:
                self._launch(self.next)
                self.next += 1

        return ready

    def _launch(self, j: int) -> None:
        flat = torch.cat([self.params[i].grad.reshape(-1) for i in self.buckets[j]])
        flat.div_(self.world)  # torch divides before the sum: the same rounding
        if j == 0 and self.poisoned:
            flat[0] = math.inf
        at = time.perf_counter_ns()
        work = dist.all_reduce(flat, async_op=True)
        self.flats.append(flat)
        nbytes = flat.numel() * flat.element_size()
        self.futures.append(self.clock.launch(j, nbytes, work.get_future(), at))

    def finish(self) -> None:
        """Wait for every bucket (DDP's wait before the optimizer step), copy the sums back;
        after iteration 0, rebuild the buckets from the ready order observed."""
        for fut in self.futures:
            fut.wait()
        for j, flat in enumerate(self.flats):
            offset = 0
            for i in self.buckets[j]:
                grad = self.params[i].grad
                grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
                offset += grad.numel()
        if self.iteration == 0:
            self.buckets = buckets.rebuilt_buckets(self.sizes, self.observed, self.cap,
                                                   self.first_cap)  # fmt: skip
        self.iteration += 1
        self.poisoned = False
        self._begin()

    def bucket_sizes(self) -> list[int]:
        return buckets.bucket_bytes(self.buckets, self.sizes)

    def buffer_bytes(self) -> int:
        return sum(self.sizes)


class TorchDDP:
    """torch's DDP with the lesson's caps; a comm hook times and sizes its buckets."""

    def __init__(self, model: nn.Module, cap: int, first_cap: int, clock: Clock):
        from torch.nn.parallel import DistributedDataParallel

        self.params = list(model.parameters())
        self.clock = clock
        self.poisoned = False
        self.world = dist.get_world_size()
        if first_cap:
            self.ddp = DistributedDataParallel(
                model, bucket_cap_mb_list=[first_cap / MiB, cap / MiB]
            )
        else:
            self.ddp = DistributedDataParallel(model, bucket_cap_mb=cap / MiB)
        self.ddp.register_comm_hook(None, self._hook)
        self.seen: list[list[int]] = []  # per iteration, the bucket sizes in index order
        for index, param in enumerate(self.params):
            param.register_post_accumulate_grad_hook(lambda _p, i=index: clock.ready(i))

    # No annotations: torch checks them against its own types, and these would be strings.
    def _hook(self, _state, bucket):  # type: ignore[no-untyped-def]
        buffer = bucket.buffer()
        buffer.div_(self.world)
        if bucket.index() == 0 and self.poisoned:
            buffer[0] = math.inf
        at = time.perf_counter_ns()
        work = dist.all_reduce(buffer, async_op=True)
        nbytes = buffer.numel() * buffer.element_size()
        return self.clock.launch(bucket.index(), nbytes, work.get_future(), at)

    def __call__(self, *args: torch.Tensor) -> torch.Tensor:
        return self.ddp(*args)

    def finish(self) -> None:
        """torch's Reducer waited for its buckets at the end of backward; note their sizes."""
        sizes = self.clock.sizes
        self.seen.append([sizes[j] for j in sorted(sizes)])
        self.poisoned = False

    def logged_buckets(self) -> list[int]:
        """`rebuilt_bucket_sizes` from torch's own logging data."""
        text = str(self.ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", ""))
        return [int(x) for x in text.replace(" ", "").split(",") if x]
