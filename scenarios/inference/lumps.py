"""A lumped record read back: the iterations a run stands for, in the loop's order.

Part of lesson 7's mechanism, pure. The drivers (scenarios.inference.serve) make a run
of alike decode iterations one record (`repeat` of them) and replicas' records each
engine's in its order. `expand` gives back the very iterations the step-by-step loop
makes, `stage_times` their stage times alone, and `in_order` merges replicas'
iterations back into the loop's order (tests/test_inference_closed_form.py checks
them on many configurations). The plan reads its records through them
(scenarios.inference.plan).
Pure: stdlib only (and the lesson's pure modules).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from scenarios.inference.blocks import blocks_for
from scenarios.inference.iteration import Iteration

T = TypeVar("T")

Stages = tuple[tuple[float, float], ...]


def stage_times(it: Iteration) -> Iterator[Stages]:
    """Each iteration's (start, end) per stage, for a record: itself, or a run's."""
    if it.repeat == 1:
        yield it.stages
        return
    stages, bounds = len(it.stages), it.bounds
    width = 2 * stages
    for k in range(0, len(bounds), width):
        yield tuple(zip(bounds[k : k + width : 2], bounds[k + 1 : k + width : 2], strict=True))


def expand(it: Iteration, block_size: int) -> Iterator[Iteration]:
    """The iterations a record stands for: itself, or each iteration of a run as the
    step-by-step loop makes it."""
    if it.repeat == 1:
        yield it
        return
    n, stages, bounds = len(it.pieces), len(it.stages), it.bounds
    written, allocated = it.kv
    used, reserved = it.contiguous
    for back in range(it.repeat - 1, -1, -1):  # how many iterations before the run's last
        last = back == 0
        pieces = tuple(
            p._replace(
                start=p.start - back,
                blocks=p.blocks[: blocks_for(p.start - back + 1, block_size)],
                done=p.done and last,
                leaves=p.leaves and last,
            )
            for p in it.pieces
        )
        # blocks the later iterations open: a position that is a block's first
        opened = sum(p.start // block_size - (p.start - back) // block_size for p in it.pieces)
        k = it.repeat - 1 - back
        pairs = tuple(
            (bounds[2 * (k * stages + s)], bounds[2 * (k * stages + s) + 1]) for s in range(stages)
        )
        yield it._replace(
            pieces=pieces,
            start=pairs[0][0],
            end=pairs[-1][1],
            kv=(written - back * n, allocated - opened * block_size),
            contiguous=(used - back * n, reserved),
            stages=pairs,
            repeat=1,
            bounds=(),
        )


def in_order(
    records: Sequence[Iteration],
    engines: int,
    unfold: Callable[[Iteration], Iterator[T]],
    start: Callable[[T], float],
) -> Iterator[T]:
    """What `unfold` makes of each iteration of `serve`'s records (`start`: when that
    iteration starts), in the step-by-step loop's order: by start, then engine (the
    loop always runs the engine free first, and one a request wakes starts after every
    iteration already run). Each engine's records are in its own order; with several
    engines their iterations are merged."""
    if engines == 1:
        for record in records:
            yield from unfold(record)
        return
    streams: list[list[Iteration]] = [[] for _ in range(engines)]
    for record in records:
        streams[record.engine].append(record)

    def keyed(stream: list[Iteration]) -> Iterator[tuple[float, int, T]]:
        for record in stream:
            for made in unfold(record):
                yield start(made), record.engine, made

    for _, _, made in heapq.merge(*(keyed(s) for s in streams if s), key=lambda x: x[:2]):
        yield made
