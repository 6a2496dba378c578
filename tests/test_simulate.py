"""The simulator against the alpha-beta formulas of docs/references.md, and its deadlock report."""

from __future__ import annotations

import math

import pytest

from runtime.engine import collectives
from runtime.sim import formulas
from runtime.sim.corrections import ScaleKey
from runtime.sim.costmodel import CostModel
from runtime.sim.effects import NONBLOCKING, SYNCED, UNTIMED
from runtime.sim.profiles import get_profile
from runtime.sim.program import Action, Program, ProgramError
from runtime.sim.simulate import DeadlockError, simulate

MODEL = CostModel("test", alpha=1e-5, beta=1e-9, gamma=5e-10)


def program_of(n: int, schedule: dict[int, list[Action]]) -> Program:
    program = Program(n)
    for rank in range(n):
        program.extend(schedule.get(rank, []))
    program.validate()
    return program


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 16])
@pytest.mark.parametrize("numel", [1, 1000, 1001, 2**20 + 3])
def test_ring_all_reduce_matches_formula(n: int, numel: int) -> None:
    program = program_of(n, collectives.ring_all_reduce(list(range(n)), numel, 4))
    predicted = simulate(program, MODEL).makespan
    size = numel * 4
    exact = formulas.ring_all_reduce_time(n, size, MODEL.alpha, MODEL.beta, MODEL.gamma)
    # Uneven chunks cost at most one element more per step than the formula's S/n.
    assert predicted == pytest.approx(
        exact, rel=1e-9, abs=2 * (n - 1) * 4 * (MODEL.beta + MODEL.gamma)
    )


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_tree_all_reduce_matches_formula_for_powers_of_two(n: int) -> None:
    size = 4096
    program = program_of(n, collectives.tree_all_reduce(list(range(n)), size))
    exact = formulas.tree_all_reduce_time(n, size, MODEL.alpha, MODEL.beta, MODEL.gamma)
    assert simulate(program, MODEL).makespan == pytest.approx(exact, rel=1e-12)


def test_ring_bytes_per_rank_are_2s_n_minus_1_over_n() -> None:
    n, numel = 4, 1024
    program = program_of(n, collectives.ring_all_reduce(list(range(n)), numel, 4))
    for rank_actions in program.ranks:
        assert sum(a.bytes for a in rank_actions) == formulas.ring_all_reduce_bytes_per_rank(
            n, numel * 4
        )


def test_ring_chunks_end_where_torch_puts_them() -> None:
    """After reduce-scatter, position i owns chunk i (reduce_scatter_tensor's convention)."""
    n = 5
    rs = collectives.ring_reduce_scatter(list(range(n)), 100, 4)
    for rank in range(n):
        assert rs[rank][-1].arg("recv_chunk") == rank


def test_deadlock_names_ranks_and_actions() -> None:
    program = Program(2)
    program.add(Action("a0", 0, "recv", src=1, bytes=8))
    program.add(Action("a1", 0, "send", dst=1, bytes=8))
    program.add(Action("b0", 1, "recv", src=0, bytes=8))
    program.add(Action("b1", 1, "send", dst=0, bytes=8))
    program.validate()  # pairing is fine; only the order deadlocks
    with pytest.raises(DeadlockError) as info:
        simulate(program, MODEL)
    message = str(info.value)
    assert "rank 0 at a0" in message and "rank 1 at b0" in message
    assert {s.rank for s in info.value.stuck} == {0, 1}


def test_collective_missing_member_is_a_deadlock() -> None:
    program = Program(3)
    for rank in (0, 1):
        program.add(Action(f"ar@{rank}", rank, "all_reduce", bytes=64, group=(0, 1, 2)))
    program.add(Action("c@2", 2, "compute", cost_key="compute"))
    model = CostModel("m", 0, 0, 0, compute={"compute": 1.0})
    with pytest.raises(DeadlockError, match=r"rank\(s\) \[2\]"):
        simulate(program, model)


def test_collective_waits_for_the_late_rank() -> None:
    program = Program(2)
    program.add(Action("c@0", 0, "F", cost_key="F"))
    program.add(Action("ar@0", 0, "all_reduce", bytes=0, group=(0, 1)))
    program.add(Action("ar@1", 1, "all_reduce", bytes=0, group=(0, 1)))
    timeline = simulate(program, get_profile("unit"))
    spans = timeline.by_action()
    assert spans["ar@1"].start == 0 and spans["ar@1"].end == 1.0
    assert spans["ar@0"].start == 1.0 and spans["ar@0"].end == 1.0


def test_collective_mismatch_is_reported() -> None:
    program = Program(2)
    program.add(Action("x@0", 0, "all_reduce", bytes=8, group=(0, 1)))
    program.add(Action("x@1", 1, "all_gather", bytes=8, group=(0, 1)))
    with pytest.raises(ProgramError, match="mismatch"):
        simulate(program, MODEL)


def test_validate_rejects_unpaired_messages() -> None:
    program = Program(2)
    program.add(Action("s", 0, "send", dst=1, bytes=8))
    with pytest.raises(ProgramError, match="rank 0 sends 1 message"):
        program.validate()


def test_validate_rejects_duplicate_ids_and_bad_peers() -> None:
    program = Program(2)
    program.add(Action("same", 0, "F"))
    program.add(Action("same", 1, "F"))
    with pytest.raises(ProgramError, match="duplicate"):
        program.validate()
    program = Program(2)
    program.add(Action("s", 0, "send", dst=5))
    with pytest.raises(ProgramError, match="outside"):
        program.validate()


# -- core sharing (processor sharing of CostModel.cores) ---------------------------
def cpu_model(cores: int | None, alpha: float = 0.0) -> CostModel:
    return CostModel("cpu", alpha, 0.0, 0.0, compute={"F": 1.0}, cores=cores)


def computes(n: int, work: float = 1.0) -> Program:
    program = Program(n)
    for rank in range(n):
        program.add(Action(f"f@{rank}", rank, "F", cost_key="F", work=work))
    return program


def test_two_ranks_on_one_core_take_twice_as_long() -> None:
    spans = simulate(computes(2), cpu_model(1)).by_action()
    assert spans["f@0"].end == 2.0 and spans["f@1"].end == 2.0


@pytest.mark.parametrize(("n", "end"), [(4, 2.0), (2, 1.0), (1, 1.0), (3, 1.5)])
def test_ranks_share_two_cores(n: int, end: float) -> None:
    spans = simulate(computes(n), cpu_model(2)).spans
    assert [s.end for s in spans] == [pytest.approx(end)] * n
    assert simulate(computes(n), get_profile("unit")).makespan == 1.0


def staggered(first_work: float) -> Program:
    """Rank 0 computes from 0; rank 1 waits for rank 2's message (arrives at 1), then computes 1."""
    program = Program(3)
    program.add(Action("f@0", 0, "F", cost_key="F", work=first_work))
    program.add(Action("send@2", 2, "send", dst=1, bytes=8))
    program.add(Action("recv@1", 1, "recv", src=2, bytes=8))
    program.add(Action("f@1", 1, "F", cost_key="F"))
    program.validate()
    return program


