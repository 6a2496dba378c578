"""The mixed-precision lesson's calibration probe: a block in fp16 and bf16 against fp32.

Rank side of scenarios.mixed_precision.rates.PROBES (runtime.fit.calibration_probes):
the calibrate job's ranks call `low_precision(rank, world_size)` after the generic
timings; scenarios.mixed_precision.rates.fit turns every rank's row into MixedRates.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from runtime.engine.models import Block, GPTConfig
from runtime.fit.calibration import BLOCK_ROUNDS

# (hidden, tokens, seq) of the block timed in fp32, fp16 and bf16: the lesson's default
# model and microbatch.
LOW_PRECISION_SHAPE = (64, 256, 32)


def low_precision(rank: int, world_size: int) -> list[float]:
    """[fp32, fp16, bf16] CPU seconds of one block's forward and backward at
    LOW_PRECISION_SHAPE, its weights in that precision and fp16/bf16 under torch's CPU
    autocast, as the mixed-precision lesson trains (scenarios.mixed_precision.trainer):
    every rank at once, precisions by turns within each round (the machine's pace moves
    by the second). A CPU's fp16 has no fast matmul of its own: a run measured its
    forward 5.7 times fp32's here, where a fixed guess said 2.5."""
    try:
        return _low_precision()
    except RuntimeError:  # a build without a half-precision CPU kernel: the lesson's guess
        return []


def _low_precision() -> list[float]:
    hidden, tokens, seq = LOW_PRECISION_SHAPE
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    cfg = GPTConfig(vocab=64, seq=seq, hidden=hidden, heads=4, layers=1)
    models = [Block(cfg).to(dtype) for dtype in dtypes]
    samples: list[list[float]] = [[] for _ in dtypes]
    dist.barrier()
    for rep in range(2 * BLOCK_ROUNDS + 1):  # the first round warms up
        for dtype, block, out in zip(dtypes, models, samples, strict=True):
            x = torch.randn(tokens // seq, seq, hidden, dtype=dtype, requires_grad=True)
            low = dtype != torch.float32
            start = time.process_time()
            with torch.autocast("cpu", dtype=dtype, enabled=low):
                y = block(x).float().sum()
            y.backward()
            if rep:
                out.append(time.process_time() - start)
    return [statistics.median(out) for out in samples]
