"""Tracing that does not disturb (runtime.engine.worker): a rank records each Span into a
buffer made before the run and ships its records only between steps, never between
two actions of one step; without streaming it keeps them all for the end.

The rank context here is the real one, in this process, with no process group: its
`emit` (the rank's pipe to the parent in a run) is a list, and the actions are run by
a plain handler, so what is shipped when can be seen action by action."""

from __future__ import annotations

import torch

from runtime.engine import worker
from runtime.engine.span_buffer import SpanBuffer
from runtime.engine.worker import RankContext
from runtime.sim.program import Action
from runtime.sim.simulate import span_for


def actions(steps: int, per_step: int) -> list[Action]:
    return [
        Action(f"s{s}.a{i}", 0, "barrier" if i == 0 else "F", f"F{i}", step=s)
        for s in range(steps)
        for i in range(per_step)
    ]


def context(
    acts: list[Action],
    sent: list[tuple],
    stream: bool = True,
    *,
    packed: bool = False,
    blocks: int = 0,
) -> RankContext[None]:
    """The real rank context in this process, with no process group: `sent` gets what it
    emits; `packed` as a launched rank ships, `blocks` as PLAYGROUND_STREAM_BLOCKS sets."""
    return RankContext(
        rank=0,
        world_size=1,
        params=None,
        actions=acts,
        backend="gloo",
        device=torch.device("cpu"),
        emit=sent.append,
        stream=stream,
        packed=packed,
        stream_blocks=blocks,
    )


def test_the_buffer_gives_back_each_record_as_the_span_the_action_makes() -> None:
    acts = actions(2, 3)
    buffer = SpanBuffer(len(acts))
    t0 = 1_000_000_000
    for k, action in enumerate(acts):
        buffer.add(action, t0 + 2_000_000 * k, t0 + 2_000_000 * k + 1_500_000)
    assert len(buffer) == 6
    spans = buffer.take(t0)
    assert spans == [
        span_for(a, 0.002 * k, 0.002 * k + 0.0015).to_dict() for k, a in enumerate(acts)
    ]
    assert len(buffer) == 0 and buffer.take(t0) == []


def test_the_buffer_grows_past_its_capacity_and_keeps_the_order() -> None:
    acts = actions(10, 5)  # 50 records into slots made for 16
    buffer = SpanBuffer(1)
    for k, action in enumerate(acts):
        buffer.add(action, k, k + 1)
    assert [s["action_id"] for s in buffer.take(0)] == [a.id for a in acts]


def test_records_ship_between_steps_never_between_two_actions_of_one(monkeypatch) -> None:
    monkeypatch.setattr(worker, "STREAM_INTERVAL_S", 0.0)  # every boundary is due
    acts = actions(3, 4)
    sent: list[tuple] = []
    ctx = context(acts, sent, stream=True)
    shipped_before: dict[str, int] = {}

    def handler(action: Action) -> None:
        shipped_before[action.id] = sum(len(m[2]) for m in sent)

    ctx.execute(acts, handler)
    # Within a step nothing ships; each step's first action finds the steps before shipped.
    for s in range(3):
        counts = {shipped_before[f"s{s}.a{i}"] for i in range(4)}
        assert counts == {4 * s}, f"step {s}: records shipped inside the step ({counts})"
    # The last step ships once the batch is done; every span exactly once, in order.
    assert [m[0] for m in sent] == ["records"] * 3
    ids = [span["action_id"] for m in sent for span in m[2]]
    assert ids == [a.id for a in acts]


def test_a_long_step_still_ships_now_and_then(monkeypatch) -> None:
    """A batch of one step (a pipeline schedule) ships at most every STEPLESS_INTERVAL_S."""
    monkeypatch.setattr(worker, "STEPLESS_INTERVAL_S", 0.0)
    acts = actions(1, 5)
    sent: list[tuple] = []
    ctx = context(acts, sent, stream=True)
    ctx.execute(acts, lambda a: None)
    assert len(sent) >= 2  # shipped inside the step, not all at the end
    ctx.flush()  # what run_rank does once the lesson's entry returns
    assert [s["action_id"] for m in sent for s in m[2]] == [a.id for a in acts]


def test_without_streaming_every_record_is_kept_for_the_end(monkeypatch) -> None:
    monkeypatch.setattr(worker, "STREAM_INTERVAL_S", 0.0)
    acts = actions(3, 2)
    sent: list[tuple] = []
    ctx = context(acts, sent, stream=False)
    ctx.execute(acts, lambda a: None)
    ctx.sample("memory", 5.0)
    ctx.flush()
    assert sent == []
    assert [s["action_id"] for s in ctx.spans] == [a.id for a in acts]
    assert [c["category"] for c in ctx.counters] == ["memory"]


def test_a_counter_sampled_inside_a_step_waits_for_its_end(monkeypatch) -> None:
    monkeypatch.setattr(worker, "STREAM_INTERVAL_S", 0.0)
    acts = actions(2, 3)
    sent: list[tuple] = []
    ctx = context(acts, sent, stream=True)
    shipped_counters: list[int] = []

    def handler(action: Action) -> None:
        ctx.sample("memory", 1.0)
        shipped_counters.append(sum(len(m[3]) for m in sent))

    ctx.execute(acts, handler)
    # Step 0's three samples ship at step 1's start, not as each is taken.
    assert shipped_counters == [0, 0, 0, 3, 3, 3]
    assert sum(len(m[3]) for m in sent) == 6


def test_records_taken_before_time_zero_moves_keep_their_zero() -> None:
    """A lesson may set time zero itself (failure-resume: the first attempt's); what was
    recorded before keeps the zero it was recorded under, as when spans were built at once."""
    acts = actions(1, 2)
    ctx = context(acts, [], stream=False)
    zero = ctx.t0_ns
    ctx.record(acts[0], zero + 1_000_000, zero + 2_000_000)
    ctx.t0_ns = zero + 10_000_000
    ctx.record(acts[1], zero + 12_000_000, zero + 13_000_000)
    ctx.flush()
    assert [(s["start"], s["end"]) for s in ctx.spans] == [(0.001, 0.002), (0.002, 0.003)]