def test_sharing_starts_when_the_second_rank_starts_computing() -> None:
    spans = simulate(staggered(2.0), cpu_model(1, alpha=1.0)).by_action()
    assert spans["recv@1"].start == 0.0 and spans["recv@1"].end == 1.0
    # 0..1 rank 0 alone: 1 unit done. 1..3 both at half speed: 1 more unit each.
    assert spans["f@1"].start == 1.0
    assert spans["f@1"].end == pytest.approx(3.0)
    assert spans["f@0"].end == pytest.approx(3.0)


def test_a_rank_speeds_up_when_the_other_stops_computing() -> None:
    spans = simulate(staggered(3.0), cpu_model(1, alpha=1.0)).by_action()
    # 0..1 rank 0 alone (1 unit), 1..3 halves (1 unit each, rank 1 done),
    # 3..4 rank 0 alone again for its last unit.
    assert spans["f@1"].end == pytest.approx(3.0)
    assert spans["f@0"].end == pytest.approx(4.0)
    # A static factor (3 ranks on 1 core) would say 9 and 4.
    assert simulate(staggered(3.0), cpu_model(None, alpha=1.0)).by_action()["f@0"].end == 3.0


def test_computes_due_at_the_same_instant_end_together() -> None:
    """0.2 + 0.1 != 0.3 in floating point; the two computes still end at one instant."""
    program = Program(3)
    program.add(Action("f@0", 0, "F", cost_key="F", work=0.3))
    program.add(Action("send@2", 2, "send", dst=1, bytes=0))
    program.add(Action("recv@1", 1, "recv", src=2, bytes=0))
    program.add(Action("f@1", 1, "F", cost_key="F", work=0.1))
    spans = simulate(program, cpu_model(1, alpha=0.2)).by_action()
    assert spans["f@0"].end == spans["f@1"].end == pytest.approx(0.4)


def test_deadlock_with_cores_names_only_the_stuck_ranks() -> None:
    program = Program(3)
    program.add(Action("f@0", 0, "F", cost_key="F"))
    program.add(Action("r@0", 0, "recv", src=1, bytes=8))
    program.add(Action("s@0", 0, "send", dst=1, bytes=8))
    program.add(Action("r@1", 1, "recv", src=0, bytes=8))
    program.add(Action("s@1", 1, "send", dst=0, bytes=8))
    program.add(Action("f@2", 2, "F", cost_key="F"))
    program.validate()
    with pytest.raises(DeadlockError) as info:
        simulate(program, cpu_model(1))
    assert {s.rank for s in info.value.stuck} == {0, 1}
    assert "rank 0 at r@0" in str(info.value) and "rank 1 at r@1" in str(info.value)


def chain(costs: list[float], m: int) -> Program:
    """A forward-only pipeline: per microbatch, recv from r-1, compute, send to r+1."""
    p = len(costs)
    program = Program(p)
    for mb in range(m):
        for r in range(p):
            if r > 0:
                program.add(Action(f"r{r}.{mb}", r, "recv", src=r - 1, bytes=8))
            program.add(Action(f"f{r}.{mb}", r, "F", cost_key="F", work=costs[r]))
            if r < p - 1:
                program.add(Action(f"s{r}.{mb}", r, "send", dst=r + 1, bytes=8))
    program.validate()
    return program


def test_pipeline_warm_up_runs_at_full_speed() -> None:
    # p=4 ranks, m=8, F=1, 2 cores, free communication. Every rank starts its
    # microbatch at the same instant, so the run is a sequence of phases, each
    # as long as the rate allows: 1 rank (1), 2 ranks (1), 3 ranks (1.5),
    # 4 ranks (2) five times, then 3 (1.5), 2 (1), 1 (1): 17.
    assert simulate(chain([1.0] * 4, 8), cpu_model(2)).makespan == pytest.approx(17.0)
    # No sharing: (m + p - 1)·F; a static factor p/cores would double it to 22.
    assert simulate(chain([1.0] * 4, 8), cpu_model(None)).makespan == 11.0


def time_sliced_chain(costs: list[float], m: int, cores: int, dt: float) -> list[float]:
    """Each rank's end time, by fixed time steps: an independent reference."""
    p = len(costs)
    done = [0] * p  # microbatches finished per rank
    arrived = [0] * p  # microbatches delivered to each rank
    arrived[0] = m
    left: list[float | None] = [None] * p  # remaining work of the compute in flight
    ends = [0.0] * p
    t = 0.0
    while min(done) < m:
        for r in range(p):  # instantaneous steps: finish, send, take the next microbatch
            if left[r] is not None and left[r] <= 1e-12:
                left[r] = None
                done[r] += 1
                ends[r] = t
                if r + 1 < p:
                    arrived[r + 1] += 1
        for r in range(p):
            if left[r] is None and done[r] < m and arrived[r] > done[r]:
                left[r] = costs[r]
        busy = [r for r in range(p) if left[r] is not None]
        if not busy:
            break
        rate = min(1.0, cores / len(busy))
        for r in busy:
            left[r] = max(0.0, left[r] - rate * dt)
        t += dt
    return ends


@pytest.mark.parametrize(
    ("costs", "cores"),
    [([1.0, 1.0, 1.0, 1.0], 2), ([1.0, 0.5, 1.5, 0.75], 2), ([0.3, 1.2, 0.7], 1)],
)
def test_pipeline_matches_a_time_sliced_reference(costs: list[float], cores: int) -> None:
    m, dt = 8, 1e-3
    timeline = simulate(chain(costs, m), cpu_model(cores))
    ends = [max(s.end for s in timeline.spans if s.rank == r) for r in range(len(costs))]
    reference = time_sliced_chain(costs, m, cores, dt)
    # The reference notices each end up to one step late, along a chain of < 4m events.
    assert ends == [pytest.approx(e, abs=4 * m * dt) for e in reference]


# -- compute costs -------------------------------------------------------------------
def test_stage_keys_fall_back_to_their_family() -> None:
    model = CostModel("m", 0, 0, 0, compute={"F": 2.0, "B.s1": 7.0}, flops_per_s=1e12)
    quarter = Action("f", 0, "F", cost_key="F.s3", args=(("fraction", 0.25),))
    assert model.compute_time(quarter) == 0.5
    assert model.compute_time(Action("f", 0, "F", cost_key="F.s3", work=0.5)) == 1.0
    # An exact entry wins over the family.
    assert model.compute_time(Action("b", 0, "B", cost_key="B.s1", work=2.0)) == 14.0
    # No family entry: flops, then nothing.
    flops = Action("b", 0, "B", cost_key="B.s2", args=(("flops", 3e12),))
    assert model.compute_time(flops) == 3.0
    with pytest.raises(KeyError, match="B.s2"):
        model.compute_time(Action("b", 0, "B", cost_key="B.s2"))
    with pytest.raises(KeyError):
        CostModel("m", 0, 0, 0, compute={"F": 1.0}).compute_time(Action("x", 0, "X", cost_key="Fx"))


