"""Timeline JSON round-trip, unit parsing, fault specs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.engine.faults import parse_fault
from runtime.sim.trace import Counter, Mark, Span, Timeline
from runtime.sim.units import format_bytes, parse_bytes, parse_duration

optional_int = st.none() | st.integers(min_value=0, max_value=10**9)
spans = st.builds(
    Span,
    rank=st.integers(0, 4095),
    kind=st.sampled_from(["F", "B", "sendrecv", "all_reduce"]),
    label=st.text(max_size=20),
    start=st.floats(0, 1e6, allow_nan=False),
    end=st.floats(0, 1e6, allow_nan=False),
    action_id=st.none() | st.text(min_size=1, max_size=12),
    stage=optional_int,
    microbatch=optional_int,
    chunk=optional_int,
    step=optional_int,
    bytes=optional_int,
    peer=optional_int,
)


@given(st.lists(spans, max_size=20))
def test_timeline_round_trips_through_json(span_list: list[Span]) -> None:
    timeline = Timeline(
        span_list,
        [Counter(0, "params", 0.5, 1024.0)],
        [Mark(1.0, "failure", "rank 1 killed", rank=1), Mark(2.0, "restart", "restart")],
    )
    assert Timeline.from_json(timeline.to_json()) == timeline


def test_span_dict_omits_absent_fields() -> None:
    assert Span(0, "F", "F0", 0.0, 1.0).to_dict() == {
        "rank": 0,
        "kind": "F",
        "label": "F0",
        "start": 0.0,
        "end": 1.0,
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4MiB", 4 * 2**20),
        ("64KiB", 65536),
        ("1000", 1000),
        ("1.5GB", 1_500_000_000),
        ("2 KiB", 2048),
    ],
)
def test_parse_bytes(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["abc", "-1", "4 parsecs", "", "1.5"])
def test_parse_bytes_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="size|whole"):
        parse_bytes(text)


def test_parse_duration() -> None:
    assert parse_duration("0.5s") == 0.5
    assert parse_duration("300ms") == pytest.approx(0.3)
    assert parse_duration("3h") == 10800
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")


def test_format_bytes() -> None:
    assert format_bytes(6 * 2**20) == "6 MiB"
    assert format_bytes(2**40) == "1 TiB"


def test_parse_fault() -> None:
    fault = parse_fault("kill:rank=2,after=0.3s", 4)
    assert (fault.kind, fault.rank, fault.after_s) == ("kill", 2, 0.3)
    assert parse_fault("hang:rank=0,after=1s", 2).kind == "hang"


@pytest.mark.parametrize(
    "spec",
    [
        "kill",
        "kill:rank",
        "kill:rank=9,after=1s",
        "explode:rank=1,after=1s",
        "kill:rank=1",
        "kill:rank=x,after=1s",
        "kill:rank=1,after=soon",
        "kill:rank=1,after=1s,extra=2",
    ],
)
def test_parse_fault_rejects(spec: str) -> None:
    with pytest.raises(ValueError, match="fault"):
        parse_fault(spec, 4)
