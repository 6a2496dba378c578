"""The template lesson's params and the record each rank returns: declared once.

The first part of the lesson contract (scenarios.base): a frozen `Params` dataclass
whose fields carry their kind, default and bounds (scenarios.params; the help a learner
reads is in texts.toml), and a `RankResult` the rank code returns, sent back as JSON
and read back typed. The CLI, the app's form, torchrun and the ranks all receive the
same `TemplateParams` object.

Imports: the contract only (nothing of this package: every other module imports it).
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.base import RankResult
from scenarios.params import Params, integer

# The cost key of the compute action: the CostModel's compute table holds its seconds
# (estimated before a run, measured by the ranks after it: RankResult.compute_costs).
MATMUL = "matmul"
FLOAT_BYTES = 4  # float32


@dataclass(frozen=True)
class TemplateParams(Params):
    # integer(default, minimum, maximum on a real run, maximum on predict)
    ranks: int = integer(2, 2, 8, 256)
    dim: int = integer(256, 8, 1024, 16384)
    steps: int = integer(5, 1, 50)

    @property
    def buffer_bytes(self) -> int:
        """Bytes each rank all-reduces per step: its dim × dim float32 result."""
        return self.dim * self.dim * FLOAT_BYTES


@dataclass(frozen=True, kw_only=True)
class TemplateResult(RankResult):
    """What each rank reports besides its measured costs: the sum of the all-reduced
    matrix of its last step, and how far that matrix is from a single-process reference."""

    checksum: float
    max_abs_diff_vs_reference: float