def test_spans_pair_one_to_one_with_actions() -> None:
    program = program_of(4, collectives.ring_all_reduce(list(range(4)), 64, 4))
    timeline = simulate(program, MODEL)
    assert sorted(s.action_id for s in timeline.spans) == sorted(a.id for a in program.actions())


def test_messages_on_one_link_queue() -> None:
    program = Program(2)
    program.add(Action("s1", 0, "send", dst=1, bytes=1000))
    program.add(Action("s2", 0, "send", dst=1, bytes=1000))
    program.add(Action("r1", 1, "recv", src=0, bytes=1000))
    program.add(Action("r2", 1, "recv", src=0, bytes=1000))
    spans = simulate(program, MODEL).by_action()
    one = MODEL.alpha + 1000 * MODEL.beta
    assert spans["r2"].end == pytest.approx(2 * one)
    assert math.isclose(spans["s2"].end, 2 * one)


def test_refine_collectives_scales_each_kind_by_the_runs_median_ratio() -> None:
    """After a run the model times each collective kind as the run did: the median over
    instances of (member's span) / formula; kinds the run did not time keep 1.0."""
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.costmodel import CostModel
    from runtime.sim.program import Action, Program
    from runtime.sim.trace import Span, Timeline

    model = CostModel("m", alpha=1e-3, beta=0.0, gamma=0.0)
    group = (0, 1)
    program = Program(2)
    spans = []
    for step, took in enumerate((4e-3, 5e-3, 100e-3)):  # the last instance: a disturbed one
        for rank in group:
            action = Action(
                f"ar{step}@r{rank}", rank, "all_reduce", group=group, bytes=8, step=step
            )
            program.add(action)
            spans.append(Span(rank, "all_reduce", "", step, step + took, action_id=action.id))
    formula = model.collective_formula(program.ranks[0][0])  # 2(n-1)·α = 2 ms
    refined = refine_collectives(model, program, Timeline(spans))
    assert refined.collective_scale == {
        ScaleKey("all_reduce"): pytest.approx(5e-3 / formula),
        ScaleKey("all_reduce", size=(8, 2)): pytest.approx(5e-3 / formula),  # the size it timed
    }
    assert refined.collective_time(program.ranks[0][0]) == pytest.approx(5e-3)
    assert "collectives as measured" in refined.source
    assert refine_collectives(model, program, Timeline()) is model  # nothing timed: unchanged


def test_each_series_keeps_the_collective_scale_its_run_timed() -> None:
    """Two series run the same all-reduce (zero's stages, one after the other), one 2 ms
    and the other 6 ms: each is predicted at its own time after the run, in the
    simulator too (which caches a collective's time per kind and size: per series now),
    and a series the run did not time gets the scale pooled over both."""
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.costmodel import CostModel
    from runtime.sim.program import Action, Program
    from runtime.sim.trace import Span, Timeline

    model = CostModel("m", alpha=1e-3, beta=0.0, gamma=0.0)
    group = (0, 1)
    program = Program(2)
    spans = []
    for step, (series, took) in enumerate((("a", 2e-3), ("b", 6e-3), ("a", 2e-3))):
        for rank in group:
            action = Action(f"ar{step}@r{rank}", rank, "all_reduce", group=group, bytes=8,
                            step=step, series=series)  # fmt: skip
            program.add(action)
            spans.append(Span(rank, "all_reduce", series, step, step + took, action_id=action.id))
    refined = refine_collectives(model, program, Timeline(spans))
    scales = refined.collective_scale
    assert scales[ScaleKey("all_reduce", series="a", size=(8, 2))] == pytest.approx(2e-3 / 2e-3)
    assert scales[ScaleKey("all_reduce", series="b")] == pytest.approx(6e-3 / 2e-3)
    predicted = simulate(program, refined)
    took = {(s.series, s.rank): s.end - s.start for s in predicted.spans}
    assert took[("a", 0)] == pytest.approx(2e-3) and took[("b", 1)] == pytest.approx(6e-3)
    other = Action("x@r0", 0, "all_reduce", group=group, bytes=8, series="c")
    assert refined.collective_time(other) == pytest.approx(2e-3)  # median of 2, 6, 2 ms


def test_refine_collectives_leaves_the_warmup_steps_out() -> None:
    """A first step's collective pays its buffers' first use (here 20 ms against 2 ms):
    with `warmup_steps`, as a lesson whose times leave that step out, it scales nothing."""
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.costmodel import CostModel
    from runtime.sim.program import Action, Program
    from runtime.sim.trace import Span, Timeline

    model = CostModel("m", alpha=1e-3, beta=0.0, gamma=0.0)  # formula: 2 ms on 2 ranks
    group = (0, 1)
    program = Program(2)
    spans = []
    for step, took in enumerate((20e-3, 2e-3, 2e-3)):
        for rank in group:
            action = Action(f"ar{step}@r{rank}", rank, "all_reduce", group=group, bytes=8,
                            step=step)  # fmt: skip
            program.add(action)
            spans.append(Span(rank, "all_reduce", "", step, step + took, action_id=action.id))
    action = program.ranks[0][1]
    steady = refine_collectives(model, program, Timeline(spans), chained=True, warmup_steps=1)
    assert steady.collective_time(action) == pytest.approx(2e-3)
    every = refine_collectives(model, program, Timeline(spans), chained=True)
    assert every.collective_time(action) == pytest.approx(8e-3)  # the mean of 20, 2, 2


def test_refine_chained_collectives_from_last_arrival_to_last_end() -> None:
    """`chained`: each instance runs from its last member's arrival to its last member's
    end (a late arrival's wait is not the collective's; a late finisher holds the next
    link of the chain), and the scale is the mean over instances; by default the median
    member's span, arrival to end."""
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.costmodel import CostModel
    from runtime.sim.program import Action, Program
    from runtime.sim.trace import Span, Timeline

    model = CostModel("m", alpha=1e-3, beta=0.0, gamma=0.0)
    group = (0, 1, 2)
    program = Program(3)
    spans = []
    # (arrival, end) per member: in step 0 rank 2 arrives 6 ms late and all end together
    # 2 ms later; in step 1 they arrive together and rank 2 ends 4 ms after the others.
    timings = [((0, 8e-3), (0, 8e-3), (6e-3, 8e-3)), ((0, 2e-3), (0, 2e-3), (0, 6e-3))]
    for step, members in enumerate(timings):
        for rank, (arrive, end) in zip(group, members, strict=True):
            action = Action(
                f"ar{step}@r{rank}", rank, "all_reduce", group=group, bytes=8, step=step
            )
            program.add(action)
            start = 10.0 * step
            spans.append(
                Span(rank, "all_reduce", "", start + arrive, start + end, action_id=action.id)
            )
    chained = refine_collectives(model, program, Timeline(spans), chained=True)
    by_median = refine_collectives(model, program, Timeline(spans))
    action = program.ranks[0][0]
    # chained: step 0 took 8 − 6 = 2 ms, step 1 took 6 − 0 = 6 ms; their mean, 4 ms
    assert chained.collective_time(action) == pytest.approx(4e-3)
    # by default: the median member's span, 8 ms and 2 ms; the median of two, 5 ms
    assert by_median.collective_time(action) == pytest.approx(5e-3)


