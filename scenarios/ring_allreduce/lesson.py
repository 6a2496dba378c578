"""Lesson 1: data parallelism needs an all-reduce, and the ring does it in 2(n-1) steps.

The `ring-allreduce` lesson, top to bottom: its params, its narrative (with every text a learner reads, in texts.toml), its
Program, its metrics. Each timed iteration starts with a barrier (so all ranks
start together) and then runs the chosen algorithm on a buffer of `size` bytes
per rank:

- ring: the hand-made ring reduce-scatter + all-gather (runtime.engine.collectives),
  one sendrecv Span per step with its bytes, peer and chunk;
- tree: binomial-tree reduce to rank 0, then binomial-tree broadcast;
- builtin: torch.distributed.all_reduce, one Span per rank.

Whatever the algorithm, every iteration ends with a reference: a barrier and
torch's own all_reduce on the same data (series "reference"), timed as Spans of
the same Program, side by side with the hand-made one; the rank code
(scenarios.ring_allreduce.rank) checks that the hand result equals torch's.

Metrics follow nccl-tests' definitions: algbw = S/t, busbw = algbw·2(n-1)/n.

Imports: runtime's pure part and the lesson contract (the UI imports this).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from runtime.engine import collectives
from runtime.engine.faults import Fault, require_timed
from runtime.sim import formulas
from runtime.sim.program import Action, Program, barriers
from runtime.sim.trace import Timeline
from scenarios.base import Hooks, Lesson, RankResult, RunData
from scenarios.metrics import Metric
from scenarios.params import Mode, ParamError, Params, choice, integer, size
from scenarios.ring_allreduce import lumped
from scenarios.texts import load_texts

DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
# Above this many ranks `predict` costs each rank's whole all-reduce as one action
# (the same formula the step-by-step ring adds up to), so 4096 ranks stay fast.
STEPWISE_MAX_RANKS = 64
# The series of torch's all_reduce, timed in every iteration beside the hand-made one.
REFERENCE = "reference"


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class RingParams(Params):
    ranks: int = integer(4, 2, 16, 4096)
    size: int = size(4 * 2**20, 1, 256 * 2**20, 2**40)
    algorithm: str = choice("ring", ("ring", "tree", "builtin"))
    dtype: str = choice("float32", tuple(DTYPE_BYTES))
    repeat: int = integer(3, 1, 50)

    def check(self, mode: Mode) -> None:
        if self.size % self.itemsize:
            raise ParamError(
                "size",
                f"size={self.size}: must be a whole number of {self.dtype} elements "
                f"({self.itemsize} bytes each)",
                es=f"size={self.size}: debe ser un número entero de elementos {self.dtype} "
                f"({self.itemsize} bytes cada uno)",
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


# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/ring_allreduce/texts.toml


# -- program ------------------------------------------------------------------------------
def build(params: RingParams) -> Program:
    n, algorithm = params.ranks, params.algorithm
    group = list(range(n))
    members = tuple(group)  # one shared tuple: the simulator keys collectives by it
    program = Program(n, name="ring-allreduce")
    for step in range(params.repeat):
        prefix = f"it{step}."
        program.extend(
            barriers(
                f"{prefix}{algorithm}.barrier", members, series=algorithm, phase="start", step=step
            )
        )
        if not params.stepwise:
            # One action per rank, costed by the algorithm's formula.
            label = "all_reduce" if algorithm == "builtin" else f"{algorithm} all_reduce"
            program.extend(
                _all_reduce(f"{prefix}allreduce", members, params.size, algorithm, label, step)
            )
        else:
            if algorithm == "ring":
                schedule = collectives.ring_all_reduce(
                    group, params.numel, params.itemsize, prefix=prefix, step=step
                )
            else:
                schedule = collectives.tree_all_reduce(group, params.size, prefix=prefix, step=step)
            for rank in group:
                program.extend(replace(a, series=algorithm) for a in schedule[rank])
        # torch's own all_reduce on the same data, after a barrier, in every iteration:
        # measured side by side with the hand-made one, so drifts in the machine's load
        # hit both alike (and the learner sees both on one timeline).
        program.extend(
            barriers(
                f"{prefix}{REFERENCE}.barrier",
                members,
                series=REFERENCE,
                phase=REFERENCE,
                step=step,
            )
        )
        reference = _all_reduce(
            f"{prefix}{REFERENCE}.all_reduce",
            members,
            params.size,
            REFERENCE,
            "torch all_reduce",
            step,
        )
        program.extend(reference)
    return program


def _all_reduce(
    name: str, members: tuple[int, ...], nbytes: int, series: str, label: str, step: int
) -> list[Action]:
    """One all_reduce action per rank, costed by its algorithm's formula."""
    algorithm = series if series != REFERENCE else "builtin"
    phase = "all-reduce" if series != REFERENCE else REFERENCE
    template = Action("", 0, "all_reduce", label, bytes=nbytes, group=members, step=step)
    template = replace(template, algorithm=algorithm, series=series, phase=phase)
    return [replace(template, id=f"{name}@r{rank}", rank=rank) for rank in members]


