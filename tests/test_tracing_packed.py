"""Records shipped packed (runtime.engine.span_buffer): a launched rank sends Action indices
and clock readings, the parent makes the Spans, and they are the very Spans the rank
would have built itself; with PLAYGROUND_STREAM_BLOCKS a streamed run keeps every other
block of steps back, which benchmarks/ring_allreduce.py uses to time streamed and kept
steps of one run side by side.

The rank context is the real one, in this process, with no process group (as in
tests/test_tracing_buffer.py); the last test runs real ranks."""

from __future__ import annotations

from array import array

import pytest
from test_tracing_buffer import context

from runtime.engine import worker
from runtime.engine.span_buffer import PACKED, SpanBuffer, as_records, spans_of, unpack
from runtime.engine.worker import STREAM_BLOCKS_ENV, stream_blocks
from runtime.sim.program import Action
from runtime.sim.trace import Span


def actions(steps: int, per_step: int) -> list[Action]:
    return [
        Action(f"s{s}.a{i}", 0, "barrier" if i == 0 else "sendrecv", f"a{i}", step=s, bytes=64 * i)
        for s in range(steps)
        for i in range(per_step)
    ]


def test_a_packed_batch_unpacks_to_the_spans_take_builds() -> None:
    acts = actions(3, 4)
    stranger = Action("elsewhere", 0, "F", "made by the lesson", step=1)  # not in the table
    recorded = [*acts[:5], stranger, *acts[5:], stranger]
    t0 = 5_000_000_000
    times = [(t0 + 1_234_567 * k, t0 + 1_234_567 * k + 987_654 + k) for k in range(len(recorded))]
    by_take, by_pack = SpanBuffer(len(acts)), SpanBuffer(len(acts), acts)
    for action, (start, end) in zip(recorded, times, strict=True):
        by_take.add(action, start, end)
        by_pack.add(action, start, end)
    codes, raw_times, extra = by_pack.pack()
    assert extra == [stranger, stranger]  # only the Actions the parent cannot look up
    assert len(codes) == 8 * len(recorded) and len(raw_times) == 16 * len(recorded)
    # The same dicts, to the bit: the same integers and the same division.
    unpacked = [s.to_dict() for s in unpack(t0, (codes, raw_times, extra), acts)]
    assert unpacked == by_take.take(t0)
    assert len(by_pack) == 0 and by_pack.pack() == (b"", b"", [])


def test_unpack_refuses_a_batch_that_does_not_fit_the_ranks_actions() -> None:
    acts = actions(1, 2)
    times = array("q", [1, 2]).tobytes()
    for codes, raw in ((array("q", [2]), times), (array("q", [-1]), times), (array("q", [0]), b"")):
        with pytest.raises(ValueError):
            list(unpack(0, (codes.tobytes(), raw, []), acts))


def test_a_launched_rank_ships_packed_what_a_torchrun_rank_ships_as_dicts(monkeypatch) -> None:
    monkeypatch.setattr(worker, "STREAM_INTERVAL_S", 3600.0)  # one batch, at the flush
    acts = actions(3, 3)
    sent_dicts: list[tuple] = []
    sent_packed: list[tuple] = []
    by_dicts = context(acts, sent_dicts, packed=False)
    by_packed = context(acts, sent_packed, packed=True)
    for ctx in (by_dicts, by_packed):
        ctx.t0_ns = 1_000_000_000
        ctx.record(acts[0], 999_000_000, 1_000_500_000)  # before time zero moves
        ctx.t0_ns = 2_000_000_000  # failure-resume moves it: the record keeps the old zero
        ctx.sample("memory", 7.0)  # taken now: its time differs between the two contexts
        for k, action in enumerate(acts[1:]):
            ctx.record(action, 2_000_000_000 + 3_000 * k, 2_000_001_000 + 3_000 * k)
        ctx.flush()
    assert {m[0] for m in sent_packed} == {PACKED}
    rebuilt = [as_records(m, acts) for m in sent_packed]
    assert [m[:3] for m in rebuilt] == [m[:3] for m in sent_dicts]
    assert [[c["category"] for c in m[3]] for m in rebuilt] == [["memory"]]
    assert [[c["category"] for c in m[3]] for m in sent_dicts] == [["memory"]]
    # The record taken when time zero moved comes first, with its own zero.
    assert sent_packed[0][2] == [rebuilt[0][2][0]] and rebuilt[0][2][0]["end"] == 0.0005
    assert [s for m in sent_packed for s in spans_of(m, acts)] == [
        Span.from_dict(s) for m in sent_dicts for s in m[2]
    ]