def test_refine_scales_a_spelled_out_ring_as_measured() -> None:
    """A ring measured 1.5× slower than predicted (its steps' gaps and the ranks' skew
    included) is predicted 1.5× slower after the run refines it."""
    from dataclasses import replace

    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.trace import Timeline

    program = program_of(4, collectives.ring_all_reduce(list(range(4)), 2**18, 4))
    before = simulate(program, MODEL)
    measured = Timeline(
        [replace(s, start=s.start * 1.5 + 1e-3, end=s.end * 1.5 + 1e-3) for s in before.spans]
    )
    refined = refine_collectives(MODEL, program, measured, before)
    assert refined.collective_scale[ScaleKey("sendrecv")] == pytest.approx(1.5)
    assert simulate(program, refined).makespan == pytest.approx(1.5 * before.makespan, rel=1e-6)


def test_refine_costs_a_ring_by_its_steps_and_the_gaps_between_them_apart() -> None:
    """After a run a ring's iteration is predicted from its parts, not fitted to itself:
    every step took twice its formula and the rank left 1 ms between two steps. The
    steps' scale is 2 (the gaps are not a step's), and with the gaps the ranks measured
    (refine_dispatch) the simulated chain comes to the run's iteration."""
    from dataclasses import replace

    from runtime.fit.refine import refine_dispatch
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.trace import Span, Timeline

    schedule = collectives.ring_all_reduce(list(range(4)), 2**18, 4)
    program = program_of(
        4, {r: [replace(a, series="ring") for a in s] for r, s in schedule.items()}
    )
    before = simulate(program, MODEL)
    gap = 1e-3
    order = {a.id: k for actions in program.ranks for k, a in enumerate(actions)}

    def later(span: Span) -> Span:  # a rank's k-th step: twice as long, after k gaps
        shift = order[span.action_id] * gap
        return replace(span, start=2 * span.start + shift, end=2 * span.end + shift)

    measured = Timeline([later(span) for span in before.spans])
    refined = refine_collectives(MODEL, program, measured, before)
    assert refined.collective_scale[ScaleKey("sendrecv")] == pytest.approx(2.0)
    refined = refine_dispatch(refined, program, measured)
    assert refined.corrections.series_dispatch["ring"] == pytest.approx(gap)
    assert simulate(program, refined).makespan == pytest.approx(measured.makespan, rel=1e-6)


def test_refine_dispatch_lets_a_barriers_members_go_as_the_run_did() -> None:
    """gloo releases a barrier's members one after another: the run's lags (rank r left
    r·0.5 ms after rank 0) become each rank's gap after the barrier, so the ring after it
    starts as late on each rank as the run's did, and the iteration waits for the last."""
    from dataclasses import replace

    from runtime.fit.refine import refine_dispatch
    from runtime.sim.program import barriers
    from runtime.sim.trace import Timeline

    group = (0, 1, 2, 3)
    schedule = collectives.ring_all_reduce(list(group), 2**18, 4)
    start = {a.rank: a for a in barriers("ring.barrier", group, series="ring", step=0)}
    program = program_of(
        4,
        {
            r: [start[r], *(replace(a, series="ring", step=0) for a in s)]
            for r, s in schedule.items()
        },
    )
    before = simulate(program, MODEL)
    lag = 5e-4
    measured = Timeline(
        [
            replace(span, end=span.end + span.rank * lag)
            if span.action_id == start[span.rank].id
            else span
            for span in before.spans
        ]
    )
    refined = refine_dispatch(MODEL, program, measured)
    for rank in group:
        assert refined.corrections.exit_lag[("ring", rank)] == pytest.approx(rank * lag)
    after = simulate(program, refined).by_action()
    first = {r: after[program.ranks[r][1].id].start for r in group}
    assert first[3] - first[0] == pytest.approx(3 * lag)
    # The ring's first step waits for its sender: rank 0 receives from rank 3.
    assert after[program.ranks[0][1].id].end > first[3]
    assert simulate(program, refined).makespan > before.makespan + 3 * lag * 0.9


def test_a_rings_steps_do_not_pay_the_barriers_lags_twice() -> None:
    """Three iterations, each a barrier then a ring whose steps cost their formula, rank r
    leaving each barrier r·0.5 ms after rank 0: the steps' waits behind those lags are the
    lags' (the simulation with them puts them there), so the steps' scale stays 1 and
    the refined model gives the run's makespan back. A barrier some member never left
    (a failed attempt) says nothing of the lags; one rank alone has none."""
    from dataclasses import replace

    from runtime.fit.refine import exit_lags, refine_dispatch
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.program import barriers
    from runtime.sim.trace import Timeline

    group, lag = (0, 1, 2, 3), 5e-4
    program = Program(4)
    for step in range(3):
        ring = collectives.ring_all_reduce(list(group), 2**14, 4, prefix=f"it{step}.", step=step)
        start = {a.rank: a for a in barriers(f"it{step}.b", group, series="ring", step=step)}
        for r in group:
            program.add(start[r])
            program.extend(replace(a, series="ring") for a in ring[r])
    lags = {("ring", r): r * lag for r in group}
    truth = simulate(program, MODEL.corrected(exit_lag=lags))
    leaving = {a.id for a in program.actions() if a.kind == "barrier"}
    measured = Timeline(
        [replace(s, end=s.end + s.rank * lag) if s.action_id in leaving else s for s in truth.spans]
    )
    refined = refine_collectives(MODEL, program, measured, simulate(program, MODEL))
    assert refined.collective_scale[ScaleKey("sendrecv")] == pytest.approx(1.0)
    refined = refine_dispatch(refined, program, measured)
    assert simulate(program, refined).makespan == pytest.approx(measured.makespan, rel=1e-9)
    partial = Timeline([s for s in measured.spans if s.action_id != "it0.b@r3"])
    assert exit_lags(program, partial.by_action()) == pytest.approx(lags)
    alone = Program(1)
    alone.extend(barriers("b", (0,), series="ring", step=0))
    assert exit_lags(alone, simulate(alone, MODEL).by_action()) == {}


