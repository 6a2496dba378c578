"""DistServe's what-if: prefill and decode on separate GPUs.

Part of lesson 7's prediction, pure. DistServe (Zhong et al. 2024) serves the
prefills on some GPUs and the decodes on others: a decode step never waits
behind a long prefill (the interference continuous batching has), each side can
be sized for its own SLO, and the price is moving each prompt's KV cache from
the prefill GPU to the decode GPU. Estimated here for `gpus` GPUs split half
and half, one GPU per replica on each side:

- prefill side: the trace's requests, each asking for its first token only, on
  the real scheduler (scenarios.inference.plan) and the profile's clock, one
  replica's round-robin share (sampled as the config search samples): TTFT;
- the move: alpha + prompt KV bytes · beta over the link between the two GPUs;
- decode side: a steady batch B from Little's law, B = λ · (output − 1) · t(B)
  with λ the requests per second per decode GPU and t(B) the decode step of B
  sequences at the mean context (the step model's roofline), iterated to its
  fixed point and capped at `max_batch`: TPOT = t(B). Past the cap the side
  cannot keep up and nothing meets the SLO.

Pure: stdlib and the lesson's pure modules.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from scenarios.inference.latency import clocked, percentile
from scenarios.inference.plan import Clock, Serving, plan
from scenarios.inference.search import kv_blocks, sample, trace_blocks
from scenarios.inference.stepmodel import Device, Shape, Work
from scenarios.inference.trace import Request


@dataclass(frozen=True)
class Disaggregated:
    prefill_gpus: int
    decode_gpus: int
    ttft_p50: float | None
    tpot: float
    batch: int
    keeps_up: bool
    attainment: float
    goodput: float  # requests per second within the SLO

    def describe(self, language: str = "en") -> str:
        """One line: the split, its latencies and goodput (`language`: en, es)."""
        gpus = self.prefill_gpus + self.decode_gpus
        ttft = "—" if self.ttft_p50 is None else f"{self.ttft_p50 * 1e3:.3g} ms"
        if language == "es":
            return (
                f"{self.prefill_gpus} GPUs de prefill + {self.decode_gpus} de decode: TTFT p50 "
                f"{ttft}, TPOT {self.tpot * 1e3:.3g} ms con lote {self.batch}"
                f"{'' if self.keeps_up else ' (no da abasto)'}: {self.goodput:.3g} pet/s "
                f"dentro del SLO ({self.attainment:.0%}), {self.goodput / gpus:.3g}/GPU"
            )
        return (
            f"{self.prefill_gpus} prefill + {self.decode_gpus} decode GPUs: TTFT p50 {ttft}, "
            f"TPOT {self.tpot * 1e3:.3g} ms at batch {self.batch}"
            f"{'' if self.keeps_up else ' (cannot keep up)'}: {self.goodput:.3g} req/s in "
            f"SLO ({self.attainment:.0%}), {self.goodput / gpus:.3g}/GPU"
        )


def disaggregated(
    shape: Shape,
    device: Device,
    requests: tuple[Request, ...],
    gpus: int,
    slo: tuple[float, float],
    *,
    rate: float,
    max_batch: int,
    kv_block: int,
    default_blocks: int,
) -> Disaggregated | None:
    """The what-if for `gpus` GPUs (None: fewer than 2, or the weights do not fit one)."""
    if gpus < 2 or not requests:
        return None
    prefill, decode = gpus // 2, gpus - gpus // 2
    firsts = sample(tuple(replace(r, output_len=1) for r in requests[::prefill]), 1)
    blocks = kv_blocks(
        shape, device, 1, 1, kv_block, default_blocks, trace_blocks(firsts, kv_block)
    )
    if blocks == 0:
        return None
    serving = Serving(max_batch=max_batch, kv_block=kv_block, kv_blocks=blocks)
    planned = plan(shape, device, serving, firsts)
    first = clocked(planned)
    prompt = statistics.fmean(len(r.prompt) for r in requests)
    alpha, beta = device.link(gpus)
    move = alpha + prompt * shape.kv_bytes_per_token * beta
    ttfts = [t + move for t in first.ttft.values()]

    out = statistics.fmean(r.output_len for r in requests)
    context = round(prompt + out / 2)
    clock = Clock(shape, device, Serving(max_batch=max_batch))
    per_gpu = rate / decode
    batch, step = 1, 0.0
    for _ in range(64):  # B = λ (out − 1) t(B): a few rounds reach the fixed point
        step = clock.stage(0, Work.of([(context, 1, True)] * batch))
        wanted = min(max_batch, max(1, math.ceil(per_gpu * max(0.0, out - 1) * step)))
        if wanted == batch:
            break
        batch = wanted
    keeps_up = per_gpu * max(0.0, out - 1) * step <= max_batch
    ttft_slo, tpot_slo = slo
    within = sum(1 for t in ttfts if t <= ttft_slo) / len(ttfts) if ttfts else 0.0
    attainment = within if keeps_up and step <= tpot_slo else 0.0
    return Disaggregated(
        prefill, decode, percentile(ttfts, 50), step, batch, keeps_up, attainment,
        rate * attainment,
    )  # fmt: skip
