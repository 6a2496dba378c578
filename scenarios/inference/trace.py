"""The request trace the server answers: seeded Poisson arrivals, prompts and lengths.

Part of lesson 7's mechanism (scenarios.inference; docs/design.md: a lesson's own
mechanism lives in its package). Everything here is plain data from a seed, so
the scheduler that plans the Program (scenarios.inference.scheduler), the rank
code that serves it and the tests all see the very same requests.

- Arrivals: a Poisson process of `rate` requests per second, i.e. exponential
  gaps of mean 1/rate (the textbook open-loop load of serving benchmarks: vLLM's
  `benchmark_serving --request-rate`, DistServe, Vidur).
- Prompts: `prefixes` shared prompt prefixes of `prefix_len` tokens (a system
  prompt, a few-shot preamble), each request starting with one of them chosen
  uniformly, then its own tokens; with `prefixes` 0 no prompt shares anything.
  Token ids are uniform over the vocabulary: the MiniGPT learnt a Markov chain,
  so what it answers depends on the last prompt token, and every id is valid.
- Lengths of the own part of the prompt and of the output: `fixed` (the mean),
  `uniform` (integers from half to one and a half times the mean) or
  `exponential` (rounded, at least 1, at most four times the mean): the long
  tail real traces have (ShareGPT's output lengths), which is what makes a static
  batch wait for its longest member.

Pure: stdlib only.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from functools import lru_cache

LENGTHS = ("fixed", "uniform", "exponential")


@dataclass(frozen=True)
class Request:
    """One request: when it arrives (seconds from the start), its prompt, how many tokens
    it asks for (greedy decoding stops there), and the shared prefix it starts with."""

    id: int
    arrival: float
    prompt: tuple[int, ...]
    output_len: int
    prefix: int | None = None

    @property
    def context(self) -> int:
        """Positions it occupies at the end: its prompt and every output token but the
        last (the last one is returned, never fed back)."""
        return len(self.prompt) + self.output_len - 1


@dataclass(frozen=True)
class TraceSpec:
    """What a trace is drawn from (the lesson's params say it)."""

    requests: int
    rate: float
    prompt_len: int
    output_len: int
    lengths: str = "uniform"
    prefixes: int = 0
    prefix_len: int = 0
    vocab: int = 64
    seed: int = 0


def length_bounds(mean: int, lengths: str) -> tuple[int, int]:
    """The smallest and largest length a distribution draws around `mean`."""
    if lengths == "fixed":
        return mean, mean
    if lengths == "uniform":
        return max(1, math.ceil(mean / 2)), max(1, (3 * mean) // 2)
    return 1, 4 * mean


def draw_length(rng: random.Random, mean: int, lengths: str) -> int:
    """One length around `mean` from `rng`, as `lengths` distributes them."""
    low, high = length_bounds(mean, lengths)
    if lengths == "fixed":
        return mean
    if lengths == "uniform":
        return rng.randint(low, high)
    return min(high, max(low, round(rng.expovariate(1.0 / mean))))


def longest_context(spec: TraceSpec) -> int:
    """The most positions any request of such a trace can occupy (the model's context
    must hold it)."""
    own = length_bounds(spec.prompt_len, spec.lengths)[1]
    out = length_bounds(spec.output_len, spec.lengths)[1]
    shared = spec.prefix_len if spec.prefixes else 0
    return shared + own + out - 1


# What a seed draws for each request whatever the rate: the uniform behind its gap, its
# shared prefix, its prompt and its output length. The goodput curve asks for the same
# trace at other rates (and its first requests): its arrivals are computed again from
# these, its prompts not drawn again. Keyed by the spec without rate and requests: the
# first n requests of a longer draw are the n a shorter one makes.
Drawn = tuple[float, int | None, tuple[int, ...], int]
_DRAWN: dict[TraceSpec, tuple[Drawn, ...]] = {}


def _drawn(spec: TraceSpec) -> tuple[Drawn, ...]:
    key = replace(spec, requests=0, rate=1.0)
    known = _DRAWN.get(key, ())
    if len(known) >= spec.requests:
        return known[: spec.requests]
    rng = random.Random(f"inference-trace:{spec.seed}")
    shared = [
        tuple(rng.randrange(spec.vocab) for _ in range(spec.prefix_len))
        for _ in range(spec.prefixes)
    ]
    out: list[Drawn] = []
    for _ in range(spec.requests):
        gap = rng.random()  # what rng.expovariate(rate) draws: the gap is -log(1 - u) / rate
        prefix = rng.randrange(spec.prefixes) if spec.prefixes else None
        own = draw_length(rng, spec.prompt_len, spec.lengths)
        tokens = tuple(rng.randrange(spec.vocab) for _ in range(own))
        head = shared[prefix] if prefix is not None else ()
        out.append((gap, prefix, head + tokens, draw_length(rng, spec.output_len, spec.lengths)))
    if len(_DRAWN) >= 4:  # a few traces at once: the lesson's, a curve's
        _DRAWN.clear()
    _DRAWN[key] = drawn = tuple(out)
    return drawn


@lru_cache(maxsize=4)
def make_trace(spec: TraceSpec) -> tuple[Request, ...]:
    """The requests, in arrival order (ids 0, 1, ...). Same spec, same requests.
    Arrivals are random.expovariate's, computed as it does from the same uniform."""
    out: list[Request] = []
    t = 0.0
    for rid, (gap, prefix, prompt, output) in enumerate(_drawn(spec)):
        t += -math.log(1.0 - gap) / spec.rate
        out.append(Request(rid, t, prompt, output, prefix))
    return tuple(out)
