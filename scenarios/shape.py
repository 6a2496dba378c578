"""The MiniGPT's shape knobs, one shared group of params for every lesson that trains it.

Part of docs/design.md's lesson contract: the model's layers, hidden size, heads,
sequence length and vocabulary are declared once, with one set of bounds and
one rule (hidden a multiple of heads); a lesson puts a `GPTShape` with its own
defaults in its params (`model: GPTShape = GPTShape(layers=8, hidden=64)`),
its knobs are typed at top level (`-p hidden=128`), and the rank code builds
the model from it (`runtime.engine.models.GPTConfig.from_shape`). The lesson also
says, with `run_limit`, how large a model it trains for real.

The bounds of a real run are generous on purpose: what bounds a real run is
the parameter count (`check_run_size`), which is what the time and memory of a
lesson depend on.

Imports: runtime's pure part only.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.sim import formulas
from runtime.sim.compute import ComputeRates
from scenarios.params import Mode, ParamError, Params, integer

# Bytes of one fp32 element: the MiniGPT trains in fp32 on this machine.
FP32 = 4


@dataclass(frozen=True)
class GPTShape(Params):
    layers: int = integer(2, 1, 64, 4096)
    hidden: int = integer(32, 8, 512, 1 << 17)
    heads: int = integer(4, 1, 32, 1024)
    seq: int = integer(16, 4, 256, 1 << 20)
    vocab: int = integer(64, 8, 1024, 1 << 20)
    # Not a knob: the most parameters a lesson trains for real here (None: no limit).
    run_limit: int | None = None

    def check(self, mode: Mode) -> None:
        if self.hidden % self.heads:
            raise ParamError(
                "hidden",
                f"hidden={self.hidden}: must be a multiple of heads={self.heads}",
                es=f"hidden={self.hidden}: debe ser múltiplo de heads={self.heads}",
            )
        if mode == "run" and self.run_limit is not None:
            self.check_run_size(self.run_limit)

    @property
    def parameters(self) -> int:
        """Parameters of the MiniGPT of this shape (runtime.engine.models)."""
        return formulas.gpt_parameter_count(self.vocab, self.seq, self.hidden, self.layers)

    @property
    def parameter_tensors(self) -> int:
        """Parameter tensors of that MiniGPT: 12 per block (two LayerNorms and four Linears,
        weight and bias each), the two embeddings, the head's LayerNorm and its Linear."""
        return 12 * self.layers + 5

    def check_run_size(self, limit: int) -> None:
        """Refuse a real run of a model larger than this machine trains in a lesson's time."""
        if self.parameters > limit:
            raise ParamError(
                "hidden",
                f"the model has {self.parameters:,} parameters; a real run here allows at "
                f"most {limit:,} (lower hidden or layers, or use predict)",
                es=f"el modelo tiene {self.parameters:,} parámetros; una ejecución real aquí "
                f"admite a lo sumo {limit:,} (baje hidden o layers, o use predict)",
            )

    def costs(self, rates: ComputeRates, tokens: int) -> ModelCosts:
        """(forward, backward) seconds of each part of the MiniGPT on `tokens` tokens, before
        any run has timed them: what every lesson that trains it estimates from."""
        return ModelCosts(
            embedding=rates.linear_seconds(tokens, 1, self.hidden),
            block=rates.block_seconds(tokens, self.hidden, self.seq),
            head=rates.linear_seconds(tokens, self.hidden, self.vocab),
        )


@dataclass(frozen=True)
class ModelCosts:
    """(forward, backward) seconds of the MiniGPT's parts: embedding, one block, head + loss."""

    embedding: tuple[float, float]
    block: tuple[float, float]
    head: tuple[float, float]

    def stage(self, blocks: int, *, first: bool, last: bool) -> tuple[float, float]:
        """A contiguous run of `blocks` blocks, with the embedding if first, the head if last."""
        parts = [self.block] * blocks + [self.embedding] * first + [self.head] * last
        return sum(f for f, _ in parts), sum(b for _, b in parts)