# -- metrics ------------------------------------------------------------------------------
def metrics(
    params: RingParams, predicted: Timeline, run: RunData[RingResult] | None
) -> list[Metric]:
    n, nbytes = params.ranks, params.size
    hand, reference = params.algorithm, REFERENCE
    predicted_s = statistics.median(iteration_times(predicted, hand))
    builtin_predicted_s = statistics.median(iteration_times(predicted, reference))
    measured_s = builtin_s = None
    if run is not None:
        measured_s = statistics.median(iteration_times(run.measured, hand))
        builtin_s = statistics.median(iteration_times(run.measured, reference))

    def busbw(seconds: float | None) -> float | None:
        return formulas.busbw("all_reduce", n, nbytes, seconds) / 1e9 if seconds else None

    out = [
        Metric("time_s", "s", measured_s, predicted_s),
        Metric("busbw_gbps", "GB/s", busbw(measured_s), busbw(predicted_s)),
        Metric("builtin_time_s", "s", builtin_s, builtin_predicted_s),
        Metric("builtin_busbw_gbps", "GB/s", busbw(builtin_s), busbw(builtin_predicted_s)),
    ]
    # What each rank sends in one iteration (the tree's differs by rank: read off its steps).
    tree = params.stepwise and params.algorithm == "tree"
    expected = expected_bytes(params, build(replace(params, repeat=1)) if tree else None)
    if run is None:
        return [*out, Metric("expected_bytes_per_rank", "bytes", expected)]
    results = run.results
    sent = [r.bytes_sent_per_iteration for r in results]
    ratio = (busbw(measured_s) or 0.0) / (busbw(builtin_s) or 1.0) if builtin_s else None
    return [
        *out,
        Metric(
            "algbw_gbps", "GB/s", formulas.algbw(nbytes, measured_s) / 1e9 if measured_s else None
        ),
        Metric("busbw_vs_builtin", "ratio", ratio),
        Metric(
            "bytes_sent_per_rank",
            "bytes",
            None if any(s is None for s in sent) else sent,
            expected,
            per="rank",
        ),
        Metric("max_abs_diff_vs_builtin", "diff", max(r.max_abs_diff_vs_builtin for r in results)),
        Metric("equals_builtin", "flag", all(r.equals_builtin for r in results)),
    ]


def iteration_times(timeline: Timeline, series: str) -> list[float]:
    """Per iteration: from the first rank starting the series' all-reduce to the last
    one finishing it."""
    bounds: dict[int, list[float]] = {}
    for span in timeline.of_series(series):
        if span.step is None:
            continue
        lo_hi = bounds.setdefault(span.step, [span.start, span.end])
        lo_hi[0] = min(lo_hi[0], span.start)
        lo_hi[1] = max(lo_hi[1], span.end)
    return [hi - lo for _, (lo, hi) in sorted(bounds.items())] or [0.0]


def expected_bytes(params: RingParams, program: Program | None) -> float | list[float]:
    """Ring: the formula 2S(n-1)/n. Tree: what each rank's schedule sends (it differs by rank)."""
    n = params.ranks
    if params.algorithm != "tree" or program is None:
        return formulas.ring_all_reduce_bytes_per_rank(n, params.size)
    per_rank = [0.0] * n
    for action in program.actions():
        if action.step == 0:
            for _dst, nbytes in action.sends():
                per_rank[action.rank] += nbytes
    return per_rank


RANK_ENTRY = (
    "scenarios.ring_allreduce.rank:run_rank"  # what each rank runs (torch: never imported here)
)


# At thousands of ranks and many iterations `predict` lumps (scenarios.ring_allreduce.lumped).
# After a run its steps are costed one by one (runtime.fit.refine_collectives) and the
# executor's Python between two of them is added (about 20-50 us a step here).
def check_faults(params: RingParams, faults: list[Fault]) -> None:
    """Timed faults, and a slow rank where it has something to slow: its own reductions
    (each ring or tree step's add, runtime.engine.worker). Inside torch's all_reduce (builtin,
    or any algorithm costed as one action) the reduction is gloo's, which no rank code
    can slow, so the fault would have no effect: refused, not silently ignored."""
    require_timed(faults)
    slow = next((f for f in faults if f.kind == "slow"), None)
    if slow is not None and not params.stepwise:
        spec = slow.describe()
        raise ParamError(
            "algorithm",
            f"--fault {spec!r}: with algorithm={params.algorithm} the reduction runs inside "
            "torch's all_reduce, which a slow rank cannot slow; use algorithm=ring or tree",
            es=f"--fault {spec!r}: con algorithm={params.algorithm} la reducción ocurre dentro "
            "del all_reduce de torch, que un rango lento no puede ralentizar; use "
            "algorithm=ring o tree",
        )


HOOKS = Hooks(lump=lumped.lump, headline=("time_s",), dispatch_gaps=True, check_faults=check_faults)
LESSON = Lesson(
    "ring-allreduce", 1, TEXTS, RingParams, RingResult, build, metrics, RANK_ENTRY, HOOKS
)
