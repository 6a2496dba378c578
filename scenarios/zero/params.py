"""Lesson 2's params: the stages to compare, the model (Ψ), the ranks (N_d), the precision.

The bottom of the package (scenarios.zero): the memory accounting (.memory), the
Program (.program), the lumped prediction (.lumped), the rank code (.rank), the
lesson (.lesson) and lesson 0's demonstration (scenarios.why_distribute.demo) read
these; this module reads nothing of the package. Each rank's result record is
scenarios.zero.results.

Imports: the lesson contract only (the UI imports this).
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.params import Mode, ParamError, Params, choice, choices, count, integer, size
from scenarios.shape import GPTShape

STAGES = ("ddp", "zero1", "zero2", "zero3", "fsdp2")
# What torch's FSDP2 imports (DTensor, the device mesh): heavy, so the ranks' fork server
# imports it once (Hooks.preload), here and in lesson 0's demonstration.
FSDP2_MODULES = ("torch.distributed.fsdp", "torch.distributed.tensor")
MAX_RUN_PARAMETERS = 2_000_000


@dataclass(frozen=True)
class ZeroParams(Params):
    aliases = {"dp": "ranks"}  # the ZeRO paper's N_d

    stage: tuple[str, ...] = choices(STAGES, STAGES)
    ranks: int = integer(4, 2, 8, 1 << 20)
    params: int | str = count("auto")
    precision: str = choice("fp32", ("fp32", "mixed"))
    gpu_memory: int = size(0)
    activations: str = choice("auto", ("auto", "on", "off"))
    steps: int = integer(2, 1, 5)
    model: GPTShape = GPTShape(
        layers=2, hidden=32, heads=4, seq=16, vocab=64, run_limit=MAX_RUN_PARAMETERS
    )
    microbatch: int = integer(4, 1, 32, 1 << 16)

    def check(self, mode: Mode) -> None:
        shape_count = self.model.parameters
        if mode == "run":
            if self.precision != "fp32":
                raise ParamError(
                    "precision",
                    f"precision={self.precision}: a real run here trains in fp32; "
                    "mixed (fp16 params and grads, K = 12) is for predict",
                    es=f"precision={self.precision}: una ejecución real aquí entrena en fp32; "
                    "mixed (parámetros y gradientes en fp16, K = 12) es para predict",
                )
            if self.psi != shape_count:
                raise ParamError(
                    "params",
                    f"params={self.psi}: a real run trains the MiniGPT of the shape knobs "
                    f"({shape_count:,} parameters); other sizes are for predict",
                    es=f"params={self.psi}: una ejecución real entrena la MiniGPT que dan "
                    f"layers, hidden, heads, seq y vocab ({shape_count:,} parámetros); otros "
                    "tamaños son para predict",
                )
        if self.ranks > self.psi:
            raise ParamError(
                "ranks",
                f"ranks={self.ranks}: more ranks than the model has parameters "
                f"(Ψ = {self.psi:,}) to shard",
                es=f"ranks={self.ranks}: más rangos que parámetros tiene el modelo "
                f"(Ψ = {self.psi:,}) para repartir",
            )

    @property
    def psi(self) -> int:
        """Ψ, the model's parameters: as given, or the MiniGPT's own (`auto`)."""
        return self.model.parameters if self.params == "auto" else int(self.params)

    @property
    def from_shape(self) -> bool:
        """True when Ψ is the shape's own count, so the Program can follow the units."""
        return self.psi == self.model.parameters

    @property
    def counts_activations(self) -> bool:
        """`auto`: on when the shape describes the model (Ψ from the shape, or a shape
        knob away from its default; the app's form sends every field, changed or not)."""
        if self.activations != "auto":
            return self.activations == "on"
        default = ZeroParams()
        return (
            self.params == "auto"
            or self.model != default.model
            or self.microbatch != default.microbatch
        )
