"""DDP's gradient buckets, as data: which parameters share an all-reduce, and when it starts.

Lesson 6's bucketing rule, pure (no torch), so that the Program (lesson.py),
the prediction and the hand-written DDP on the ranks (scenarios.mixed_precision
.ddp) use one and the same assignment, and a test holds it against torch's.

- `gpt_params(shape)`: the MiniGPT's parameters in construction order
  (runtime.engine.models), with the part of backward that produces each gradient:
  the head first, then the blocks from the last to the first, the embedding last.
- `ready_order(params)`: the order autograd finishes their gradients in
  (observed on torch 2.13 and checked by the tests): the head's projection, then
  its LayerNorm; in each block, a Linear's bias before its weight and a
  LayerNorm's weight before its bias, from the MLP's output down to ln1.
- `assign(...)`: torch's `compute_bucket_assignment_by_size`
  (torch/csrc/distributed/c10d/reducer.cpp): walk the tensors in order, add each
  to the open bucket, and close the bucket after the tensor that takes it to
  its limit or past it (so a bucket holds at least one tensor and may exceed
  the cap by its last one); the first bucket has its own limit, the others
  the cap. Given no order, buckets are sorted by their smallest index.
- `initial_buckets` / `rebuilt_buckets`: torch 2.13's DDP (`distributed.py`,
  `_BucketCapacityConfig`): iteration 0 uses the construction order, and with
  an explicit `bucket_cap_mb` its limit is unbounded, so iteration 0 is ONE
  bucket (a smaller first bucket, torch's `bucket_cap_mb_list`, makes it use
  [first, cap] there too); after iteration 0 the buckets are rebuilt from the
  observed ready order with limits [first, cap] (first = cap when not set).
  Buckets are reduced in index order: a bucket's all-reduce starts when its
  gradients and every earlier bucket's are ready.

Imports: the MiniGPT's shape only (pure).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from scenarios.shape import GPTShape

UNBOUNDED = sys.maxsize  # torch's limit for iteration 0 with an explicit bucket_cap_mb


@dataclass(frozen=True)
class Param:
    """One parameter tensor: its name, elements and the backward part that makes its grad
    (0 = the head, 1 … L = the blocks from the last, L + 1 = the embedding)."""

    name: str
    numel: int
    part: int


def parts(layers: int) -> list[str]:
    """The backward parts in the order backward runs them: head, blocks L−1 … 0, embedding."""
    return ["head", *(f"block{layer}" for layer in reversed(range(layers))), "emb"]


def gpt_params(shape: GPTShape) -> list[Param]:
    """The MiniGPT's parameters in construction order (MiniGPT.named_parameters())."""
    h, layers = shape.hidden, shape.layers
    out = [
        Param("embedding.tokens.weight", shape.vocab * h, layers + 1),
        Param("embedding.positions.weight", shape.seq * h, layers + 1),
    ]
    block = [
        ("ln1.weight", h), ("ln1.bias", h), ("attn.qkv.weight", 3 * h * h),
        ("attn.qkv.bias", 3 * h), ("attn.proj.weight", h * h), ("attn.proj.bias", h),
        ("ln2.weight", h), ("ln2.bias", h), ("fc.weight", 4 * h * h), ("fc.bias", 4 * h),
        ("out.weight", 4 * h * h), ("out.bias", h),
    ]  # fmt: skip
    for layer in range(layers):
        part = layers - layer
        out += [Param(f"blocks.{layer}.{name}", numel, part) for name, numel in block]
    out += [
        Param("head.ln.weight", h, 0),
        Param("head.ln.bias", h, 0),
        Param("head.proj.weight", shape.vocab * h, 0),
    ]
    return out


# Within a block, the order its 12 gradients are ready in, as offsets into its
# construction-order run: out.bias, out.weight, fc.bias, fc.weight, ln2.weight,
# ln2.bias, proj.bias, proj.weight, qkv.bias, qkv.weight, ln1.weight, ln1.bias.
_BLOCK_READY = (11, 10, 9, 8, 6, 7, 5, 4, 3, 2, 0, 1)


