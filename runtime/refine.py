"""The cost model after a run: what the ranks measured, folded back into the prediction.

Where it sits (DESIGN.md): runtime's pure part, between a finished run and the
prediction shown beside it (the caller hands it the Program, the measured and
the predicted Timeline; a lesson's own measured costs come through `refine`).
Each function takes the CostModel the run was predicted with and returns it with
one kind of figure as the run had it:

- `refine`: compute costs (and a point-to-point latency) the ranks measured
  themselves, the median across ranks;
- `refine_collectives`: each collective kind scaled as its instances took;
- `refine_p2p`: the latency of a pipeline's messages and a send's issue time;
- `refine_compute`: each compute cost scaled so its simulated spans add up to
  the measured ones (the cores shared less ideally than the simulator assumes).

What is left of the error after these is the simulator's: the order of the
actions, the waits and the overlap. The timeline drawn beside the run replays
the refined model (runtime.replay). Pure: stdlib only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runtime.costmodel import SEND_ISSUE, CostModel, scale_key, series_scale_key, sized_key
from runtime.program import Action, Program
from runtime.trace import Timeline


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
    """
    samples: dict[str, list[float]] = {}
    for costs in per_rank:
        for key, seconds in costs.items():
            samples.setdefault(key, []).append(float(seconds))
    if not samples and not p2p:
        return model
    alpha = model.alpha
    if p2p:
        alpha = max(0.0, statistics.median(s - nbytes * model.beta for nbytes, s in p2p))
    return replace(
        model,
        alpha=alpha,
        compute={**model.compute, **{k: statistics.median(v) for k, v in samples.items()}},
        source=f"{model.source}; {what} measured in this run",
    )


def _took(members: list[tuple[Action, Any]], by_last: bool) -> float:
    """How long one collective instance took. Each member's span is the collective plus
    its wait for the last to arrive; the median over members leaves most of that wait
    out, as the simulator (which adds the skew it predicts itself) wants. `by_last`:
    from the last member's arrival to the last member's end, for a lesson whose step is
    a chain of collectives: the simulator ends every member when the last arrives plus
    the collective's time, and the next link of the chain waits for the last finisher.
    On zero's stages (8 runs, each replayed both ways) this came out closer than the
    mean over members on every stage (median after-run error ddp 2.4 against 5.9%,
    zero3 4.7 against 7.6%), and on tensor-parallel's hand series 2.4 against 2.8%."""
    if by_last:
        return max(span.end for _, span in members) - max(span.start for _, span in members)
    return statistics.median(span.end - span.start for _, span in members)


