"""Lesson 2: ZeRO and FSDP — where the memory of training goes, and what each stage removes.

The `zero` lesson, top to bottom: its params (.params), its narrative (with every
text a learner reads, in texts.toml), its Program (.program), its metrics.
MiniGPT (runtime.engine.models) is trained for `steps` Adam steps by each
stage of the `stage` list, one after the other on the same ranks, each from
the same initial weights and on the same global batches (`microbatch`
sequences per rank per step):

- ddp: every rank holds everything; gradients all-reduced per unit (DDP's buckets);
- zero1 (P_os): Adam's states sharded; gradients reduce-scattered after backward,
  params all-gathered after the step;
- zero2 (P_os+g): gradients sharded too, reduce-scattered unit by unit as backward
  produces them;
- zero3 (P_os+g+p): params sharded too, all-gathered per unit before its forward
  and again before its backward, freed after each use;
- fsdp2: torch's `fully_shard` on the same units (it runs on gloo on CPU in torch
  2.13), its memory measured the same way.

Every Action carries its stage as `series`. The rank side (scenarios.zero.rank,
with scenarios.zero.executors and .fsdp2) measures, from the live tensors, the
bytes of params, grads, optimizer states, activations and communication buffers
on each rank after every Action, and counts the bytes each rank puts on the
wire. The prediction is the ZeRO paper's arithmetic (scenarios.zero.memory),
exactly for any Ψ, N_d and K; for the real run it is also worked out per rank
with the shards' rounding, so measured and predicted bars stand side by side.
`predict` goes far beyond this machine: `-p params=70B -p dp=1024 -p
precision=mixed -p gpu_memory=80GB`.

Imports: runtime's pure part and the lesson contract (the UI imports this).
"""

from __future__ import annotations

from runtime.fit.after_run import Refinement
from runtime.sim.trace import Timeline, makespan
from scenarios.base import OPTIMIZER_MODULES, Hooks, Lesson, RunData
from scenarios.metrics import Metric
from scenarios.texts import load_texts
from scenarios.zero import formulas, lumped, memory, rates
from scenarios.zero.params import FSDP2_MODULES, ZeroParams
from scenarios.zero.program import build, estimate
from scenarios.zero.results import ZeroResult

# -- parameters: ZeroParams (scenarios/zero/params.py)
# -- rank result: ZeroResult (per stage: peak bytes by category, bytes sent, the
#    parameters' distance to DDP's, losses), in scenarios/zero/results.py.
# -- narrative: the steps, title, summary and params' help, in Spanish and English --
TEXTS = load_texts(__package__)  # scenarios/zero/texts.toml


# -- program: build, and `estimate` of its compute costs (scenarios/zero/program.py)


# -- metrics ------------------------------------------------------------------------------
def steps_time(timeline: Timeline, stage: str) -> float:
    """A stage's steps, from the barrier that starts them releasing the ranks to the last
    rank's end. The wait in that barrier is not the stage's: it is the previous stage's
    skew and this one's model being built, and it would pass for the stage's time."""
    return makespan(s for s in timeline.of_series(stage) if s.kind != "barrier")


def metrics(
    params: ZeroParams, predicted: Timeline, run: RunData[ZeroResult] | None
) -> list[Metric]:
    n, psi = params.ranks, params.psi
    elem = formulas.ZERO_PRECISIONS[params.precision][0]
    out = [
        Metric("parameters", "count", psi),
        Metric("ranks", "count", n),
        Metric("precision", "text", params.precision),
    ]
    for stage in params.stage:
        mine = [r.stages[stage] for r in run.results] if run is not None else None
        measured_s = steps_time(run.measured, stage) if run is not None else None
        out.append(Metric("makespan_s", "s", measured_s, steps_time(predicted, stage), stage))
        comm = formulas.zero_comm_bytes_per_rank(psi, n, stage, elem)
        sent = [m.bytes_sent / params.steps for m in mine] if mine else None
        out += [
            Metric("comm_bytes_per_rank", "bytes", sent, comm, stage, per="rank"),
            Metric("comm_elements", "count", formulas.zero_comm_elements(psi, stage), None, stage),
        ]
        if sent:
            ratio = max(sent) / comm if comm else 0.0
            out.append(Metric("comm_measured_vs_predicted", "ratio", ratio, series=stage))
        out += memory.memory_metrics(params, stage, [m.peak_bytes for m in mine or []])
        if mine and stage != "ddp":
            diff = max(m.param_diff_vs_ddp for m in mine)
            out.append(Metric("param_diff_vs_ddp", "diff", diff, series=stage))
        if mine:
            out.append(Metric("losses", "number", list(mine[0].losses), series=stage, per="step"))
    if run is not None:
        diffs = [m.value for m in out if m.name == "param_diff_vs_ddp"]
        out.append(Metric("max_param_diff_vs_ddp", "diff", max(diffs, default=0.0)))
        reference = [r.ddp_diff_vs_single_process for r in run.results]
        known = [d for d in reference if d is not None]
        if known:
            out.append(Metric("ddp_param_diff_vs_single_process", "diff", max(known)))
    return out


def tokens(params: ZeroParams) -> tuple[str, float]:
    """Each rank trains on `microbatch` sequences of `seq` tokens per step."""
    return ("tokens", float(params.microbatch * params.model.seq))


RANK_ENTRY = "scenarios.zero.rank:run_rank"  # what each rank runs (torch: never imported here)
# At many ranks or layers `predict` lumps the ranks, alike, into one (scenarios.zero.lumped).
HOOKS = Hooks(
    estimate,
    # a step is a chain of its units' collectives, of many small actions
    refinement=Refinement(collectives="chained", gaps="measured", measures="unit costs"),
    lump=lumped.lump,
    items=tokens,
    preload=(*FSDP2_MODULES, *OPTIMIZER_MODULES),
    headline=("makespan_s",),
    probes=rates.PROBES,  # FSDP2's overheads (scenarios.zero.rates)
)
LESSON = Lesson("zero", 2, TEXTS, ZeroParams, ZeroResult, build, metrics, RANK_ENTRY, HOOKS)
