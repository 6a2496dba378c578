"""Lesson 1's params and rank result: what the form, the CLI and the ranks receive.

The bottom of the package (scenarios.ring_allreduce): the Program (.program), the
lumped prediction (.lumped), the rank code (.rank) and the lesson (.lesson) read
these; this module reads nothing of the package.

Imports: the lesson contract only (the UI imports this).
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.base import RankResult
from scenarios.fault_knobs import SlowRank, refused
from scenarios.params import Mode, ParamError, Params, choice, integer, size

DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
# Above this many ranks `predict` costs each rank's whole all-reduce as one action
# (the same formula the step-by-step ring adds up to), so 4096 ranks stay fast.
STEPWISE_MAX_RANKS = 64
# The series of torch's all_reduce, timed in every iteration beside the hand-made one.
REFERENCE = "reference"
# Iterations run before the timed ones, whole (the hand-made all-reduce and the
# reference): the first touches every buffer and takes gloo's pairs through their first
# messages, and a cold iteration is not what the lesson compares. They stay on the
# timeline as warm-up (series runtime.engine.workers.WARMUP_SERIES), predicted like the
# others and left out of the times on both sides (Hooks.warmup_steps).
WARMUP_ITERATIONS = 2


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class RingParams(Params):
    ranks: int = integer(4, 2, 16, 4096)
    size: int = size(4 * 2**20, 1, 256 * 2**20, 2**40)
    algorithm: str = choice("ring", ("ring", "tree", "builtin"))
    dtype: str = choice("float32", tuple(DTYPE_BYTES))
    repeat: int = integer(3, 1, 50)
    # A straggler the form can cause (slow_factor 1: none): -> slow:rank=R,factor=F.
    faults: SlowRank = SlowRank()

    def check(self, mode: Mode) -> None:
        if self.size % self.itemsize:
            raise ParamError(
                "size",
                f"size={self.size}: must be a whole number of {self.dtype} elements "
                f"({self.itemsize} bytes each)",
                es=f"size={self.size}: debe ser un número entero de elementos {self.dtype} "
                f"({self.itemsize} bytes cada uno)",
            )
        self.faults.check_within(self.ranks)
        if self.faults.on and not self.stepwise:
            # Inside torch's all_reduce the reduction is gloo's: nothing a rank can slow.
            raise refused(
                "slow_factor",
                "slow_stepwise",
                value=f"{self.faults.slow_factor:g}",
                most=STEPWISE_MAX_RANKS,
            )

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def numel(self) -> int:
        return self.size // self.itemsize

    @property
    def stepwise(self) -> bool:
        """True when the Program lists every step of a hand-made algorithm."""
        return self.algorithm != "builtin" and self.ranks <= STEPWISE_MAX_RANKS


@dataclass(frozen=True, kw_only=True)
class RingResult(RankResult):
    """What each rank reports: bytes it sent per iteration (hand-made algorithms), and
    how far its result is from torch's all_reduce of the same data."""

    bytes_sent_per_iteration: int | None
    max_abs_diff_vs_builtin: float
    equals_builtin: bool