def refine_collectives(
    model: CostModel,
    program: Program,
    measured: Timeline,
    predicted: Timeline | None = None,
    *,
    chained: bool = False,
) -> CostModel:
    """The model after a run, its collectives scaled as the run timed them.

    For every collective instance of the Program (barriers aside: they only wait), the
    run's time is the median over its members of each one's span, arrival to end: on a
    machine whose ranks share cores, a member descheduled mid-collective holds up every
    step of the ring, and that wait belongs to the collective as the ranks pay it (the
    simulator adds only the skew it predicts itself, which is small between ranks that
    compute alike). With `predicted` (the same Program simulated before this refinement),
    the wait the model already predicts for an instance (its predicted span beyond the
    collective's own time, e.g. behind a rank slowed on purpose) is taken off the
    measured span, so it is not counted twice. Each kind is also scaled per message size
    (`<kind>@<bytes>/<ranks>`), which a prediction of the same Program prefers. Torch's own
    blocking collectives
    (`builtin`: a TP layer's all-reduce) are scaled apart from the hand-made ones, as
    `builtin.<kind>`; a series' non-blocking ones (DDP buckets, whose spans run from
    their launch) by their time once they could start (`_async_ratios`); one whose work
    a run times inside another span (`untimed`: torch DDP's all-reduce inside B) costs
    nothing after the run. The scale of a kind is the median over its
    instances of measured / formula, bounded to [0.2, 20]; the median, as in `refine`:
    one instance disturbed by the machine does not move it. The steps of a collective
    the Program spells out itself (a ring's sendrecvs) get a scale `sendrecv`: the
    median over iterations of their measured extent over the predicted one. `chained`:
    for a lesson whose step is a chain of collectives, each instance from its last
    member's arrival to its last member's end (`_took`; no predicted wait to take off,
    the arrivals' skew is already out), and the mean over instances instead of their
    median (their time on shared cores is heavy-tailed: the median instance
    under-predicts their sum).
    """
    forecast = predicted.by_action() if predicted is not None else {}
    spans = measured.by_action()
    instances: dict[tuple, list[tuple[Action, Any]]] = {}
    untimed: set[str] = set()
    for action in program.actions():
        if not action.is_collective or action.kind == "barrier" or action.id not in spans:
            continue
        if action.arg("untimed", False):
            # It stands for work done inside another span, which the run timed: the
            # collective costs nothing of its own after it (CostModel.collective_time).
            untimed.add(series_scale_key(action, "untimed"))
            continue
        if action.nonblocking:
            continue  # a DDP bucket: _async_ratios
        key = (action.kind, action.series, action.step, action.stage, action.chunk,
               action.microbatch, action.label, action.bytes, action.group)  # fmt: skip
        instances.setdefault(key, []).append((action, spans[action.id]))
    ratios: dict[str, list[float]] = {}
    for members in instances.values():
        action = members[0][0]
        if len(members) != len(action.group or ()):
            continue  # not every member finished it (a failed attempt)
        formula = model.collective_formula(action)
        took = _took(members, chained)
        foreseen = [forecast[a.id] for a, _ in members if a.id in forecast]
        if not chained and len(foreseen) == len(members):
            own = model.collective_time(action)
            took -= max(0.0, statistics.median(s.end - s.start for s in foreseen) - own)
        if formula > 0 and took > 0:
            kind = scale_key(action)
            ratios.setdefault(kind, []).append(took / formula)
            # ... and per size: the formula's α and β miss differently at each size (a
            # small all-gather pays wake-ups a large one hides), so each size the run
            # timed keeps its own scale (CostModel.collective_time prefers it).
            ratios.setdefault(sized_key(kind, action), []).append(took / formula)
    # The steps of a collective the Program spells out (a ring's sendrecvs): per
    # iteration, from the first rank's first step to the last rank's last one (the gaps
    # between steps and the ranks' skew leaving the barrier before are the collective's
    # too), measured over predicted, on top of the scale already used.
    extents: dict[tuple, list[float]] = {}
    for a in program.actions():
        if a.kind == "sendrecv" and a.id in spans and a.id in forecast:
            m, p = spans[a.id], forecast[a.id]
            box = extents.setdefault((a.series, a.step), [m.start, m.end, p.start, p.end])
            box[:] = [min(box[0], m.start), max(box[1], m.end), min(box[2], p.start),
                      max(box[3], p.end)]  # fmt: skip
    ratios |= _async_ratios(model, program, spans)
    steps = [(b[1] - b[0]) / (b[3] - b[2]) for b in extents.values() if b[3] > b[2] and b[1] > b[0]]
    if steps:
        ratios["sendrecv"] = [
            model.collective_scale.get("sendrecv", 1.0) * statistics.median(steps)
        ]
    if not ratios and not untimed:
        return model
    center = statistics.fmean if chained else statistics.median
    scale = {k: min(20.0, max(0.2, center(v))) for k, v in ratios.items()}
    scale |= dict.fromkeys(untimed, 0.0)
    said = ", ".join(f"{k} ×{v:.2f}" for k, v in sorted(scale.items()) if "@" not in k)
    sizes = sum("@" in k for k in scale)
    said += f"; {sizes} sizes apart" if sizes else ""
    return replace(
        model,
        collective_scale={**model.collective_scale, **scale},
        source=f"{model.source}; collectives as measured ({said})",
    )


