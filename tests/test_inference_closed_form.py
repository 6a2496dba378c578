"""The scheduler's lumped runs against its step-by-step loop, the reference.

scenarios.inference.serve (with scheduler.Engine) lumps a run of alike decode
iterations (the same sequences, each one position further, until a sequence is done, a
request arrives or the static batch ends) into one record: the KV pool moved in one go
(BlockManager.decode), each iteration's seconds from StageCost.decode, the tokens,
KV occupancy and latencies summed in closed form. `plan(..., lump=False)` is the
step-by-step loop; on every configuration below the lumped plan must give back its
very iterations (every piece, block table, KV count and stage time, in its order)
and the same readings (latencies, occupancy, concurrency, the drawn stage times).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.sim.profiles import PROFILES
from scenarios.inference.latency import clocked, occupancy, served
from scenarios.inference.plan import Plan, Serving, plan
from scenarios.inference.report import peak_concurrency
from scenarios.inference.stepmodel import Device, Shape, planning_device
from scenarios.inference.trace import TraceSpec, make_trace

SMALL = Shape(layers=2, hidden=64, heads=4, kv_heads=4, head_dim=16, vocab=64, seq=256)
LLAMA = Shape(
    layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, vocab=32000, seq=4096,
    dtype_bytes=2,
)  # fmt: skip
DEVICES = {
    "planning": (SMALL, planning_device()),
    "h100": (LLAMA, Device.of(PROFILES["h100-nvlink"])),
}
LAYOUTS = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 3, 1), (1, 1, 3), (2, 1, 4)]


def both(shape: Shape, device: Device, serving: Serving, spec: TraceSpec):
    """The lumped plan and the step-by-step one (or the error both raise)."""
    requests = make_trace(spec)
    out = []
    for lump in (True, False):
        try:
            out.append(plan(shape, device, serving, requests, lump=lump))
        except ValueError as exc:
            out.append(str(exc))
    return out


def check_same(lumped: Plan | str, reference: Plan | str) -> None:
    if isinstance(reference, str) or isinstance(lumped, str):
        assert lumped == reference
        return
    iterations = reference.runs  # the reference makes every iteration a record
    assert all(it.repeat == 1 for it in iterations)
    assert lumped.iterations == iterations
    assert lumped.batch_bound == reference.batch_bound
    ends = [it.end for it in iterations]
    assert clocked(lumped) == served(reference, ends, [0.0] * len(ends))
    assert occupancy(lumped) == occupancy(reference)
    assert peak_concurrency(lumped) == peak_concurrency(reference)
    assert [stages for _, stages in lumped.timed()] == [it.stages for it in iterations]
    assert lumped.end == max(ends, default=0.0)
    assert sum(it.repeat for it in lumped.runs) == len(iterations)


SCHEDULES = [
    (layout, batching, router)
    for layout in LAYOUTS
    for batching, router in [
        ("continuous", "round-robin"),
        ("static", "round-robin"),
        ("continuous", "least-outstanding"),
        ("continuous", "prefix-affinity"),
    ]
    if router == "round-robin" or layout[2] > 1  # a router picks among replicas
]


@pytest.mark.parametrize("where", DEVICES)
@pytest.mark.parametrize(("layout", "batching", "router"), SCHEDULES, ids=str)
@pytest.mark.parametrize(
    ("rate", "lengths", "prefixes", "blocks"),
    [
        (4.0, "uniform", 0, 400),  # light load: long runs, an engine idle between requests
        (1e4, "exponential", 0, 400),  # a burst: full batches, a slot freed and retaken
        (300.0, "uniform", 3, 40),  # shared prefixes and a pool that keeps requests waiting
        (1e4, "fixed", 2, 14),  # a full pool: cached prefix blocks evicted as decodes grow
    ],
)
def test_the_lumped_plan_is_the_step_by_step_plan(
    where, layout, batching, router, rate, lengths, prefixes, blocks
):
    tp, pp, replicas = layout
    shape, device = DEVICES[where]
    serving = Serving(tp, pp, replicas, batching, router, 4, 8, blocks)
    spec = TraceSpec(30, rate, 12, 16, lengths, prefixes, 16, 64, seed=7)
    check_same(*both(shape, device, serving, spec))


@settings(max_examples=40, deadline=None)
@given(
    where=st.sampled_from(sorted(DEVICES)),
    layout=st.sampled_from(LAYOUTS),
    batching=st.sampled_from(["continuous", "static"]),
    router=st.sampled_from(["round-robin", "least-outstanding", "prefix-affinity"]),
    max_batch=st.integers(1, 16),
    kv_block=st.sampled_from([1, 4, 8, 16]),
    blocks=st.integers(8, 600),
    requests=st.integers(1, 40),
    rate=st.sampled_from([0.5, 20.0, 500.0, 1e6]),
    prompt=st.integers(1, 40),
    output=st.integers(1, 60),
    lengths=st.sampled_from(["fixed", "uniform", "exponential"]),
    prefixes=st.integers(0, 4),
    seed=st.integers(0, 1000),
)
def test_the_lumped_plan_is_the_step_by_step_plan_anywhere(
    where, layout, batching, router, max_batch, kv_block, blocks, requests, rate, prompt,
    output, lengths, prefixes, seed,
):  # fmt: skip
    tp, pp, replicas = layout
    shape, device = DEVICES[where]
    serving = Serving(tp, pp, replicas, batching, router, max_batch, kv_block, blocks)
    spec = TraceSpec(requests, rate, prompt, output, lengths, prefixes, 8, 64, seed)
    check_same(*both(shape, device, serving, spec))


def test_a_light_load_is_a_few_records_per_request():
    """Lumping is what makes predict cheap: at a light load each request adds a few
    records (its prefill, and the runs its arrival and its end cut), however long its
    output."""
    spec = TraceSpec(50, 2.0, 12, 200, "uniform", seed=1)
    shape, device = DEVICES["h100"]
    lumped, reference = both(shape, device, Serving(kv_blocks=4000), spec)
    check_same(lumped, reference)
    assert len(lumped.runs) < 4 * spec.requests
    assert 10 * len(lumped.runs) < len(reference.runs)


@pytest.mark.parametrize("batching", ["continuous", "static"])
def test_a_batch_cap_that_never_bound_plans_as_any_larger_one(batching):
    """The config search reads a larger max_batch off a plan whose cap never kept a
    waiting request out (scenarios.inference.search): the iterations are the same."""
    shape, device = DEVICES["h100"]
    light = TraceSpec(40, 1.0, 12, 16, seed=2)
    small, large = (
        plan(shape, device, Serving(batching=batching, max_batch=b), make_trace(light))
        for b in (2, 128)
    )
    assert not small.batch_bound and small.iterations == large.iterations
    burst = TraceSpec(40, 1e5, 12, 16, seed=2)
    capped = plan(shape, device, Serving(batching=batching, max_batch=2), make_trace(burst))
    assert capped.batch_bound


@pytest.mark.parametrize("router", ["least-outstanding", "prefix-affinity"])
def test_least_outstanding_counts_what_was_answered_by_each_arrival(router):
    """The routers' load (the scheduler's running count, a heap of answers) against a
    count made from the plan itself: at each arrival, per replica, the requests sent
    there minus those whose last token came by then; least-outstanding takes the
    fewest (ties: the lowest index), and prefix-affinity does for unseen prompts."""
    shape, device = DEVICES["planning"]
    spec = TraceSpec(60, 40.0, 12, 16, "exponential", prefixes=0, seed=5)
    requests = make_trace(spec)
    planned = plan(shape, device, Serving(replicas=4, router=router, kv_blocks=400), requests)
    engine, done = {}, {}
    for it in planned.iterations:
        for piece in it.pieces:
            engine[piece.request] = it.engine
            if piece.done:
                done[piece.request] = it.end
    for n, request in enumerate(requests):
        load = [0] * 4
        for earlier in requests[:n]:
            if done[earlier.id] > request.arrival:
                load[engine[earlier.id]] += 1
        assert engine[request.id] == min(range(4), key=lambda e: (load[e], e))
