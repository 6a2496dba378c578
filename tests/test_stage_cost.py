"""StageCost (scenarios.inference.stagecost) is the step model's sums evaluated with
their constants hoisted: its seconds equal slice_seconds + tp_comm_seconds to the last
bit, for every kind of stage, device and Work."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.sim.profiles import PROFILES
from scenarios.inference.stagecost import StageCost
from scenarios.inference.stepmodel import (
    Device,
    Shape,
    Work,
    slice_seconds,
    tp_comm_seconds,
)

SHAPES = [
    Shape(layers=4, hidden=64, heads=4, kv_heads=4, head_dim=16, vocab=64, seq=64),
    Shape(
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        head_dim=128,
        vocab=128256,
        seq=8192,
        dtype_bytes=2,
        total_params=70 * 10**9,
    ),  # fmt: skip
]
DEVICES = {
    "cpu": Device.of(PROFILES["cpu-default"], gpu=False),
    "h100": Device.of(PROFILES["h100-nvlink"]),
}
works = st.builds(
    Work,
    tokens=st.integers(0, 4096),
    seqs=st.integers(0, 256),
    attn=st.integers(0, 10**8),
    kv=st.integers(0, 10**6),
    outs=st.integers(0, 256),
)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("device", DEVICES.values(), ids=DEVICES.keys())
@pytest.mark.parametrize("tp", [1, 2, 8, 16])
@pytest.mark.parametrize(
    ("embed", "head"), [(True, True), (True, False), (False, True), (False, False)]
)
@settings(max_examples=25, deadline=None)
@given(work=works, layers=st.integers(1, 80))
def test_stage_cost_is_the_step_models_sum_bit_for_bit(
    shape, device, tp, embed, head, work, layers
):
    expected = slice_seconds(shape, device, work, layers, embed=embed, head=head, tp=tp)
    expected += tp_comm_seconds(shape, device, work, layers, tp, head)
    assert StageCost(shape, device, layers, embed=embed, head=head, tp=tp)(work) == expected


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("device", DEVICES.values(), ids=DEVICES.keys())
@pytest.mark.parametrize("tp", [1, 2, 8])
@pytest.mark.parametrize(
    ("embed", "head"), [(True, True), (True, False), (False, True), (False, False)]
)
@settings(max_examples=15, deadline=None)
@given(
    seqs=st.integers(1, 256),
    context=st.integers(0, 10**6),
    layers=st.integers(1, 80),
    steps=st.lists(st.integers(0, 5000), min_size=1, max_size=8),
)
def test_a_decode_runs_seconds_are_each_iterations_own_bit_for_bit(
    shape, device, tp, embed, head, seqs, context, layers, steps
):
    """StageCost.decode: along a run of decode iterations (every sequence one more
    position each time) the seconds are those of the iteration's own Work."""
    cost = StageCost(shape, device, layers, embed=embed, head=head, tp=tp)
    first = Work(seqs, seqs, context + seqs, context + seqs, seqs)
    along = cost.decode(first, seqs)
    for j in steps:
        grown = first._replace(attn=first.attn + j * seqs, kv=first.kv + j * seqs)
        assert along(j) == cost(grown)
    # walk: the iterations back to back from a start, as adding each one's seconds
    t, chained = 0.25, []
    for j in range(len(steps)):
        chained += (t, t + along(j))
        t = chained[-1]
    assert along.walk(0.25, len(steps), float("inf")) == chained
    for m in range(len(steps)):  # none starts at `until` or later
        assert along.walk(0.25, len(steps), chained[2 * m]) == chained[: 2 * m]