def test_barrier_lags_keep_their_spread_when_the_members_leave_in_no_fixed_order() -> None:
    """Four barriers of three ranks, the last to leave a different rank each time (and
    rank 2 last twice): each rank's own mean lag is about the same, but a ring after the
    barrier waits for that barrier's last member. The lags are the mean order statistics
    (0, then the mean second, then the mean last), given in the order of the ranks' own
    means: the spread a barrier had, and the same total."""
    from runtime.fit.refine import exit_lags
    from runtime.sim.program import barriers
    from runtime.sim.trace import Span

    group = (0, 1, 2)
    orders = [(0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 1, 2)]  # who leaves first, second, last
    program = Program(3)
    spans: dict[str, Span] = {}
    for step, order in enumerate(orders):
        start = barriers(f"it{step}.b", group, series="ring", step=step)
        for rank in group:
            action = start[rank]
            program.add(action)
            end = 10.0 * step + 1e-3 * order.index(rank)
            spans[action.id] = Span(rank, "barrier", "b", end - 1e-3, end, action_id=action.id)
    own = {r: sum(1e-3 * o.index(r) for o in orders) / len(orders) for r in group}
    assert own == pytest.approx({0: 0.75e-3, 1: 1e-3, 2: 1.25e-3})  # about the same
    lags = exit_lags(program, spans)
    assert [lags[("ring", r)] for r in group] == pytest.approx([0.0, 1e-3, 2e-3])
    assert sum(lags.values()) == pytest.approx(sum(own.values()))


def test_refine_builtin_collectives_apart_from_ddp_buckets() -> None:
    """Torch's own blocking collectives get a scale of their own (ScaleKey.builtin); a
    non-blocking one (a DDP bucket) one of its own (timing "async"); one whose work is
    inside another span (torch DDP's, inside B) costs nothing once that span is timed."""
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.trace import Span, Timeline

    program = Program(2)
    spans = []
    took = 10 * MODEL.collective_formula(Action("x", 0, "all_reduce", group=(0, 1), bytes=8))
    variants = (
        ("tp", {}),
        ("bucket", {"effects": NONBLOCKING}),
        ("inside-b", {"effects": UNTIMED}),  # torch DDP's: its work is in B
    )
    for name, extra in variants:
        for rank in (0, 1):
            action = Action(
                f"{name}@r{rank}", rank, "all_reduce", group=(0, 1), bytes=8,
                algorithm="builtin", **extra,
            )  # fmt: skip
            program.add(action)
            spans.append(Span(rank, "all_reduce", "", 0.0, took, action_id=action.id))
    refined = refine_collectives(MODEL, program, Timeline(spans))
    tp, bucket, inside = program.ranks[0]
    assert {key.text() for key in refined.collective_scale} == {
        "builtin.all_reduce",
        "builtin.all_reduce@8/2",
        "async.all_reduce",
        "untimed.all_reduce",
    }
    assert refined.collective_time(tp) == pytest.approx(took)
    assert refined.collective_time(bucket) == pytest.approx(took)
    assert MODEL.collective_time(inside) > 0 and refined.collective_time(inside) == 0


def test_refine_ddp_buckets_per_series_from_when_each_could_start() -> None:
    """A series' buckets run one after another on each rank's stream: each is timed from
    when it could start (every member launched it, each member's previous one ended) to
    the members' median end, as the simulator runs them; per step their sum over the
    formula's, the median over steps; each series its own scale."""
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.trace import Span, Timeline

    program = Program(2)
    spans = []
    unit = MODEL.collective_formula(Action("x", 0, "all_reduce", group=(0, 1), bytes=8))
    # Series "a": two buckets launched together at 0; the first ends at 2 units, the
    # second at 5: it could start at 2, so 3 units; 5 units for 2 formula ones: ×2.5.
    # Series "b", later: one bucket, rank 1 launches it 4 units late; it ends 1 unit
    # after: ×1.
    timings = {"a": [((0, 2), (0, 2)), ((0, 5), (0, 5))], "b": [((10, 15), (14, 15))]}
    for series, buckets in timings.items():
        for j, members in enumerate(buckets):
            for rank, (launch, end) in enumerate(members):
                action = Action(
                    f"{series}{j}@r{rank}", rank, "all_reduce", group=(0, 1), bytes=8,
                    algorithm="builtin", series=series, step=0, chunk=j, effects=NONBLOCKING,
                )  # fmt: skip
                program.add(action)
                spans.append(
                    Span(rank, "all_reduce", "", launch * unit, end * unit, action_id=action.id)
                )
    refined = refine_collectives(MODEL, program, Timeline(spans))
    a = program.ranks[0][0]
    bucket = {series: ScaleKey("all_reduce", series=series, timing="async") for series in "ab"}
    assert refined.collective_scale[bucket["a"]] == pytest.approx(2.5)
    assert refined.collective_scale[bucket["b"]] == pytest.approx(1.0)
    assert refined.collective_time(a) == pytest.approx(2.5 * unit)


def test_refine_compute_makes_the_simulated_spans_add_up_to_the_measured() -> None:
    """Each compute cost is scaled by its measured spans' sum over its predicted ones
    (bounded), so a machine that shares its cores worse than ideally is learned."""
    from dataclasses import replace

    from runtime.fit.refine import refine_compute
    from runtime.sim.trace import Timeline

    model = replace(MODEL, compute={"F": 1e-3, "B": 2e-3})
    program = Program(1)
    for step in range(3):
        program.add(Action(f"f{step}", 0, "F", cost_key="F", step=step))
        program.add(Action(f"b{step}", 0, "B", cost_key="B", step=step))
    before = simulate(program, model)
    measured = Timeline(
        [replace(s, end=s.start + (s.end - s.start) * (1.3 if s.kind == "F" else 9.0))
         for s in before.spans]
    )  # fmt: skip
    refined = refine_compute(model, program, measured, before)
    assert refined.compute["F"] == pytest.approx(1.3e-3)
    assert refined.compute["B"] == pytest.approx(4 * 2e-3)  # bounded to 4x
    assert "compute as its spans measured" in refined.source


def test_refine_compute_leaves_the_warmup_steps_out() -> None:
    """A first step at twice the cost (Adam allocating its moments): a lesson that times
    its steady steps only refines from those, and so does the replay."""
    from dataclasses import replace

    from runtime.fit.refine import refine_compute
    from runtime.fit.replay import replay_compute
    from runtime.sim.trace import Timeline

    model = replace(MODEL, compute={"F": 1e-3}, cores=1)
    program = Program(1)
    for step in range(3):
        program.add(Action(f"f{step}", 0, "F", cost_key="F", step=step))
    before = simulate(program, model)
    measured = Timeline(
        [replace(s, end=s.start + (s.end - s.start) * (2.0 if s.step == 0 else 1.2))
         for s in before.spans]
    )  # fmt: skip
    every = refine_compute(model, program, measured, before)
    steady = refine_compute(model, program, measured, before, warmup_steps=1)
    assert every.compute["F"] == pytest.approx(1e-3 * 4.4 / 3)
    assert steady.compute["F"] == pytest.approx(1.2e-3)
    replayed = replay_compute(steady, program, measured, warmup_steps=1)
    assert simulate(program, replayed).by_action()["f2"].duration == pytest.approx(1.2e-3)