def _async_ratios(
    model: CostModel, program: Program, spans: Mapping[str, Any]
) -> dict[str, list[float]]:
    """Per series, each non-blocking collective instance (a DDP bucket's all-reduce) as
    the run timed it, over its formula time: from when it could start, as the simulator
    starts it (every member had launched it and each member's previous one had ended:
    they run one after another), to the members' median end. One latency for every
    series misses them apart: fp32's buckets ran 30% faster than fp16's of the same bytes
    while backward ran, and its after-run step came out 24-30% long."""
    free: dict[int, float] = {}  # each rank's stream: when its last one ended
    instances: dict[tuple, list[tuple[Action, float, float]]] = {}
    for action in program.actions():  # rank by rank, each in program order
        if not action.nonblocking or action.id not in spans:
            continue
        span = spans[action.id]
        key = (action.series, action.step, action.kind, action.chunk, action.bytes, action.group)
        start = max(span.start, free.get(action.rank, span.start))
        instances.setdefault(key, []).append((action, start, span.end))
        free[action.rank] = span.end
    sums: dict[tuple[str, int | None], list[float]] = {}
    for members in instances.values():
        action = members[0][0]
        if len(members) != len(action.group or ()):
            continue
        took = statistics.median(end for _, _, end in members) - max(s for _, s, _ in members)
        box = sums.setdefault((series_scale_key(action), action.step), [0.0, 0.0])
        box[0] += max(0.0, took)
        box[1] += model.collective_formula(action)
    # Per step, the sum over its buckets, not each one's ratio: a rank learns that a
    # bucket ended when it next polls, so the time splits unevenly between a step's
    # buckets, and their sum is what the step pays; the median over steps then.
    ratios: dict[str, list[float]] = {}
    for (key, _), (took, formula) in sums.items():
        if took > 0 < formula:
            ratios.setdefault(key, []).append(took / formula)
    return ratios


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
    scale = {
        key: ratio
        for key, ratio in compute_scales(program, measured, predicted, by_key, warmup_steps).items()
        if key in model.compute
    }
    if not scale:
        return model
    spread = f"×{min(scale.values()):.2f}–{max(scale.values()):.2f}"
    return replace(
        model,
        compute={**model.compute, **{k: model.compute[k] * v for k, v in scale.items()}},
        source=f"{model.source}; compute as its spans measured ({spread})",
    )


def by_key(action: Action) -> str:
    """The compute-table key an Action is costed by (runtime.costmodel.compute_time)."""
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
        if action.step is not None and action.step < warmup_steps:
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
    receiver waking); alpha becomes the median over those messages of that time less
    bytes·beta, never below zero. A latency timed apart before the run (a quiet ping-pong)
    misses what busy neighbours add. A non-blocking send's own span, the time it held
    its sender, becomes SEND_ISSUE (the mean). With fewer than three messages of a
    kind the model keeps that figure: too few to say.
    """
    spans = measured.by_action()
    sends: dict[tuple, list[Action]] = {}
    recvs: dict[tuple, list[Action]] = {}
    for action in program.actions():
        if action.kind == "send" and action.dst is not None:
            sends.setdefault((action.rank, action.dst, action.arg("tag", 0)), []).append(action)
        elif action.kind == "recv" and action.src is not None:
            recvs.setdefault((action.src, action.rank, action.arg("tag", 0)), []).append(action)
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
        if a.arg("nonblocking", False) and a.id in spans
    ]
    if len(latencies) < 3 and len(issues) < 3:
        return model
    alpha = max(0.0, statistics.median(latencies)) if len(latencies) >= 3 else model.alpha
    # The mean, not the median: a sender descheduled mid-issue holds up its stage
    # for all that time, and the makespan pays the sum.
    issue = statistics.fmean(issues) if len(issues) >= 3 else model.compute.get(SEND_ISSUE, 0.0)
    return replace(
        model,
        alpha=alpha,
        compute={**model.compute, SEND_ISSUE: issue},
        source=f"{model.source}; p2p as its messages measured (latency {alpha * 1e6:.0f} µs, "
        f"a send's issue {issue * 1e6:.0f} µs)",
    )
