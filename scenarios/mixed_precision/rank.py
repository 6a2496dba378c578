"""Rank side of lesson 6: each precision trained by hand and by torch, buckets timed in backward.

Called inside each rank process by runtime.engine.worker with a RankContext:

1. Before the clock: a throwaway trainer and one fp32 forward and backward of a
   fresh MiniGPT on this rank's first microbatch (what a process pays the first
   time is paid here),
   whose real gradients say how many values fp16 flushes to zero without loss
   scaling and at the initial scale (`Underflow`).
2. For each series of the Program (scenarios.mixed_precision.plan: a precision
   times an implementation), a fresh MiniGPT from the same seed, trained on the
   same microbatches by scenarios.mixed_precision.trainer. One backward runs
   all of a step's B actions: their spans end when each part's last gradient
   was ready (the parameters' hooks), and each bucket's all-reduce span runs
   from its launch to its end (scenarios.mixed_precision.ddp), so the overlap is
   drawn as it happened. The `wait` span runs from the last gradient to the
   last bucket's end.
3. A torch series' reduced gradients are compared with the hand series' of the
   same precision, step by step (`grad_diff_vs_torch`); the scale traces and
   skipped steps of every scaler go back in the result.

Compute costs for the prediction: wall seconds (the all-reduces' threads share
the cores with backward, and the run pays that), backward split across its
parts as their hooks timed them; the median over the steady steps.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from itertools import groupby

import torch
import torch.distributed as dist

from runtime.engine.models import GPTConfig, MiniGPT, batch
from runtime.engine.worker import RankContext
from runtime.sim.program import Action
from scenarios.mixed_precision import buckets
from scenarios.mixed_precision.params import MixedParams
from scenarios.mixed_precision.plan import Variant, variants
from scenarios.mixed_precision.results import MixedResult, SeriesResult, Underflow
from scenarios.mixed_precision.scaler import INIT_SCALE
from scenarios.mixed_precision.timing import FIRST_STEADY
from scenarios.mixed_precision.trainer import SeriesTrainer

Context = RankContext[MixedParams]
SMALLEST_NORMAL_FP16 = 2.0**-14


def cpu_clock() -> float:
    """Wall seconds: gloo's threads reduce buckets on the same cores while backward runs,
    and what they take from it is part of what the prediction must reproduce."""
    return time.perf_counter()


def underflow(cfg: GPTConfig, inputs: torch.Tensor, targets: torch.Tensor) -> Underflow:
    """Of one real fp32 backward's nonzero gradients: the share fp16 flushes to zero or
    keeps only as subnormals, unscaled and times the initial scale."""
    model = MiniGPT(cfg)
    model(inputs, targets).backward()
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    grads = grads[grads != 0]

    def shares(values: torch.Tensor) -> tuple[float, float]:
        half = values.half()
        zero = float((half == 0).float().mean())
        sub = float(((half != 0) & (half.float().abs() < SMALLEST_NORMAL_FP16)).float().mean())
        return zero, sub

    zero_u, sub_u = shares(grads)
    zero_s, sub_s = shares(grads * INIT_SCALE)
    return Underflow(zero_u, zero_s, sub_u, sub_s, float(grads.abs().min()))


class StepRunner:
    """Runs one step's Actions of a series and records their spans on the run's clock."""

    def __init__(self, ctx: Context, trainer: SeriesTrainer, costs: dict[str, list[float]]):
        self.ctx, self.trainer, self.costs = ctx, trainer, costs
        self.p2p: list[tuple[int, float]] = []
        shape = ctx.params.model
        self.part_of = [p.part for p in buckets.gpt_params(shape)]
        names = [name for name, _ in trainer.model.named_parameters()]
        assert names == [p.name for p in buckets.gpt_params(shape)], "MiniGPT changed"

    def cost(self, key: str | None, seconds: float, step: int) -> None:
        if key is not None and (step >= FIRST_STEADY or self.ctx.params.steps == 1):
            self.costs[key].append(seconds)

    def messages(self, buckets: list[tuple[Action, float]], step: int) -> None:
        """A step's bucket all-reduces as rings of 2(n−1) messages of bytes/n each: one
        sample, the average message (the slow last buckets count, as the step pays them);
        runtime.fit.refine.refine makes the latency of the samples' median."""
        n, count = self.ctx.world_size, 2 * (self.ctx.world_size - 1) * len(buckets)
        if buckets and (step >= FIRST_STEADY or self.ctx.params.steps == 1):
            nbytes = sum(int(a.bytes or 0) for a, _ in buckets) // n
            self.p2p.append((nbytes * 2 * (n - 1) // count, sum(s for _, s in buckets) / count))

    def run(self, actions: list[Action], data: tuple[torch.Tensor, torch.Tensor], poison: bool):
        ctx, trainer = self.ctx, self.trainer
        by_kind: dict[str, list[Action]] = defaultdict(list)
        for action in actions:
            by_kind[action.kind].append(action)
        step = actions[0].step or 0
        f = by_kind["F"][0]
        start, cpu = time.perf_counter_ns(), cpu_clock()
        trainer.forward(*data, poison)
        self.cost(f.cost_key, cpu_clock() - cpu, step)
        ctx.record(f, start, time.perf_counter_ns())
        start, cpu = time.perf_counter_ns(), cpu_clock()
        trainer.backward()
        back_cpu, back_end = cpu_clock() - cpu, time.perf_counter_ns()
        trainer.wait()
        waited = time.perf_counter_ns()
        clock = trainer.clock
        ready = clock.ready_ns
        # Each part of backward ends when its last gradient is ready, and the buckets it
        # completes are launched (the hand-written DDP flattens a bucket then: work of
        # backward's hooks, as torch's Reducer copies each gradient into its bucket).
        part_end: dict[int, int] = {}
        for index, at in ready.items():
            part = self.part_of[index]
            part_end[part] = max(part_end.get(part, 0), at)
        part = None
        for action in actions:
            if action.kind == "B":
                part = action.arg("part")
            elif action.kind == "all_reduce" and part is not None:
                launched = clock.launched_ns.get(action.chunk or 0, 0)
                part_end[part] = max(part_end.get(part, 0), launched)
        last = start
        wall = []
        parts = sorted(by_kind["B"], key=lambda a: a.arg("part"))
        for action in parts:
            end = max(last, min(part_end.get(action.arg("part"), back_end), back_end))
            wall.append((action, last, end))
            last = end
        total = sum(end - begin for _, begin, end in wall) or 1
        for action, begin, end in wall:
            ctx.record(action, begin, end)
            self.cost(action.cost_key, back_cpu * (end - begin) / total, step)
        stream = 0  # when this rank's previous bucket ended (they run one after another)
        served: list[tuple[Action, float]] = []
        for action in sorted(by_kind["all_reduce"], key=lambda a: a.chunk or 0):
            j = action.chunk or 0
            launched, ended = clock.launched_ns.get(j, last), clock.ended_ns.get(j, waited)
            ctx.record(action, launched, ended)
            served.append((action, (ended - max(launched, stream)) / 1e9))
            stream = ended
        self.messages(served, step)
        ctx.record(by_kind["wait"][0], last, max(last, waited))
        for kind, run in (("compute", trainer.unscale), ("opt", None)):
            for action in by_kind[kind]:
                start, cpu = time.perf_counter_ns(), cpu_clock()
                if run is not None:
                    run()
                else:
                    trainer.step(ctx.now())
                self.cost(action.cost_key, cpu_clock() - cpu, step)
                ctx.record(action, start, time.perf_counter_ns())


def run_rank(ctx: Context) -> MixedResult:
    params = ctx.params
    cfg = GPTConfig.from_shape(params.model)
    rank, world = ctx.rank, ctx.world_size
    batches = [batch(cfg, params.microbatch * world, seed=1 + k) for k in range(params.steps)]
    mine = [(x.chunk(world)[rank], y.chunk(world)[rank]) for x, y in batches]
    measured_underflow = underflow(cfg, *mine[0])
    overflow = {f.step for f in ctx.faults if f.kind == "overflow" and f.rank == rank}
    by_series: dict[str, Variant] = {v.series: v for v in variants(params)}
    costs: dict[str, list[float]] = defaultdict(list)
    results: dict[str, SeriesResult] = {}
    hand_grads: dict[str, list[torch.Tensor | None]] = {}
    grad_diff: dict[str, float] = {}
    p2p: list[tuple[int, float]] = []

    # What the first trainer pays once (its lazy imports), paid before the clock.
    SeriesTrainer(cfg, Variant("warm-up", "fp16", "hand"), params.bucket_cap, 0, 1)
    ctx.start_clock()
    for series, group in groupby(ctx.actions, key=lambda a: a.series):
        assert series is not None, "every Action of the mixed-precision lesson has a series"
        v = by_series[series]
        actions = list(group)
        barrier = [a for a in actions if a.kind == "barrier"]
        ctx.execute(barrier, lambda _a: dist.barrier())
        trainer = SeriesTrainer(cfg, v, params.bucket_cap, params.first_bucket_cap,
                                params.growth_interval)  # fmt: skip
        runner = StepRunner(ctx, trainer, costs)
        steps = [a for a in actions if a.kind != "barrier"]
        for step, acts in groupby(steps, key=lambda a: a.step):
            assert step is not None
            runner.run(list(acts), mine[step - 1], step in overflow)
        p2p += runner.p2p
        trace = trainer.trace
        if v.implementation == "hand":
            hand_grads[v.precision] = trace.grads
        elif v.precision in hand_grads:
            grad_diff[v.precision] = max_diff(hand_grads[v.precision], trace.grads)
        ddp = trainer.ddp
        results[series] = SeriesResult(
            losses=trace.losses,
            scale_trace=trace.scale,
            skipped=trace.skipped,
            torch_scale_trace=trace.torch_scale,
            torch_skipped=trace.torch_skipped,
            first_buckets=getattr(ddp, "first_buckets", None) or (ddp.seen[0] if ddp.seen else []),
            buckets=ddp.bucket_sizes() if v.implementation == "hand" else ddp.seen[-1],
            logged_buckets=[] if v.implementation == "hand" else ddp.logged_buckets(),
            memory=trainer.memory(),
            events=trace.events,
        )
        trace.grads = []
    return MixedResult(
        series=results,
        grad_diff_vs_torch=grad_diff,
        underflow=measured_underflow,
        compute_costs={key: statistics.median(values) for key, values in costs.items()},
        p2p=p2p,
    )


def max_diff(a: list[torch.Tensor | None], b: list[torch.Tensor | None]) -> float:
    """Largest |a − b| over the steps both took (a skipped step's gradients hold an inf)."""
    diffs = [float((x - y).abs().max()) for x, y in zip(a, b, strict=True)
             if x is not None and y is not None]  # fmt: skip
    return max(diffs, default=0.0)