def test_kept_blocks_ship_nothing_and_a_streamed_block_ships_what_waited(monkeypatch) -> None:
    """Blocks of 2 steps: steps 0-1 streamed, 2-3 kept, 4-5 streamed: nothing ships from
    the end of step 1 to the end of step 4, then all of it, once and in order."""
    monkeypatch.setattr(worker, "STREAM_INTERVAL_S", 0.0)
    acts = actions(6, 2)
    sent: list[tuple] = []
    ctx = context(acts, sent, packed=True, blocks=2)
    shipped: list[int] = []

    def count() -> int:
        return sum(len(m[5]) // 8 for m in sent)

    for step in range(6):
        ctx.execute([a for a in acts if a.step == step], lambda a: None)
        shipped.append(count())
    assert shipped == [2, 4, 4, 4, 10, 12]
    ctx.flush()
    assert [s.action_id for m in sent for s in spans_of(m, acts)] == [a.id for a in acts]


def test_a_batch_spanning_blocks_ships_only_at_the_ends_of_streamed_steps(monkeypatch) -> None:
    monkeypatch.setattr(worker, "STREAM_INTERVAL_S", 0.0)
    acts = actions(4, 3)
    sent: list[tuple] = []
    ctx = context(acts, sent, packed=True, blocks=1)  # steps 0 and 2 streamed
    before: dict[str, int] = {}
    ctx.execute(acts, lambda a: before.setdefault(a.id, sum(len(m[5]) // 8 for m in sent)))
    assert [before[f"s{s}.a0"] for s in range(4)] == [0, 3, 3, 9]
    ctx.flush()
    assert [s.action_id for m in sent for s in spans_of(m, acts)] == [a.id for a in acts]


def test_a_shipment_due_in_a_kept_block_is_skipped_not_saved_up(monkeypatch) -> None:
    """Streamed blocks ship on the clock a streamed run ships on: a batch due inside a
    kept block is skipped (its records wait), not sent as soon as the next block starts,
    so streamed steps see shipments neither more nor less often than in a streamed run."""
    clock = [0]
    monkeypatch.setattr(worker.time, "perf_counter_ns", lambda: clock[0])
    monkeypatch.setattr(worker, "STREAM_INTERVAL_S", 10.0)
    acts = actions(8, 1)

    def shipped_after_each_step(blocks: int) -> list[int]:
        sent: list[tuple] = []
        ctx = context(acts, sent, packed=True, blocks=blocks)
        out = []
        for step in range(8):
            clock[0] += 4_000_000_000  # each step takes 4 s of the fake clock
            ctx.execute([acts[step]], lambda a: None)
            out.append(sum(len(m[5]) // 8 for m in sent))
        return out

    clock[0] = 0
    assert shipped_after_each_step(0) == [0, 0, 3, 3, 3, 6, 6, 6]  # at 12 s and 24 s
    clock[0] = 0
    # Blocks of 2: due at 12 s (step 2, kept): skipped; at 24 s (step 5, streamed): sent.
    assert shipped_after_each_step(2) == [0, 0, 0, 0, 0, 6, 6, 6]


def test_the_block_length_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(STREAM_BLOCKS_ENV, raising=False)
    assert stream_blocks() == 0
    monkeypatch.setenv(STREAM_BLOCKS_ENV, " 6 ")
    assert stream_blocks() == 6
    for wrong in ("-2", "2.5", "six", "9" * 7):
        monkeypatch.setenv(STREAM_BLOCKS_ENV, wrong)
        with pytest.raises(ValueError, match=STREAM_BLOCKS_ENV):
            stream_blocks()


@pytest.mark.ranks
def test_a_real_run_gives_listeners_and_its_result_the_same_spans(monkeypatch) -> None:
    """Real ranks, streamed: a listener sees only `records` messages, and the Spans they
    carry are the run's own; a run with kept blocks has the same Spans' actions."""
    from playground import session

    raw = {"ranks": "2", "size": "64KiB", "repeat": "6"}
    heard: list[tuple] = []
    outcome = session.run("ring-allreduce", raw, hardware="cpu-default", on_message=heard.append)
    records = [m for m in heard if m[0] in ("records", PACKED)]
    assert records and {m[0] for m in records} == {"records"}

    def key(span: Span) -> tuple:
        return span.rank, span.action_id

    live = sorted((Span.from_dict(s) for m in records for s in m[2]), key=key)
    assert live == sorted(outcome.measured.spans, key=key)
    program = outcome.lesson.build(outcome.params)
    expected = sorted((a.rank, a.id) for a in program.actions())
    assert [key(s) for s in live] == expected
    monkeypatch.setenv(STREAM_BLOCKS_ENV, "3")
    blocks = session.run("ring-allreduce", raw, hardware="cpu-default")
    assert sorted(key(s) for s in blocks.measured.spans) == expected
