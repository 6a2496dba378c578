"""Lesson 0's real demonstration as data: its series, its Program, its costs and metrics.

The rank side (scenarios.why_distribute.rank) trains the MiniGPT (fp32, Adam) in
these series, one after the other on the same ranks, each starting with a
barrier of every rank (docs/design.md: one Program, several variants, each Action
carrying its `series`):

- `alone` (memory): rank 0 alone tries one training step with a per-rank memory
  cap, enforced by counting its live tensors after every Action; over the cap it
  refuses, naming the bytes;
- `zero3` and `fsdp2` (memory): the same global batch on every rank, ZeRO-3 by
  hand (scenarios.zero.executors) and torch's FSDP2 (scenarios.zero.fsdp2), under
  the same cap: 16 B/param shared by N ranks now fits;
- `ddp<n>` and `torch_ddp<n>` for n = 1, 2, 4… up to `ranks` (time): the global
  batch of `microbatch_size · ranks` sequences split over n ranks, DDP by hand
  (gradients all-reduced unit by unit by the project's ring) and torch's
  DistributedDataParallel (its buckets all-reduced inside backward).

The steps of one unit's forward, backward and collectives are the ZeRO lesson's
(scenarios.zero.program.step_plan, plan_action) with cost keys that say the
batch; the estimates of those costs are that lesson's too (its `estimate`).
The predicted memory per rank is scenarios.zero.memory's, with the shards' rounding.

Imports: runtime's pure part, the ZeRO lesson's pure modules (its params, memory and
Program), the lesson's params and phrases.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from runtime.sim.compute import TYPICAL_CPU
from runtime.sim.costmodel import CostModel
from runtime.sim.effects import UNTIMED
from runtime.sim.program import Action, Program, barriers, past_warmup
from runtime.sim.trace import Timeline, makespan, mean_step_period
from scenarios.base import RunData
from scenarios.metrics import CATEGORIES, Metric, find
from scenarios.shape import FP32, GPTShape
from scenarios.why_distribute.params import WhyParams, WhyResult
from scenarios.why_distribute.phrases import both
from scenarios.zero import memory as zero_memory
from scenarios.zero.params import STAGES, ZeroParams
from scenarios.zero.program import estimate as zero_estimate
from scenarios.zero.program import plan_action, step_plan

# The phases of the narrative steps that have no training of their own: the barriers
# that open and close the Program carry them.
OPENING, CLOSING = "reasons", ("links", "cost")
MEMORY_SERIES = ("alone", "zero3", "fsdp2")


@dataclass(frozen=True)
class Series:
    name: str
    kind: str  # how its steps run: ddp, zero3, fsdp2 (whole-model F/B/opt), torch_ddp
    members: int  # ranks 0..members-1 take part
    batch: int  # sequences per rank per step
    phase: str


def series(ranks: int, micro: int) -> list[Series]:
    out = [
        Series("alone", "ddp", 1, micro, "footprint"),
        Series("zero3", "zero3", ranks, micro, "zero3"),
        Series("fsdp2", "fsdp2", ranks, micro, "fsdp2"),
    ]
    n = 1
    while n <= ranks:
        per_rank = micro * ranks // n
        out += [Series(f"ddp{n}", "ddp", n, per_rank, "ddp")]
        out += [Series(f"torch_ddp{n}", "torch_ddp", n, per_rank, "ddp")]
        n *= 2
    return out


def units(model: GPTShape) -> list[int]:
    return zero_memory.unit_numels(ZeroParams(model=model))


def cost_key(s: Series, action: Action) -> str | None:
    """The compute table's key of a unit's F or B at this series' batch; FSDP2's and torch
    DDP's whole-model F and B by series (their collectives and hooks run inside them);
    Adam's by how many elements it updates (FSDP2's over DTensors, its own)."""
    key = action.cost_key
    if key is None:
        return None
    kind, _, what = key.partition(".")
    if kind == "opt":
        sharded = {"zero3": f"opt.shard{s.members}", "fsdp2": f"opt.fsdp2x{s.members}"}
        return sharded.get(s.kind, "opt.torch" if s.kind == "torch_ddp" else "opt.whole")
    if s.kind in ("fsdp2", "torch_ddp"):
        return f"{kind}.{s.name}.b{s.batch}"
    return f"{kind}.{what}.b{s.batch}"


def build(ranks: int, steps: int, micro: int, model: GPTShape) -> Program:
    world = tuple(range(ranks))
    numels = units(model)
    program = Program(ranks, name="why-distribute")
    program.extend(barriers("reasons", world, series="plan", phase=OPENING))
    for s in series(ranks, micro):
        program.extend(barriers(f"{s.name}/start", world, series=s.name, phase=s.phase))
        group = tuple(range(s.members))
        stage = "fsdp2" if s.kind == "torch_ddp" else s.kind
        plan = step_plan(stage, len(numels))
        if s.members == 1:
            plan = [item for item in plan if item[0] in ("F", "B", "opt")]
        for r in group:
            for t in range(steps):
                for item in plan:
                    action = plan_action(stage, t, r, item, numels, group)
                    label = action.label.replace("fully_shard", "torch DDP")
                    program.add(
                        replace(
                            action,
                            id=f"{s.name}/{action.id}",
                            series=s.name,
                            phase=s.phase,
                            label=label if s.kind == "torch_ddp" else action.label,
                            cost_key=cost_key(s, action),
                        )
                    )
                    if s.kind == "torch_ddp" and item[0] == "B" and s.members > 1:
                        program.add(_bucket_all_reduce(s, t, r, sum(numels) * FP32, group))
    for phase in CLOSING:
        program.extend(barriers(phase, world, series="plan", phase=phase))
    return program


def _bucket_all_reduce(s: Series, t: int, rank: int, nbytes: int, group: tuple) -> Action:
    """torch DDP's gradient all-reduce: its buckets go out inside backward, so the rank
    does nothing here (a span of ~0 s); the prediction costs it as one all-reduce of the
    gradients after B, as the hand-made DDP's unit by unit."""
    return Action(
        f"{s.name}/s{t}/ar@r{rank}",
        rank,
        "all_reduce",
        "AR (DDP buckets, inside B)",
        bytes=nbytes,
        group=group,
        algorithm="builtin",
        series=s.name,
        step=t,
        phase=s.phase,
        # Its span times nothing (the work is inside B): after a run it costs nothing
        # of its own, B's span has it (runtime.fit.refine_collectives).
        effects=UNTIMED,
    )