def test_replay_compute_keeps_each_span_as_measured_without_sharing_the_cores_again() -> None:
    """Four ranks on two cores whose forwards each took 10 ms on the wall, whether all
    four computed or one did: shared again, the lone one would come out at half the
    others; replayed (cores not shared), every span is the 10 ms it took."""
    from dataclasses import replace

    from runtime.fit.refine import refine_compute
    from runtime.fit.replay import replay_compute
    from runtime.sim.trace import Span, Timeline

    model = replace(MODEL, compute={"F": 1e-3}, cores=2)
    program = Program(4)
    for rank in range(4):
        program.add(Action(f"f0@{rank}", rank, "F", cost_key="F", step=0))
    program.add(Action("f1@0", 0, "F", cost_key="F", step=1))
    ends = {"f0@0": 0.010, "f0@1": 0.010, "f0@2": 0.010, "f0@3": 0.010, "f1@0": 0.020}
    measured = Timeline(
        [Span(a.rank, "F", "", ends[a.id] - 0.010, ends[a.id], action_id=a.id)
         for a in program.actions()]
    )  # fmt: skip
    shared = refine_compute(model, program, measured, simulate(program, model))
    assert simulate(program, shared).by_action()["f1@0"].end < 0.018  # the lone F sped up
    replayed = replay_compute(shared, program, measured)
    assert replayed.cores is None and shared.cores == 2
    spans = simulate(program, replayed).by_action()
    assert spans["f1@0"].end == pytest.approx(0.020)
    assert spans["f0@3"].end == pytest.approx(0.010)
    slowed = replace(shared, slow=((1, 3.0),))
    assert replay_compute(slowed, program, measured) is slowed  # CPU-second costs: kept


def test_replay_compute_reaches_spans_far_beyond_the_cpu_seconds_of_many_ranks() -> None:
    """Eight ranks on two cores: each forward took 5x its CPU seconds on the wall. The
    replay starts from the share of a core each rank had (8/2), so refine's bounds
    ([0.25, 4]) do not clip what the run measured."""
    from dataclasses import replace

    from runtime.fit.replay import replay_compute
    from runtime.sim.trace import Span, Timeline

    model = replace(MODEL, compute={"F": 1e-3}, cores=2)
    program = Program(8)
    for rank in range(8):
        program.add(Action(f"f@{rank}", rank, "F", cost_key="F"))
    measured = Timeline([Span(r, "F", "", 0.0, 5e-3, action_id=f"f@{r}") for r in range(8)])
    spans = simulate(program, replay_compute(model, program, measured)).by_action()
    assert spans["f@7"].end == pytest.approx(5e-3)


def test_replay_gives_each_series_its_own_cost_of_a_shared_key() -> None:
    """Two series (zero's stages, say) run the same forward, one 30% slower on shared
    cores: replayed, each series' prediction carries its own, not their average."""
    from dataclasses import replace

    from runtime.fit.replay import replay_compute
    from runtime.sim.costmodel import series_key
    from runtime.sim.trace import Span, Timeline

    model = replace(MODEL, compute={"F": 1e-3}, cores=1)
    program = Program(1)
    spans = []
    for i, (series, took) in enumerate((("ddp", 10e-3), ("zero1", 13e-3))):
        program.add(Action(f"f{i}", 0, "F", cost_key="F", series=series))
        spans.append(Span(0, "F", "", i, i + took, action_id=f"f{i}", series=series))
    replayed = replay_compute(model, program, Timeline(spans))
    assert replayed.compute[series_key("ddp", "F")] == pytest.approx(10e-3)
    assert replayed.compute[series_key("zero1", "F")] == pytest.approx(13e-3)
    by_action = simulate(program, replayed).by_action()
    assert by_action["f1"].end - by_action["f1"].start == pytest.approx(13e-3)


def test_refine_p2p_times_messages_whose_receiver_waited_and_sends_hold_their_sender() -> None:
    from runtime.fit.refine import refine_p2p
    from runtime.sim.trace import Span, Timeline

    program = Program(2)
    spans = []
    for k in range(4):
        send = Action(f"s{k}", 0, "send", dst=1, bytes=1000, effects=NONBLOCKING)
        recv = Action(f"r{k}", 1, "recv", src=0, bytes=1000)
        program.add(send)
        program.add(recv)
        t = 0.1 * k
        spans.append(Span(0, "send", "", t, t + 2e-4, action_id=send.id))
        took = 2.5e-3 if k == 3 else 5e-4  # the last one's receiver was descheduled
        spans.append(Span(1, "recv", "", t - 1e-3, t + took, action_id=recv.id))  # it waited
    refined = refine_p2p(MODEL, program, Timeline(spans))
    # the mean over messages (the stage behind a slow one pays its wait): 1 ms
    assert refined.alpha == pytest.approx(1e-3 - 1000 * MODEL.beta)
    assert refined.corrections.send_issue == pytest.approx(2e-4)
    # The simulator holds each non-blocking send's sender for that long.
    simulated = simulate(program, refined).by_action()
    assert simulated["s0"].end - simulated["s0"].start == pytest.approx(2e-4)
    assert refine_p2p(MODEL, program, Timeline()) is MODEL


def test_refine_collectives_keeps_a_scale_per_message_size() -> None:
    """Two sizes of one kind, one 2x its formula and one 6x: each is predicted as it took,
    and a size the run never timed gets the kind's median."""
    from runtime.fit.refine_collectives import refine_collectives
    from runtime.sim.trace import Span, Timeline

    program = Program(2)
    spans = []
    sizes = {1024: 2.0, 2**20: 6.0}
    for step, (nbytes, factor) in enumerate([*sizes.items(), (1024, 2.0)]):
        for rank in (0, 1):
            action = Action(f"ag{step}@r{rank}", rank, "all_gather", group=(0, 1),
                            bytes=nbytes, step=step)  # fmt: skip
            program.add(action)
            took = factor * MODEL.collective_formula(action)
            spans.append(Span(rank, "all_gather", "", 0.0, took, action_id=action.id))
    refined = refine_collectives(MODEL, program, Timeline(spans))
    for nbytes, factor in sizes.items():
        action = Action("x", 0, "all_gather", group=(0, 1), bytes=nbytes)
        assert refined.collective_time(action) == pytest.approx(
            factor * MODEL.collective_formula(action)
        )
    other = Action("y", 0, "all_gather", group=(0, 1), bytes=4096)
    assert refined.collective_time(other) == pytest.approx(2.0 * MODEL.collective_formula(other))


