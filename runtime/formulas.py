"""The formulas the playground teaches, each named after its source.

Pure functions of plain numbers, used by the cost model (runtime.costmodel),
by scenario metrics and by the narrative panels. ../shared/REFERENCES.md lists
the sources; the unit tests check these values exactly.

Notation: n ranks, S message bytes, alpha seconds per message, beta seconds per
byte on the wire, gamma seconds per byte reduced.

Pure: stdlib only.
"""

from __future__ import annotations

import math


# -- collectives, alpha-beta model (Thakur, Rabenseifner & Gropp 2005) ---------
def ring_all_gather_time(n: int, nbytes: float, alpha: float, beta: float) -> float:
    """(n-1)α + S(n-1)/n·β, S the total gathered bytes."""
    return (n - 1) * alpha + nbytes * (n - 1) / n * beta


def ring_reduce_scatter_time(
    n: int, nbytes: float, alpha: float, beta: float, gamma: float
) -> float:
    """(n-1)α + S(n-1)/n·(β+γ)."""
    return (n - 1) * alpha + nbytes * (n - 1) / n * (beta + gamma)


def ring_all_reduce_time(n: int, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
    """Reduce-scatter then all-gather: 2(n-1)α + 2S(n-1)/n·β + S(n-1)/n·γ."""
    return ring_reduce_scatter_time(n, nbytes, alpha, beta, gamma) + ring_all_gather_time(
        n, nbytes, alpha, beta
    )


def rabenseifner_all_reduce_time(
    n: int, nbytes: float, alpha: float, beta: float, gamma: float
) -> float:
    """Halving-doubling: 2·log2(n)·α + 2S(n-1)/n·β + S(n-1)/n·γ."""
    return 2 * math.log2(n) * alpha + 2 * nbytes * (n - 1) / n * beta + nbytes * (n - 1) / n * gamma


def tree_broadcast_time(n: int, nbytes: float, alpha: float, beta: float) -> float:
    """Binomial tree: ceil(log2 n) rounds of one whole message, log2(n)·(α + Sβ)."""
    return tree_rounds(n) * (alpha + nbytes * beta)


def tree_reduce_time(n: int, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
    """Binomial tree reduce, the mirror of broadcast with a reduction per round."""
    return tree_rounds(n) * (alpha + nbytes * (beta + gamma))


def tree_all_reduce_time(n: int, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
    """Reduce to the root on a binomial tree, then broadcast back down it."""
    return tree_reduce_time(n, nbytes, alpha, beta, gamma) + tree_broadcast_time(
        n, nbytes, alpha, beta
    )


def tree_rounds(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def ring_all_reduce_bytes_per_rank(n: int, nbytes: float) -> float:
    """Bytes each rank sends in a ring all-reduce: 2S(n-1)/n."""
    return 2 * nbytes * (n - 1) / n


# -- nccl-tests doc/PERFORMANCE.md -------------------------------------------
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithm bandwidth S/t, bytes per second."""
    return nbytes / seconds


def busbw(collective: str, n: int, nbytes: float, seconds: float) -> float:
    """Bus bandwidth: algbw times the collective's factor, comparable with the link's peak."""
    return algbw(nbytes, seconds) * BUSBW_FACTORS[collective](n)


def relative_error(predicted: float, measured: float) -> float:
    """|pred - meas| / meas."""
    if measured == 0:
        return 0.0 if predicted == 0 else math.inf
    return abs(predicted - measured) / measured


def even_split(total: int, parts: int) -> list[int]:
    """Split `total` items into `parts` near-equal chunks, larger ones first.

    The hand-made ring uses it for sizes not divisible by n; so does the simulator,
    so both agree on every step's bytes.
    """
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# -- pipeline schedules (REFERENCES.md, "Pipeline schedules") ---------------------
def pipeline_makespan(
    schedule: str, p: int, m: int, v: int = 1, f: float = 1.0, b: float = 2.0, w: float = 0.0
) -> float:
    """Textbook makespan with per-full-stage costs F, B (= input + weight grad) and,
    for zb-h1, the weight-grad part W of B. Communication is free."""
    if schedule in ("gpipe", "1f1b"):
        return (m + p - 1) * (f + b)
    if schedule == "interleaved":
        return m * (f + b) + (p - 1) * (f + b) / v
    if schedule == "zb-h1":
        bi = b - w
        return m * (f + b) + (p - 1) * (f + bi - w)
    raise KeyError(schedule)


def pipeline_bubble_fraction(
    schedule: str, p: int, m: int, v: int = 1, f: float = 1.0, b: float = 2.0, w: float = 0.0
) -> float:
    """Idle share of the makespan on each rank: 1 - m(F + B) / makespan.

    GPipe and 1F1B: (p - 1)/(m + p - 1); interleaved: the bubble (p - 1)(F + B)
    shrinks v times; zb-h1 with F = Bi = W: (p - 1)/(3m + p - 1)."""
    makespan = pipeline_makespan(schedule, p, m, v, f, b, w)
    return 1.0 - m * (f + b) / makespan


def gpt_parameter_count(vocab: int, seq: int, hidden: int, layers: int) -> int:
    """Parameters of MiniGPT (runtime.models): embeddings, blocks with biases, final
    LayerNorm and an untied head without bias. Per block: 12h² + 13h."""
    h = hidden
    block = 12 * h * h + 13 * h
    return vocab * h + seq * h + layers * block + 2 * h + h * vocab