def estimate(ranks: int, micro: int, model: GPTShape, costs: CostModel) -> CostModel:
    """The compute costs of every series before a run, from the ZeRO lesson's estimate at
    each batch: each unit's F and B; FSDP2's whole-model F, B and Adam as that lesson
    costs them (its gathers inside); torch DDP's F and B the units' sum (its all-reduce
    is an Action of its own, _bucket_all_reduce); Adam whole (over the units' flat
    tensors, or torch DDP's over the model's), or sharded."""
    table: dict[str, float] = {}
    numels = units(model)
    for s in series(ranks, micro):
        zp = ZeroParams(ranks=s.members, microbatch=s.batch, model=model, stage=STAGES)
        base = zero_estimate(zp, replace(costs, compute={})).compute
        for kind in ("F", "B"):
            each = {f"{kind}.u{u}.b{s.batch}": base[f"{kind}.u{u}"] for u in range(len(numels))}
            table |= each
            if s.kind == "fsdp2":
                table[f"{kind}.{s.name}.b{s.batch}"] = base[f"{kind}.fsdp2"]
            elif s.kind == "torch_ddp":
                table[f"{kind}.{s.name}.b{s.batch}"] = sum(each.values())
        table["opt.whole"] = base["opt.ddp"]
        if s.kind == "zero3":
            table[f"opt.shard{s.members}"] = base["opt.zero3"]
        if s.kind == "fsdp2":
            table[f"opt.fsdp2x{s.members}"] = base["opt.fsdp2"]
    # torch's DDP steps the model's own parameter tensors, not the units' flat ones.
    rates = costs.rates or TYPICAL_CPU
    table["opt.torch"] = rates.adam_seconds(model.parameters, model.parameter_tensors)
    return replace(costs, compute={**costs.compute, **table})


# -- memory ---------------------------------------------------------------------------
def predicted_bytes(s: Series, model: GPTShape) -> dict[str, list[float]]:
    """Per rank and category at the peak (scenarios.zero.memory, with the shards' rounding)."""
    zp = ZeroParams(ranks=s.members, microbatch=s.batch, model=model, activations="on")
    return zero_memory.predicted_rank_bytes(zp, "ddp" if s.kind == "torch_ddp" else s.kind)


def predicted_total(s: Series, model: GPTShape) -> float:
    bars = predicted_bytes(s, model)
    return max(sum(bars[c][r] for c in CATEGORIES) for r in range(s.members))


def cap(params: WhyParams) -> int:
    """The demonstration's per-rank memory cap: as given, or halfway between what one
    rank alone and one of `ranks` ZeRO-3 ranks are predicted to hold at their peaks."""
    if params.gpu_memory:
        return params.gpu_memory
    return auto_cap(params.ranks, params.microbatch_size, params.demo_shape)


def auto_cap(ranks: int, micro: int, model: GPTShape) -> int:
    """Halfway between one rank alone and one rank of `ranks` under ZeRO-3."""
    by_name = {s.name: s for s in series(ranks, micro)}
    alone = predicted_total(by_name["alone"], model)
    shared = max(predicted_total(by_name[k], model) for k in ("zero3", "fsdp2"))
    return int((alone + shared) / 2)


