"""The cost model after a run: what the ranks measured, folded back into the prediction.

Where it sits (docs/design.md): runtime's pure part, between a finished run and the
prediction shown beside it (the caller hands it the Program, the measured and
the predicted Timeline; a lesson's own measured costs come through `refine`).
Each function takes the CostModel the run was predicted with and returns it with
one kind of figure as the run had it:

- `refine`: compute costs (and a point-to-point latency) the ranks measured
  themselves, the median across ranks;
- `refine_collectives` (runtime.fit.refine_collectives): each collective kind scaled
  as its instances took;
- `refine_p2p`: the latency of a pipeline's messages and a send's issue time;
- `refine_compute`: each compute cost scaled so its simulated spans add up to
  the measured ones (the cores shared less ideally than the simulator assumes);
- `refine_dispatch`: what a rank spends between two actions, which no span covers.

What is left of the error after these is the simulator's: the order of the
actions, the waits and the overlap. The timeline drawn beside the run replays
the refined model (runtime.fit.replay). Pure: stdlib only.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace

from runtime.sim.costmodel import CostModel
from runtime.sim.program import Action, Program, past_warmup
from runtime.sim.trace import Span, Timeline


def refine(
    model: CostModel,
    per_rank: Sequence[Mapping[str, float]],
    *,
    what: str,
    p2p: Sequence[tuple[int, float]] = (),
) -> CostModel:
    """The cost model after a run: compute costs (and a point-to-point latency) as the
    ranks measured them. The one way every lesson refines its prediction.

    - `per_rank`: each rank's measured seconds per cost key, each already the median
      of that rank's own repetitions. Combined across ranks by the **median**: when
      four ranks share two cores, one rank descheduled while it timed is an outlier
      that would pull a mean, and the median ignores it; a key only one rank measures
      (a pipeline stage) keeps that rank's value.
    - `p2p`: (bytes, one-way seconds) of messages the ranks timed between neighbours;
      alpha becomes the median of seconds − bytes·beta (never below zero), the
      latency a lesson's own messages see rather than the ring calibration's.
    - `what` says in `source` which costs the run measured.

    What a compute pays after a wait (Corrections.wake) becomes 0: the compute the ranks
    measured in the run holds the wake-ups it paid.
    """
    samples: dict[str, list[float]] = {}
    for costs in per_rank:
        for key, seconds in costs.items():
            samples.setdefault(key, []).append(float(seconds))
    if not samples and not p2p:
        return model.corrected(wake=0.0) if model.corrections.wake else model
    alpha = model.alpha
    if p2p:
        alpha = max(0.0, statistics.median(s - nbytes * model.beta for nbytes, s in p2p))
    return replace(
        model.corrected(wake=0.0),
        alpha=alpha,
        compute={**model.compute, **{k: statistics.median(v) for k, v in samples.items()}},
        source=f"{model.source}; {what} measured in this run",
    )


def refine_compute(
    model: CostModel,
    program: Program,
    measured: Timeline,
    predicted: Timeline,
    warmup_steps: int = 0,
) -> CostModel:
    """The model after a run, each compute cost scaled so that its actions' simulated
    spans add up to what the run's spans did.

    A rank measures its compute in CPU seconds (what a core spends: the portable part),
    and the simulator shares the cores among the ranks computing at once. On a machine
    with fewer cores than ranks that sharing is not ideal: context switches, cold caches
    and the other processes (the parent that draws the run) cost every rank more wall
    time than its share says, and the first action after a wait runs on cold caches.
    `predicted` is the Program simulated with the costs so far; per cost key, the sum of
    the measured spans over the sum of the predicted ones (both over every rank and
    step: the sum is what a makespan pays) scales that cost, bounded to [0.25, 4] so a
    run disturbed by the machine cannot throw the model far. What is left of the error
    after this is the simulator's: the order of the actions, the waits, the overlap. A
    slowed run (--fault slow) keeps its costs: its peers' waits would be read as compute.
    The first `warmup_steps` steps are left out, when the lesson's times leave them out.
    """
    if model.slow:
        # A rank slowed on purpose makes its peers wait, and inside torch's own compute
        # (FSDP2's forward runs its all-gathers) that wait would pass for compute.
        return model
    scaled, spread = scale_compute(model, program, measured, predicted, warmup_steps)
    if spread is None:
        return model
    return replace(scaled, source=f"{model.source}; compute as its spans measured ({spread})")


def scale_compute(
    model: CostModel,
    program: Program,
    measured: Timeline,
    predicted: Timeline,
    warmup_steps: int = 0,
) -> tuple[CostModel, str | None]:
    """refine_compute's scaling, its `source` left as it was (a caller that scales again,
    runtime.fit.replay, says so once in its own words), and the spread of the scales
    ("×0.62–0.84"; None: nothing to scale)."""
    scale = {
        key: ratio
        for key, ratio in compute_scales(program, measured, predicted, by_key, warmup_steps).items()
        if key in model.compute
    }
    if not scale:
        return model, None
    spread = f"×{min(scale.values()):.2f}–{max(scale.values()):.2f}"
    compute = {**model.compute, **{k: model.compute[k] * v for k, v in scale.items()}}
    return replace(model, compute=compute), spread


def by_key(action: Action) -> str:
    """The compute-table key an Action is costed by (runtime.sim.costmodel.compute_time)."""
    return action.cost_key or action.kind


def compute_scales(
    program: Program,
    measured: Timeline,
    predicted: Timeline,
    group: Callable[[Action], Hashable | None],
    warmup_steps: int = 0,
) -> dict[Hashable, float]:
    """Per group of compute Actions (`group(action)`; None leaves one out): the sum of
    their measured spans over the sum of their predicted ones (the sum is what a
    makespan pays), bounded to [0.25, 4] so a run disturbed by the machine cannot throw
    the model far. Groups with nothing timed are absent. Actions of the first
    `warmup_steps` steps are left out (a lesson that times its steady steps only)."""
    forecast = predicted.by_action()
    spans = measured.by_action()
    sums: dict[Hashable, list[float]] = {}
    for action in program.actions():
        if not action.is_compute or action.id not in spans or action.id not in forecast:
            continue
        if not past_warmup(action.step, warmup_steps):
            continue
        name = group(action)
        if name is None:
            continue
        m, p = spans[action.id], forecast[action.id]
        box = sums.setdefault(name, [0.0, 0.0])
        box[0] += m.end - m.start
        box[1] += p.end - p.start
    return {
        name: min(4.0, max(0.25, took / planned))
        for name, (took, planned) in sums.items()
        if took > 0 and planned > 0
    }


def refine_p2p(model: CostModel, program: Program, measured: Timeline) -> CostModel:
    """The model after a run, its point-to-point latency as the run's own messages had
    it: a pipeline's activations between ranks that share the cores with compute.

    The k-th send on a channel (src, dst, tag) is the k-th receive's message. Where the
    receiver was already waiting when the send began, the message's time shows whole:
    from the send's start to the receive's end (the sender's issue, the wire, the
    receiver waking); alpha becomes the mean over those messages of that time less
    bytes·beta, never below zero. A latency timed apart before the run (a quiet ping-pong)
    misses what busy neighbours add. The mean, not the median: on shared cores a message
    now and then waits for a descheduled peer, and the stage behind it pays that wait. A
    non-blocking send's own span, the time it held its sender, becomes
    Corrections.send_issue (the mean too). With fewer than three messages of a kind the
    model keeps that figure: too few to say.
    """
    spans = measured.by_action()
    sends: dict[tuple, list[Action]] = {}
    recvs: dict[tuple, list[Action]] = {}
    for action in program.actions():
        if action.kind == "send" and action.dst is not None:
            sends.setdefault((action.rank, action.dst, action.tag), []).append(action)
        elif action.kind == "recv" and action.src is not None:
            recvs.setdefault((action.src, action.rank, action.tag), []).append(action)
    latencies = []
    for channel, out in sends.items():
        for send, recv in zip(out, recvs.get(channel, []), strict=False):
            if send.id not in spans or recv.id not in spans or recv.reduce:
                continue  # (a reducing receive, a tree's, also adds what came: no latency)
            sent, got = spans[send.id], spans[recv.id]
            if got.start <= sent.start < got.end:
                _, beta = model.link(send.rank, recv.rank)
                latencies.append(got.end - sent.start - send.bytes * beta)
    issues = [
        spans[a.id].end - spans[a.id].start
        for out in sends.values()
        for a in out
        if a.effects.nonblocking and a.id in spans
    ]
    if len(latencies) < 3 and len(issues) < 3:
        return model
    alpha = max(0.0, statistics.fmean(latencies)) if len(latencies) >= 3 else model.alpha
    # The mean here too: a sender descheduled mid-issue holds up its stage for all
    # that time, and the makespan pays the sum.
    issue = model.corrections.send_issue or 0.0
    if len(issues) >= 3:
        issue = statistics.fmean(issues)
    return replace(
        model.corrected(send_issue=issue),
        alpha=alpha,
        source=f"{model.source}; p2p as its messages measured (latency {alpha * 1e6:.0f} µs, "
        f"a send's issue {issue * 1e6:.0f} µs)",
    )


def refine_dispatch(
    model: CostModel, program: Program, measured: Timeline, warmup_steps: int = 0
) -> CostModel:
    """The model after a run, with the seconds a rank spent between two of its actions
    (Corrections.dispatch, and series_dispatch per series): the mean, over every rank,
    of the gap from one action's span to the next one's in that series. The mean, since
    a queue of requests pays their sum.

    Each span covers its action alone; the rank's executor reads the next action,
    records the span and runs the Python between two calls outside them. A lesson whose
    step is many small actions (inference's TP decode) pays that gap on every one, and
    every request queued behind them. Per series, since series differ (mixed
    precision's fp16 steps add casts and scaler bookkeeping to fp32's). Two kinds of
    pair are no measure of it: a non-blocking launch's span runs until its collective
    ends, long after the rank went on; and after a barrier, the rank sets its series up
    (mixed precision builds its trainer there), which no step pays. A rank slowed on
    purpose (the `slow` fault) sleeps inside its spans (runtime.engine.worker), so its
    gaps are the same. Each rank's lag leaving a barrier comes with them (exit_lags)."""
    spans = measured.by_action()
    gaps: dict[str | None, list[float]] = {}
    for actions in program.ranks:
        for before, after in itertools.pairwise(actions):
            if (
                before.series == after.series
                and not before.nonblocking
                and before.kind != "barrier"
                and before.id in spans
                and after.id in spans
                and past_warmup(after.step, warmup_steps)
            ):
                gap = max(0.0, spans[after.id].start - spans[before.id].end)
                gaps.setdefault(before.series, []).append(gap)
    means = {series: statistics.fmean(g) for series, g in gaps.items() if len(g) >= 3}
    lags = exit_lags(program, spans, warmup_steps)
    if not means and not lags:
        return model
    said = ", ".join(f"{series or 'all'} {gap * 1e6:.0f} µs" for series, gap in means.items())
    if lags:
        said += f"; leaving a barrier, up to {max(lags.values()) * 1e6:.0f} µs after the first"
    corrections = model.corrections
    own = {series: gap for series, gap in means.items() if series is not None}
    return replace(
        model.corrected(
            dispatch=means.get(None, corrections.dispatch),
            series_dispatch={**corrections.series_dispatch, **own},
            exit_lag={**corrections.exit_lag, **lags},
        ),
        source=f"{model.source}; between two actions, as measured: {said}",
    )


def exit_lags(
    program: Program, spans: Mapping[str, Span], warmup_steps: int = 0
) -> dict[tuple[str | None, int], float]:
    """Per (series, rank), how long after the barrier's first member the rank left it
    over the run's barriers, with the spread a barrier had kept (`_ordered_lags`;
    Corrections.exit_lag); none where every lag is 0 (one rank). The simulator releases
    a barrier's members together; gloo lets them go one message after another, in no
    fixed order, and a ring started right after waits for the last one. The instances
    of a barrier pair as every collective's do: the k-th barrier of a group on each
    member. A barrier some member did not finish (a failed attempt) is left out."""
    exits: dict[tuple[tuple[int, ...], int], tuple[Action, dict[int, float]]] = {}
    for actions in program.ranks:
        seen: dict[tuple[int, ...], int] = {}  # barriers of each group so far, on this rank
        for action in actions:
            if action.kind != "barrier":
                continue
            group = action.group or ()
            k = seen[group] = seen.get(group, -1) + 1
            if action.id in spans and past_warmup(action.step, warmup_steps):
                exits.setdefault((group, k), (action, {}))[1][action.rank] = spans[action.id].end
    lags: dict[str | None, dict[int, list[float]]] = {}
    for action, ends in exits.values():
        if len(ends) != len(action.group or ()):
            continue
        first = min(ends.values())
        for rank, end in ends.items():
            lags.setdefault(action.series or None, {}).setdefault(rank, []).append(end - first)
    out = {
        (series, rank): lag
        for series, per_rank in lags.items()
        for rank, lag in _ordered_lags(per_rank).items()
    }
    return out if any(out.values()) else {}


def _ordered_lags(per_rank: dict[int, list[float]]) -> dict[int, float]:
    """Each rank's lag: the mean, over the barriers, of the k-th smallest lag, for the
    rank whose own mean lag is the k-th smallest. The members leave in no fixed order,
    so each rank's own mean lag is about the same, and averaging them would shrink
    their spread (what a ring started after the barrier waits for: its last starter);
    the mean order statistics keep that spread, and the same total."""
    count = min(map(len, per_rank.values()))
    ranks = sorted(per_rank, key=lambda r: (statistics.fmean(per_rank[r]), r))
    instances = [sorted(lags[i] for lags in per_rank.values()) for i in range(count)]
    return {rank: statistics.fmean(lags[k] for lags in instances) for k, rank in enumerate(ranks)}
