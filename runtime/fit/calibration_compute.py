"""Rank side of calibration, its compute half: what a rank's compute costs on this machine.

Called by runtime.fit.calibration_rank (the `calibrate` job) in every rank at once;
runtime.fit.calibration fits the numbers into runtime.sim.compute's ComputeRates and the
cost model's wake-up. A MiniGPT block's forward and backward at the shapes the
lessons use, one eager operator, a compute right after a wait, an Adam step (per
element and per tensor): CPU seconds, with every rank busy at once. What one lesson
alone needs (FSDP2's overheads, a checkpoint's cost) is that lesson's probe
(scenarios/<lesson>/probes.py, runtime.fit.calibration_probes); those may use
`cpu_seconds` and the shapes' constants here.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.models import Block, GPTConfig
from runtime.fit.calibration import (
    ADAM_LARGE,
    ADAM_REPS,
    ADAM_SMALL,
    ADAM_TENSORS,
    BLOCK_ROUNDS,
    BLOCK_SHAPES,
    LIVE_GRAPHS,
    OP_REPS,
    WAKE_REPS,
)
from runtime.sim.compute import BLOCK_FORWARD_OPS


def cpu_seconds(fn: Any, reps: int = 5) -> float:
    """Median CPU seconds of `fn` (after one warm-up): what one core spends on it."""
    return cpu_seconds_by_turns([fn], reps)[0]


def cpu_seconds_by_turns(fns: list[Any], reps: int) -> list[float]:
    """Median CPU seconds of each of `fns`, called by turns `reps` rounds after one
    warm-up round: the machine's pace, which moves by the second, weighs on each alike."""
    samples: list[list[float]] = [[] for _ in fns]
    for rep in range(reps + 1):
        for fn, times in zip(fns, samples, strict=True):
            start = time.process_time()
            fn()
            if rep:
                times.append(time.process_time() - start)
    return [statistics.median(times) for times in samples]


def blocks() -> list[list[Any]]:
    """[hidden, tokens, seq, forward s, backward s, [forward + backward s of each input]]
    of one block, per shape, timed as a training step runs it: each forward on a new
    input, its activations kept until its backward, LIVE_GRAPHS of them alive at once
    (as a pipeline stage holds its microbatches'). Timed alone, a forward on the same input again and again ran up to
    a third faster than on fresh inputs with graphs alive (hidden 64, 2048 tokens); with
    every rank busy at once the two came within a few percent here, but a lesson never
    runs the first way. Every rank times the same shape at the same time (a barrier
    before each): a rank timing alone while the others are elsewhere shares no cache
    with them, and its CPU seconds came out up to 30% fewer than a run's, from one
    calibration to the next."""
    out = []
    for hidden, tokens, seq in BLOCK_SHAPES:
        block = Block(GPTConfig(vocab=64, seq=seq, hidden=hidden, heads=4, layers=1))
        forward: list[float] = []
        backward: list[float] = []
        dist.barrier()
        for rep in range(BLOCK_ROUNDS + 1):  # the first round warms up
            inputs = [
                torch.randn(tokens // seq, seq, hidden, requires_grad=True)
                for _ in range(LIVE_GRAPHS)
            ]
            outputs = []
            for x in inputs:
                start = time.process_time()
                outputs.append(block(x).sum())
                forward.append(time.process_time() - start)
            for y in outputs:
                start = time.process_time()
                y.backward()
                backward.append(time.process_time() - start)
            if rep == 0:
                forward.clear()
                backward.clear()
        # Last, each input's forward and backward together: their spread is the
        # compute's (runtime.fit.calibration.compute_spread).
        pairs = [f + b for f, b in zip(forward, backward, strict=True)]
        out.append(
            [hidden, tokens, seq, statistics.median(forward), statistics.median(backward), pairs]
        )
    return out


def wake(world_size: int) -> list[float]:
    """[after a wait, back to back]: median CPU seconds of a block's forward right after
    the rank blocked in an all-reduce of every rank (alone: a millisecond's sleep), and
    of the same forward two forwards later, by turns. The difference is what a lesson's
    compute pays after each receive or collective (Corrections.wake)."""
    block = Block(GPTConfig(vocab=64, seq=32, hidden=64, heads=4, layers=1))
    x, token = torch.randn(4, 32, 64), torch.zeros(1)
    after: list[float] = []
    back: list[float] = []
    with torch.no_grad():
        block(x)
        for rep in range(WAKE_REPS + 2):
            if world_size > 1:
                dist.all_reduce(token)
            else:
                time.sleep(1e-3)
            # After the wait, then (one forward later, warm again) back to back.
            for samples in (after, None, back):
                start = time.thread_time()
                block(x)
                if rep >= 2 and samples is not None:  # two warm-ups
                    samples.append(time.thread_time() - start)
    return [statistics.median(after), statistics.median(back)]


def op_seconds() -> float:
    """CPU seconds of one eager operator outside autograd: a one-token block forward
    under no_grad (its FLOPs next to nothing) over the BLOCK_FORWARD_OPS operators it
    dispatches, as a server's decode step runs hundreds of them."""
    block = Block(GPTConfig(vocab=64, seq=16, hidden=32, heads=4, layers=1))
    x = torch.randn(1, 1, 32)
    with torch.no_grad():
        for _ in range(20):  # warm-up: first calls fill torch's dispatch caches
            block(x)
        return cpu_seconds(lambda: block(x), reps=OP_REPS) / BLOCK_FORWARD_OPS


def adam() -> list[float]:
    """CPU seconds of one Adam step (torch's default on a CPU: a loop over the tensors)
    over one large tensor, then over many small ones: runtime.fit.calibration.fit_adam
    splits them into a cost per element and one per tensor. The two take turns, every
    rank at once, ADAM_REPS each, so that a slow spell of the machine falls on both rather than
    on one (timed one after the other, calibrations in a row disagreed by half)."""
    steps = [_adam_step([ADAM_LARGE]), _adam_step([ADAM_SMALL] * ADAM_TENSORS)]
    dist.barrier()
    return cpu_seconds_by_turns(steps, ADAM_REPS)


def _adam_step(sizes: list[int]) -> Any:
    """An Adam step over tensors of these sizes, their gradients set."""
    params = [torch.nn.Parameter(torch.randn(n)) for n in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    return torch.optim.Adam(params, lr=1e-3).step