def ready_order(layers: int) -> list[int]:
    """Indices (construction order) of the MiniGPT's parameters in gradient-ready order."""
    head = 2 + 12 * layers
    order = [head + 2, head, head + 1]  # proj.weight, ln.weight, ln.bias
    for layer in reversed(range(layers)):
        order += [2 + 12 * layer + k for k in _BLOCK_READY]
    return [*order, 1, 0]  # positions, then tokens


def assign(
    sizes: Sequence[int], limits: Sequence[int], order: Sequence[int] | None = None
) -> list[list[int]]:
    """Buckets of tensor indices, torch's rule (one dtype and device): tensors taken in
    `order` (default: index order), a bucket closing once its bytes reach its limit;
    `limits[k]` is the k-th bucket's, the last one repeating."""
    walk = range(len(sizes)) if order is None else order
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    last = len(limits) - 1
    limit = limits[0]
    for index in walk:  # a tight loop: predict walks some 50k tensors per cap at 4096 layers
        current.append(index)
        filled += sizes[index]
        if filled >= limit:
            buckets.append(current)
            current, filled = [], 0
            limit = limits[min(len(buckets), last)]
    if current:
        buckets.append(current)
    if order is None:
        buckets.sort(key=min)
    return buckets


def limits(cap: int, first_cap: int) -> list[int]:
    """[first, cap]: the first bucket's limit, then everyone else's (first 0: the cap)."""
    return [first_cap or cap, cap]


def initial_buckets(sizes: Sequence[int], cap: int, first_cap: int) -> list[list[int]]:
    """Iteration 0, torch 2.13: construction order, the buckets reversed (the last
    parameters' gradients are ready first); one bucket unless a first cap is set."""
    bounds = limits(cap, first_cap) if first_cap else [UNBOUNDED]
    return list(reversed(assign(sizes, bounds)))


def rebuilt_buckets(sizes: Sequence[int], order: Sequence[int], cap: int, first_cap: int):
    """After iteration 0: the observed ready order, limits [first, cap]."""
    return assign(sizes, limits(cap, first_cap), order)


def bucket_bytes(buckets: list[list[int]], sizes: Sequence[int]) -> list[int]:
    return [sum([sizes[i] for i in bucket]) for bucket in buckets]


def launch_parts(buckets: list[list[int]], params: Sequence[Param], layers: int) -> list[int]:
    """For each bucket, the backward part after which its all-reduce starts: the part
    that readies its last gradient, or a later one if an earlier bucket waits longer
    (buckets are reduced in index order)."""
    out, latest = [], 0
    for bucket in buckets:
        latest = max(latest, max([params[i].part for i in bucket]))
        out.append(latest)
    return out


def plan(
    shape: GPTShape, element_bytes: int, cap: int, first_cap: int
) -> tuple[list[int], list[int], list[int], list[int]]:
    """(iteration 0's bucket bytes, its launch parts, later iterations' bytes, their
    launch parts) of the MiniGPT of `shape` with `element_bytes` per gradient element."""
    a, b, c, d = _plan(shape, element_bytes, cap, first_cap)
    return list(a), list(b), list(c), list(d)


@lru_cache(maxsize=256)  # predict asks for the same plan per series, metric and sweep point
def _plan(
    shape: GPTShape, element_bytes: int, cap: int, first_cap: int
) -> tuple[tuple[int, ...], ...]:
    params = _gpt_params(shape)
    sizes = [p.numel * element_bytes for p in params]
    first = initial_buckets(sizes, cap, first_cap)
    later = rebuilt_buckets(sizes, _ready_order(shape.layers), cap, first_cap)
    return (
        tuple(bucket_bytes(first, sizes)),
        tuple(launch_parts(first, params, shape.layers)),
        tuple(bucket_bytes(later, sizes)),
        tuple(launch_parts(later, params, shape.layers)),
    )


@lru_cache(maxsize=4)  # the bucket-size sweep plans one shape at some 24 caps
def _gpt_params(shape: GPTShape) -> tuple[Param, ...]:
    return tuple(gpt_params(shape))


@lru_cache(maxsize=4)
def _ready_order(layers: int) -> tuple[int, ...]:
    return tuple(ready_order(layers))