def test_a_synced_compute_ends_on_every_member_when_the_slowest_has() -> None:
    """FSDP2's forward runs its all-gathers inside: no rank leaves it before the last.
    With a rank slowed 3x, its peers wait for it there, not at some later collective."""
    from dataclasses import replace

    base = replace(MODEL, compute={"F": 1e-3, "B": 2e-3})
    program = Program(2)
    for rank in (0, 1):
        program.add(Action(f"f@r{rank}", rank, "F", cost_key="F", group=(0, 1), effects=SYNCED))
        program.add(Action(f"b@r{rank}", rank, "B", cost_key="B"))
    for model in (base, replace(base, cores=1)):  # alone, and sharing one core
        plain = simulate(program, model).by_action()
        assert plain["f@r0"].end == plain["f@r1"].end
        slowed = simulate(program, replace(model, slow=((1, 3.0),))).by_action()
        assert slowed["f@r0"].end == slowed["f@r1"].end  # rank 0 waited inside F
        assert slowed["f@r0"].end > plain["f@r0"].end
        assert slowed["b@r0"].start == slowed["f@r1"].end


def test_a_compute_right_after_a_wait_pays_the_wake_up() -> None:
    """The calibrated wake-up (Corrections.wake) is paid by a compute that starts
    right after its rank blocked (a receive, a collective), not by one after another
    compute nor by a sender; after a run it is 0 (the measured compute holds it)."""
    from dataclasses import replace

    from runtime.fit.refine import refine

    model = replace(MODEL, compute={"F": 1e-3}).corrected(wake=2e-4)
    program = Program(2)
    program.add(Action("f0", 0, "F", cost_key="F"))
    program.add(Action("s0", 0, "send", dst=1, bytes=8))
    program.add(Action("f0b", 0, "F", cost_key="F"))  # after a send: no wait
    program.add(Action("r1", 1, "recv", src=0, bytes=8))
    program.add(Action("f1", 1, "F", cost_key="F"))  # after a receive: woken
    program.add(Action("f1b", 1, "F", cost_key="F"))  # after a compute: warm
    program.add(Action("ar0", 0, "all_reduce", group=(0, 1), bytes=8))
    program.add(Action("ar1", 1, "all_reduce", group=(0, 1), bytes=8))
    program.add(Action("g0", 0, "F", cost_key="F"))  # after a collective: woken
    spans = simulate(program, model).by_action()
    assert spans["f0"].duration == pytest.approx(1e-3)
    assert spans["f0b"].duration == pytest.approx(1e-3)
    assert spans["f1"].duration == pytest.approx(1.2e-3)
    assert spans["f1b"].duration == pytest.approx(1e-3)
    assert spans["g0"].duration == pytest.approx(1.2e-3)
    after = refine(model, [{"F": 1e-3}], what="F")
    assert after.corrections.wake == 0.0
    assert simulate(program, after).by_action()["f1"].duration == pytest.approx(1e-3)


def test_the_wake_up_is_calibrated_as_after_a_wait_against_back_to_back() -> None:
    from runtime.fit.calibration import wake_seconds

    assert wake_seconds([[3e-4, 2e-4], [5e-4, 2e-4], [2.5e-4, 2e-4]]) == pytest.approx(1e-4)
    assert wake_seconds([[1e-4, 2e-4]]) == 0.0  # noise: never below zero
    assert wake_seconds([]) == 0.0


def _dispatch_program() -> Program:
    """Two ranks in step: compute, compute, all-reduce, compute; then rank 0 sends to 1."""
    program = Program(2)
    for rank in (0, 1):
        program.add(Action(f"f@r{rank}", rank, "F", cost_key="F", series="s", step=0))
        program.add(Action(f"g@r{rank}", rank, "F", cost_key="F", series="s", step=0))
        program.add(Action(f"ar@r{rank}", rank, "all_reduce", group=(0, 1), bytes=8,
                           series="s", step=1))  # fmt: skip
        program.add(Action(f"h@r{rank}", rank, "F", cost_key="F", series="s", step=1))
    program.add(Action("s@r0", 0, "send", dst=1, bytes=8, series="s", step=1))
    program.add(Action("r@r1", 1, "recv", src=0, bytes=8, series="s", step=1))
    return program


@pytest.mark.parametrize("cores", [None, 1])
def test_a_rank_starts_each_action_the_dispatch_gap_after_its_last(cores: int | None) -> None:
    """What a rank's executor spends between two actions (Corrections.dispatch) comes
    before every action but its first: a collective starts when the last member has
    arrived after its gap, with the cores to themselves or shared."""
    from dataclasses import replace

    gap = 1e-4
    plain_model = replace(MODEL, compute={"F": 1e-3}, cores=cores)
    model = plain_model.corrected(dispatch=gap)
    program = _dispatch_program()
    plain = simulate(program, plain_model).by_action()
    spans = simulate(program, model).by_action()
    for rank in (0, 1):
        assert spans[f"f@r{rank}"].start == 0.0
        assert spans[f"g@r{rank}"].start == pytest.approx(spans[f"f@r{rank}"].end + gap)
        assert spans[f"ar@r{rank}"].start == pytest.approx(spans[f"g@r{rank}"].end + gap)
        assert spans[f"h@r{rank}"].start == pytest.approx(spans[f"ar@r{rank}"].end + gap)
    assert spans["s@r0"].start == pytest.approx(spans["h@r0"].end + gap)
    assert spans["r@r1"].end == pytest.approx(plain["r@r1"].end + 4 * gap)


def test_lockstep_ranks_pay_the_dispatch_gap_as_the_simulated_ones() -> None:
    from dataclasses import replace

    from runtime.sim.simulate import simulate_lockstep

    model = replace(MODEL, compute={"F": 1e-3}, cores=2).corrected(dispatch=1e-4)
    program = Program(2)
    for rank in (0, 1):
        program.add(Action(f"f@r{rank}", rank, "F", cost_key="F"))
        program.add(Action(f"ar@r{rank}", rank, "all_reduce", group=(0, 1), bytes=8))
        program.add(Action(f"g@r{rank}", rank, "F", cost_key="F"))
    every = [s for s in simulate(program, model).spans if s.rank == 0]
    one = simulate_lockstep(program.ranks[0], model, 2)
    assert [(s.start, s.end) for s in one] == pytest.approx([(s.start, s.end) for s in every])


