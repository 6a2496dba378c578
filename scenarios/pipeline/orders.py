"""The order of work on each pipeline rank: GPipe, 1F1B, interleaved 1F1B, ZB-H1.

The heart of lesson 5, apart from the Actions it becomes: for each rank, the
list of its compute slots in the order it runs them. scenarios.pipeline
.schedules turns these lists into Programs (adding the receives and sends
around each slot); the lesson's narrative follows `phases_of`.

A "slot" is one unit of a rank's work: ("F" | "B" | "W", chunk, microbatch).
Vocabulary (docs/references.md, "Pipeline schedules"): p ranks, m
microbatches, v model chunks per rank; stage s lives on rank s mod p, chunk
s // p of that rank.

Pure: stdlib only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Protocol

Slot = tuple[str, int, int]


class Knobs(Protocol):
    """What an order depends on (scenarios.pipeline.schedules.Shape)."""

    stages: int
    microbatches: int
    chunks: int


def warmup_1f1b(p: int, m: int, rank: int) -> int:
    """Forwards rank r runs before its first backward in 1F1B: min(p - r - 1, m)."""
    return min(p - rank - 1, m)


def warmup_interleaved(p: int, m: int, v: int, rank: int) -> int:
    """Megatron's rule: 2(p - r - 1) + (v - 1)p, capped at m·v; all of them when m == p."""
    total = m * v
    if m == p:
        return total
    return min(2 * (p - rank - 1) + (v - 1) * p, total)


def order_gpipe(p: int, m: int, rank: int) -> list[Slot]:
    return [("F", 0, j) for j in range(m)] + [("B", 0, j) for j in range(m)]


def order_1f1b(p: int, m: int, rank: int) -> list[Slot]:
    warm = warmup_1f1b(p, m, rank)
    order: list[Slot] = [("F", 0, j) for j in range(warm)]
    for j in range(m - warm):
        order += [("F", 0, warm + j), ("B", 0, j)]
    order += [("B", 0, j) for j in range(m - warm, m)]
    return order


@functools.lru_cache(maxsize=4)
def _interleaved_units(p: int, m: int, v: int) -> tuple[list[Slot], list[Slot]]:
    """Every rank's k-th forward and k-th backward slot, as Megatron counts them: the
    same on every rank (only how many forwards run first differs), so built once."""
    group = p * v
    forward = [("F", k % group // p, k // group * p + k % p) for k in range(m * v)]
    backward = [("B", v - 1 - chunk, mb) for _, chunk, mb in forward]
    return forward, backward


def order_interleaved(p: int, m: int, v: int, rank: int) -> list[Slot]:
    total = m * v
    warm = warmup_interleaved(p, m, v, rank)
    forward, backward = _interleaved_units(p, m, v)
    order = forward[:warm]
    # F then B, total − warm times; the backwards left run last
    order += [
        slot for pair in zip(forward[warm:], backward[: total - warm], strict=True) for slot in pair
    ]
    order += backward[total - warm :]
    return order


def order_zb_h1(p: int, m: int, rank: int) -> list[Slot]:
    """1F1B with the backward split; rank r runs each W `rank` microbatches late.

    The later a stage, the sooner its input gradients are needed upstream, so it
    runs B (input gradient) at once and postpones W (weight gradient) into what
    would have been its cool-down bubble. With F = B = W the makespan falls from
    (m + p - 1)(F + B + W) to m(F + B + W) + (p - 1)(F + B - W), and no rank holds
    more than p microbatches, 1F1B's peak (Qi et al. 2023, ZB-H1).
    """
    lag = rank
    order: list[Slot] = []
    next_w = 0
    for kind, chunk, j in order_1f1b(p, m, rank):
        order.append((kind, chunk, j))
        if kind == "B" and j - lag >= 0:
            order.append(("W", 0, j - lag))
            next_w = j - lag + 1
    order += [("W", 0, j) for j in range(next_w, m)]
    return order


ORDERS: dict[str, Callable[[Knobs, int], list[Slot]]] = {
    "gpipe": lambda s, r: order_gpipe(s.stages, s.microbatches, r),
    "1f1b": lambda s, r: order_1f1b(s.stages, s.microbatches, r),
    "interleaved": lambda s, r: order_interleaved(s.stages, s.microbatches, s.chunks, r),
    "zb-h1": lambda s, r: order_zb_h1(s.stages, s.microbatches, r),
}


def phases_of(schedule: str, order: list[Slot]) -> list[str]:
    """The lesson phase of each of a rank's slots, in order (the narrative follows it):
    one pass over the order, not one per slot."""
    if schedule == "gpipe":
        return ["forward" if slot[0] == "F" else "backward" for slot in order]
    if schedule in ("interleaved", "zb-h1"):
        return ["interleaved" if schedule == "interleaved" else "zero-bubble"] * len(order)
    first_b = next(i for i, slot in enumerate(order) if slot[0] != "F")
    last_f = max(i for i, slot in enumerate(order) if slot[0] == "F")
    return [
        "warmup" if index < first_b else "cooldown" if index > last_f else "steady"
        for index in range(len(order))
    ]