# -- metrics ----------------------------------------------------------------------------
def metrics(
    params: WhyParams, predicted: Timeline, run: RunData[WhyResult] | None, cap: int
) -> list[Metric]:
    model, steps = params.demo_shape, params.steps
    results = run.results if run is not None else []
    out = [
        Metric("demo_parameters", "count", sum(units(model))),
        Metric("gpu_memory_cap_bytes", "bytes", cap),
    ]
    every = series(params.ranks, params.microbatch_size)
    for s in every:
        if s.name not in MEMORY_SERIES:
            continue
        bars = predicted_bytes(s, model)
        mine = [r.peaks.get(s.name) for r in results[: s.members]]
        for category in CATEGORIES:
            measured = [m[category] for m in mine if m] or None
            predicted_bars = bars[category]
            out.append(
                Metric("peak_bytes", "bytes", measured, predicted_bars, s.name, category, "rank")
            )
        total = predicted_total(s, model)
        peak = max((r.peak_total[s.name] for r in results if s.name in r.peak_total), default=None)
        refusals = [r.refused[s.name] for r in results if s.name in r.refused]
        fits = None if run is None else not refusals and peak is not None and peak <= cap
        out += [
            Metric("peak_total_bytes", "bytes", peak, total, s.name),
            Metric("fits_gpu_memory", "flag", fits, total <= cap, s.name),
        ]
        for refusal in refusals:  # English the value, Spanish its twin
            out.append(Metric("refusal", "text", refusal["en"], series=s.name, es=refusal["es"]))
    peaks = {k: find(out, "peak_total_bytes", k) for k in ("zero3", "fsdp2")}
    if run is not None and all(p is not None and p.value for p in peaks.values()):
        ratio = peaks["zero3"].value / peaks["fsdp2"].value  # type: ignore[union-attr,operator]
        out.append(Metric("peak_vs_fsdp2", "ratio", ratio, series="zero3"))
    out += _timing(params, predicted, run, every, steps)
    return out


def _timing(
    params: WhyParams,
    predicted: Timeline,
    run: RunData[WhyResult] | None,
    every: list[Series],
    steps: int,
) -> list[Metric]:
    out: list[Metric] = []
    step_s: dict[str, tuple[float | None, float]] = {}
    for s in every:
        guess = steady_step_s(predicted, s.name, steps)
        measured = steady_step_s(run.measured, s.name, steps) if run else None
        step_s[s.name] = (measured, guess)
        if s.name in MEMORY_SERIES:
            continue
        out.append(Metric("step_s", "s", measured, guess, s.name))
    for s in every:
        if s.name.startswith(("ddp", "torch_ddp")):
            kind = "ddp" if s.name.startswith("ddp") else "torch_ddp"
            one_m, one_p = step_s[f"{kind}1"]
            here_m, here_p = step_s[s.name]
            speed = one_m / here_m if one_m and here_m else None
            out.append(Metric("ddp_speedup", "ratio", speed, one_p / here_p, s.name))
    if run is not None:
        cores = max((r.cpu_cores for r in run.results), default=0)
        out.append(Metric("cpu_cores", "count", cores or None))
        for s in every:
            diffs = [r.param_diff[s.name] for r in run.results if s.name in r.param_diff]
            if diffs:
                out.append(
                    Metric("param_diff_vs_single_process", "diff", max(diffs), series=s.name)
                )
        for s in every:
            if s.kind == "ddp" and s.name != "alone":
                hand, torch_s = step_s[s.name][0], step_s[f"torch_{s.name}"][0]
                ratio = hand / torch_s if hand and torch_s else None
                out.append(Metric("step_vs_torch", "ratio", ratio, series=s.name))
    return out


def warmup_steps(steps: int) -> int:
    """The steps the timing leaves out: the first, when there is another to time. It
    pays what a process pays once, not what DDP costs: Adam allocating its moments,
    torch's DDP rebuilding its buckets after its first backward, the first forward at a
    new batch shape: a warm-up a benchmark leaves out (and the model refined after a
    run: Hooks.warmup_steps)."""
    return 1 if steps > 1 else 0


def steady_step_s(timeline: Timeline, series: str, steps: int) -> float:
    """One step of a series once it runs steadily: from the warm-up's end (its last
    rank's) to the last step's, per step, the period a benchmark's iterations/s counts.
    Not from the first steady step's first start: the ranks leave the warm-up apart and
    only the next step's collective brings them together, so a run would count its
    ranks' skew once more than the prediction does. One step alone: its makespan.
    Barriers excluded, as scenarios.zero.lesson.steps_time (the wait in one is the
    series' model being built and the previous series' skew)."""
    warm = warmup_steps(steps)
    spans = [s for s in timeline.of_series(series) if s.kind != "barrier"]
    if not warm:
        return makespan(spans)
    period = mean_step_period(spans, warm, steps - 1)
    if period is None:
        return makespan(s for s in spans if past_warmup(s.step, warm)) / (steps - warm)
    return period


def refusal_line(rank: int, label: str, held: dict[str, int], cap: int) -> dict[str, str]:
    """The refusal, in both languages: what was held, by category, against the cap."""
    parts = " + ".join(f"{k} {v:,}" for k, v in held.items() if v)
    values: dict[str, Any] = dict(rank=rank, at=label, total=f"{sum(held.values()):,}")
    return both("refusal", **values, parts=parts, cap=f"{cap:,}")