def test_refine_dispatch_is_the_mean_gap_between_a_series_actions() -> None:
    """After a run: the mean over ranks of the gap from one action's span to the next's
    in the same series (a run simulated with a gap gives it back); the warm-up steps and
    a new series' first action left out."""
    from dataclasses import replace

    from runtime.fit.refine import refine_dispatch
    from runtime.sim.trace import Timeline

    def own(model: CostModel) -> float:  # the gap of series "s", every action's here
        return model.corrections.series_dispatch["s"]

    model = replace(MODEL, compute={"F": 1e-3})
    program = _dispatch_program()
    gap = 3e-5
    measured = simulate(program, model.corrected(dispatch=gap))
    refined = refine_dispatch(model, program, measured)
    assert own(refined) == pytest.approx(gap)
    assert refined.corrections.dispatch == 0.0  # no action outside a series
    assert "between two actions" in refined.source
    # A later series, a second after: its first action's wait is not the executor's.
    later = Program(2)
    for rank in (0, 1):
        later.extend(program.ranks[rank])
        later.add(Action(f"n@r{rank}", rank, "F", cost_key="F", series="t", step=0))
    spans = [*measured.spans]
    spans += [replace(s, start=s.start + 1.0, end=s.end + 1.0, action_id=f"n@r{s.rank}",
                      series="t") for s in measured.spans if s.action_id in ("h@r0", "h@r1")]  # fmt: skip
    assert own(refine_dispatch(model, later, Timeline(spans))) == pytest.approx(gap)
    # Step 0 is a warm-up: its gaps (made a millisecond here) are left out.
    late = [0.0 if s.action_id.startswith("f") else 1e-3 for s in measured.spans]
    slow_start = Timeline([replace(s, start=s.start + d, end=s.end + d)
                           for s, d in zip(measured.spans, late, strict=True)])  # fmt: skip
    assert own(refine_dispatch(model, program, slow_start)) > 2 * gap
    warm = refine_dispatch(model, program, slow_start, warmup_steps=1)
    assert own(warm) == pytest.approx(gap)
    # A rank slowed on purpose sleeps inside its spans: its gaps count as any rank's.
    slowed = replace(model, slow=((1, 3.0),))
    assert own(refine_dispatch(slowed, program, measured)) == pytest.approx(gap)


def _two_series_program() -> Program:
    """Two ranks: series "a" a barrier then three computes; series "b" a compute, a
    non-blocking all-reduce launched under two more computes, its wait, a compute."""
    program = Program(2)
    for rank in (0, 1):
        program.add(Action(f"go@r{rank}", rank, "barrier", group=(0, 1), series="a"))
        for k in range(3):
            program.add(Action(f"a{k}@r{rank}", rank, "F", cost_key="F", series="a", step=0))
        program.add(Action(f"b0@r{rank}", rank, "F", cost_key="F", series="b", step=0))
        program.add(Action(f"ar@r{rank}", rank, "all_reduce", group=(0, 1), bytes=1 << 20,
                           algorithm="builtin", series="b", step=0, effects=NONBLOCKING))  # fmt: skip
        for k in (1, 2):
            program.add(Action(f"b{k}@r{rank}", rank, "F", cost_key="F", series="b", step=0))
        program.add(Action(f"w@r{rank}", rank, "wait", series="b", step=0))
        program.add(Action(f"b3@r{rank}", rank, "F", cost_key="F", series="b", step=0))
    return program


@pytest.mark.parametrize("cores", [None, 1])
def test_each_series_pays_its_own_dispatch_gap_and_a_run_gives_each_back(
    cores: int | None,
) -> None:
    """A series' own gap (Corrections.series_dispatch) comes after each of its actions,
    the shared one (Corrections.dispatch) after the others'; refined after a run, each series
    gets back the gap it was simulated with. Two pairs are no measure of the gap and are
    left out: after a non-blocking launch (its span runs until the all-reduce ends,
    under the computes after it) and after a barrier (a series' setup follows it)."""
    from dataclasses import replace

    from runtime.fit.refine import refine_dispatch
    from runtime.sim.trace import Timeline

    gaps = {"a": 2e-5, "b": 3e-4}
    plain = replace(MODEL, compute={"F": 1e-3}, cores=cores)
    model = plain.corrected(series_dispatch=gaps)
    program = _two_series_program()
    spans = simulate(program, model).by_action()
    for rank in (0, 1):
        assert spans[f"a1@r{rank}"].start == pytest.approx(spans[f"a0@r{rank}"].end + 2e-5)
        assert spans[f"b2@r{rank}"].start == pytest.approx(spans[f"b1@r{rank}"].end + 3e-4)
        assert spans[f"b3@r{rank}"].start == pytest.approx(spans[f"w@r{rank}"].end + 3e-4)
    # The launch's span ends long after the next compute began: not a gap.
    assert spans["ar@r0"].end > spans["b1@r0"].start
    # The run set its series up for 10 ms after the barrier, outside any action.
    run = simulate(program, model)
    setup = Timeline([s if s.kind == "barrier" else replace(s, start=s.start + 0.01,
                      end=s.end + 0.01) for s in run.spans])  # fmt: skip
    refined = refine_dispatch(plain, program, setup)
    for series, gap in gaps.items():
        assert refined.corrections.series_dispatch[series] == pytest.approx(gap)
    # A series' own gap wins over the shared one; a series without one pays the shared.
    shared = plain.corrected(dispatch=1e-4, series_dispatch={"a": 2e-5})
    spans = simulate(program, shared).by_action()
    assert spans["a1@r0"].start == pytest.approx(spans["a0@r0"].end + 2e-5)
    assert spans["b2@r0"].start == pytest.approx(spans["b1@r0"].end + 1e-4)


def test_a_saved_model_reads_back_typed_in_either_format() -> None:
    """A cost model's JSON (describe) reads back the same (from_dict); a file of the older
    format, its corrections special keys of the compute table and its scales text keys,
    reads back as the same typed corrections and scale keys."""
    import json
    from dataclasses import replace

    model = replace(
        MODEL,
        compute={"F": 1e-3, "ring:F": 2e-3},
        collective_scale={
            ScaleKey("sendrecv"): 1.5,
            ScaleKey("all_reduce", builtin=True): 1.2,
            ScaleKey("all_gather", series="zero3", size=(64, 4)): 2.0,
            ScaleKey("all_reduce", series="fp32/hand", timing="async"): 3.0,
            ScaleKey("all_reduce", timing="untimed"): 0.0,
        },
    ).corrected(
        send_issue=2e-4,
        wake=1e-4,
        dispatch=3e-5,
        series_dispatch={"tp": 4e-5},
        exit_lag={("ring", 1): 5e-4, (None, 2): 6e-4},
    )
    assert CostModel.from_dict(json.loads(json.dumps(model.describe()))) == model
    old = {
        **{k: v for k, v in model.describe().items() if k != "corrections"},
        "compute": {
            "F": 1e-3,
            "ring:F": 2e-3,
            "send.issue": 2e-4,
            "wake.after_wait": 1e-4,
            "dispatch.between_actions": 3e-5,
            "tp:dispatch.between_actions": 4e-5,
            "ring:barrier.exit_lag@r1": 5e-4,
            "barrier.exit_lag@r2": 6e-4,
        },
    }
    assert set(old["collective_scale"]) == {
        "sendrecv",
        "builtin.all_reduce",
        "zero3:all_gather@64/4",
        "fp32/hand:async.all_reduce",
        "untimed.all_reduce",
    }
    assert CostModel.from_dict(old) == model
    with pytest.raises(ValueError, match="not a collective scale's key"):
        CostModel.from_dict({**old, "collective_scale": {"all_reduce@8/x": 1.0}})
