"""Lesson 3's params and rank result: the run, its checkpoints, the failure model.

The bottom of the package (scenarios.failure_resume): the Program (.program), the
faults and recovery metrics (.recovery), the lumped prediction (.lumped), the
trainer and rank code (.trainer, .rank) and the lesson (.lesson) read these; this
module reads nothing of the package.

Imports: the lesson contract only (the UI imports this).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scenarios.base import RankResult
from scenarios.fault_knobs import StepFault
from scenarios.params import Mode, ParamError, Params, choice, duration, integer
from scenarios.shape import FP32, GPTShape

MAX_RUN_PARAMETERS = 1_000_000
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64)


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class ResumeParams(Params):
    ranks: int = integer(4, 1, 8, 64)  # a power of two
    resume_ranks: int = integer(0, 0, 8, 64)  # ranks after a restart (0: the same)
    steps: int = integer(30, 1, 400, 1_000_000)
    checkpoint_every: int = integer(5, 1)
    max_restarts: int = integer(3, 0, 10)
    sharding: str = choice("ddp", ("ddp", "zero1"))
    # A kill or hang the form can cause (off by default): -> kill:rank=2,step=12.
    faults: StepFault = StepFault()
    model: GPTShape = GPTShape(
        layers=2, hidden=32, heads=2, seq=16, vocab=32, run_limit=MAX_RUN_PARAMETERS
    )
    batch: int = integer(16, 1, 256, 65536)  # sequences per step (global batch)
    microbatches: int = integer(8, 1, 64)  # leaves of the gradient tree
    seed: int = integer(0, 0, 2**31 - 1)
    mtbf: float = duration(3 * 3600.0, 1e-3)  # M
    save_cost: float = duration(60.0, 1e-6)  # C
    restart_cost: float = duration(0.0, 0.0)  # R

    def check(self, mode: Mode) -> None:
        m = self.microbatches
        if m not in POWERS_OF_TWO:
            raise ParamError(
                "microbatches",
                f"microbatches={m}: must be a power of two (the gradient tree)",
                es=f"microbatches={m}: debe ser una potencia de dos (el árbol de gradientes)",
            )
        for name in ("ranks", "resume_ranks"):
            n = getattr(self, name)
            if name == "resume_ranks" and n == 0:
                continue
            if n not in POWERS_OF_TWO or m % n:
                raise ParamError(
                    name,
                    f"{name}={n}: must be a power of two dividing microbatches={m}, so every "
                    "rank owns a whole subtree of the gradient sum",
                    es=f"{name}={n}: debe ser una potencia de dos que divida microbatches={m}, "
                    "para que cada rango tenga un subárbol entero de la suma de gradientes",
                )
        if self.batch % m:
            raise ParamError(
                "batch",
                f"batch={self.batch}: must be a multiple of microbatches={m}",
                es=f"batch={self.batch}: debe ser múltiplo de microbatches={m}",
            )
        self.faults.check_within(self.ranks, self.steps)
        # Any save_cost and restart_cost, whatever mtbf: Daly's interval holds for
        # C < 2M and is M beyond (scenarios.failure_resume.interval), and the Monte-Carlo
        # that checks it caps its own work.

    @property
    def parameters(self) -> int:
        return self.model.parameters

    @property
    def checkpoint_steps(self) -> list[int]:
        return list(range(self.checkpoint_every, self.steps + 1, self.checkpoint_every))

    @property
    def checkpoint_bytes(self) -> int:
        """Parameters and Adam's two moments, fp32."""
        return 3 * self.parameters * FP32


@dataclass(frozen=True, kw_only=True)
class ResumeResult(RankResult):
    """What each rank reports after the final attempt and the uninterrupted rerun."""

    bitwise_equal: bool  # every check below held on every rank
    checks: dict[str, bool]  # parameters, exp_avg, exp_avg_sq, optimizer_step, rng, data
    parameters_sha256: str  # fingerprints of the final state, to compare separate runs
    optimizer_sha256: str
    resumed_from_step: int
    losses: list[float] = field(default_factory=list)  # steps resumed_from_step+1 .. steps
    final_loss: float | None = None
    final_loss_uninterrupted: float | None = None
