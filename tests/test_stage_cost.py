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
