"""Lesson 6's Program: each series' training steps as Actions, the buckets launched in backward.

The lesson's Program (scenarios.mixed_precision.lesson declares it): the series
a run trains (`variants`: a precision times an implementation) and, per rank and
step, the Actions both engines run
(`step_actions`): F; the backward parts in the order backward runs them, each
followed by the all-reduces of the buckets it completes (non-blocking: they run
under the rest of backward, on the rank's communication stream); a wait for the
last of them; the unscale (fp16) or the copy to fp32 (bf16); Adam on the fp32
weights. The buckets are scenarios.mixed_precision.buckets' (torch's rule).

Imports: runtime's pure part and the lesson's params and buckets (the UI imports this).
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.sim.effects import NONBLOCKING
from runtime.sim.program import Action, Program, barriers
from scenarios.mixed_precision import buckets
from scenarios.mixed_precision.params import MixedParams

ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}  # of a gradient, what a bucket holds


@dataclass(frozen=True)
class Variant:
    """One series: a precision trained by one implementation."""

    series: str
    precision: str
    implementation: str

    @property
    def scaled(self) -> bool:
        """Only fp16 needs loss scaling: bf16 has fp32's exponent range."""
        return self.precision == "fp16"


def variants(params: MixedParams) -> list[Variant]:
    return [Variant(f"{p}/{i}", p, i) for p in params.precision for i in params.implementations]


def build(params: MixedParams, steps: range | None = None, ranks: range | None = None) -> Program:
    """Every series, one after the other; `steps` and `ranks`: only those (a lumped
    prediction draws rank 0's steady step)."""
    n = params.ranks
    group = tuple(range(n))  # one shared tuple: the simulator keys collectives by it
    program = Program(n, name="mixed-precision")
    for v in variants(params):
        if ranks is None:
            program.extend(barriers(f"{v.series}/start", group, series=v.series, phase="formats"))
        plan = buckets.plan(params.model, ELEMENT_BYTES[v.precision], *caps(params))
        for r in ranks or range(n):
            for k in steps or range(1, params.steps + 1):
                sizes, launch = plan[:2] if k == 1 else plan[2:]
                program.extend(step_actions(params, v, k, r, sizes, launch, group))
    return program


def caps(params: MixedParams) -> tuple[int, int]:
    return params.bucket_cap, params.first_bucket_cap


def step_actions(
    params: MixedParams,
    v: Variant,
    k: int,
    rank: int,
    sizes: list[int],
    launch: list[int],
    group: tuple[int, ...],
) -> list[Action]:
    """Step k of series `v` on `rank`: F, each backward part followed by the buckets it
    completes (their all-reduces launched without waiting), the wait, unscale, Adam."""
    s = v.series

    def act(name: str, kind: str, label: str, phase: str, **kw) -> Action:
        return Action(f"{s}/s{k}/{name}@r{rank}", rank, kind, label, series=s, step=k,
                      phase=phase, **kw)  # fmt: skip

    after: dict[int, list[int]] = {}  # backward part -> the buckets it completes
    for j, at in enumerate(launch):
        after.setdefault(at, []).append(j)
    low = v.precision == "bf16"
    out = [act("F", "F", "F", "bf16" if low else "formats", cost_key=f"F.{s}")]
    for p, part in enumerate(buckets.parts(params.model.layers)):
        key = f"B.{s}.{part.rstrip('0123456789')}"  # every block costs the same
        out.append(act(f"B{p}", "B", f"B {part}", "overlap", cost_key=key, args=(("part", p),)))
        # torch's own all-reduce (gloo's, NCCL's), by hand and by torch's DDP alike: the
        # ring formula, its latency the one the run's buckets paid while backward ran
        # (RankResult.p2p, scenarios.mixed_precision.rank), then each series' buckets
        # scaled as they ran once they could start (runtime.fit.refine: not launch to end,
        # the queue behind earlier buckets, which the simulator adds itself)
        out += [
            act(
                f"AR{j}",
                "all_reduce",
                f"AR b{j}",
                "buckets",
                bytes=sizes[j],
                group=group,
                algorithm="builtin",
                chunk=j,
                effects=NONBLOCKING,
            )  # fmt: skip
            for j in after.get(p, ())
        ]
    out.append(act("wait", "wait", "wait", "tradeoff"))
    if v.precision != "fp32":
        label = "unscale" if v.scaled else "to fp32"
        out.append(act("U", "compute", label, "scaling" if v.scaled else "bf16", cost_key=f"U.{s}"))
    out.append(act("opt", "opt", "Adam", "master", cost_key=f"opt.{s}"))
    return out
