"""The pipeline lesson's calibration probe: a split backward's halves against the full one.

Rank side of scenarios.pipeline.rates.PROBES (runtime.fit.calibration_probes): the
calibrate job's ranks call `split_backward(rank, world_size)` after the generic
timings; scenarios.pipeline.rates.fit turns every rank's row into PipelineRates.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import contextlib
import statistics
import time

import torch
import torch.distributed as dist

from runtime.engine.models import Block, GPTConfig
from runtime.engine.split_backward import input_gradients, recording_linears, weight_gradients
from runtime.fit.calibration import BLOCK_ROUNDS, LIVE_GRAPHS

# (hidden, tokens, seq) of the block timed with a split backward: the lesson's default.
SPLIT_SHAPE = (64, 2048, 64)


def split_backward(rank: int, world_size: int) -> list[float]:
    """[full backward s, Bi s, W s] of one block at SPLIT_SHAPE, timed as the calibrate
    job times its blocks (runtime.fit.calibration_compute.blocks: LIVE_GRAPHS alive,
    every rank at once): a round of full backwards, then a round of split ones, Bi for
    each graph and then W for each, as zb-h1 runs them. On a CPU
    the halves are not B/2 each: asking autograd for the input gradient still walks the
    whole graph (a run measured Bi at 0.84-1.26 B and W at 0.32-0.48 B per stage)."""
    hidden, tokens, seq = SPLIT_SHAPE
    block = Block(GPTConfig(vocab=64, seq=seq, hidden=hidden, heads=4, layers=1))
    full: list[float] = []
    bi: list[float] = []
    w: list[float] = []
    dist.barrier()
    for rep in range(BLOCK_ROUNDS + 1):  # the first round warms up
        for split in (False, True):
            graphs = []
            for _ in range(LIVE_GRAPHS):
                x = torch.randn(tokens // seq, seq, hidden, requires_grad=True)
                with recording_linears(block) if split else contextlib.nullcontext([]) as seen:
                    graphs.append((x, block(x).sum(), seen))
            pending = []
            for x, y, seen in graphs:
                start = time.process_time()
                if split:
                    pending.append((seen, input_gradients(block, y, None, x, seen)[1]))
                    bi.append(time.process_time() - start)
                else:
                    y.backward()
                    full.append(time.process_time() - start)
            for seen, grads in pending:
                start = time.process_time()
                weight_gradients(seen, grads)
                w.append(time.process_time() - start)
        if rep == 0:
            for samples in (full, bi, w):
                samples.clear()
    return [statistics.median(full), statistics.median(bi), statistics.median(w)]
