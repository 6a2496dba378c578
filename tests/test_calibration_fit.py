"""runtime.calibration's fit, on figures made up here (no ranks): a ring step is timed
as the lesson times an iteration, and a busy collective may beat the formula."""

from __future__ import annotations

import pytest

from runtime import calibration, formulas


def test_ring_step_spans_first_rank_in_to_last_rank_out():
    # Two ranks, three repetitions of 4 steps each: [start, end, steps] per repetition.
    rank0 = [[0.0, 8.0, 4], [20.0, 28.0, 4], [40.0, 48.0, 4]]
    rank1 = [[1.0, 12.0, 4], [20.5, 28.5, 4], [41.0, 60.0, 4]]
    # Extents 12, 8.5, 20 over 4 steps: the median 12 / 4; each rank's own time
    # (8, 11 / 8, 8 / 8, 19) would miss the skew between them.
    assert calibration.ring_step_time([rank0, rank1]) == pytest.approx(3.0)


def test_ring_step_needs_every_rank_for_every_repetition():
    with pytest.raises(ValueError):
        calibration.ring_step_time([[[0.0, 1.0, 2]], [[0.0, 1.0, 2], [2.0, 3.0, 2]]])


def _busy(seconds: list[float]) -> list[dict]:
    return [{"busy_all_reduce": seconds}]


def test_busy_scale_is_measured_over_formula_and_may_be_below_one():
    alpha, beta, gamma = 1e-3, 1e-9, 1e-10
    formula = formulas.ring_all_reduce_time(4, calibration.BUSY_BYTES, alpha, beta, gamma)
    faster = calibration.busy_scale(_busy([0.5 * formula] * 3), 4, alpha, beta, gamma)
    slower = calibration.busy_scale(_busy([2.0 * formula] * 3), 4, alpha, beta, gamma)
    assert faster == pytest.approx(0.5)
    assert slower == pytest.approx(2.0)
    floored = calibration.busy_scale(_busy([1e-9]), 4, alpha, beta, gamma)
    assert floored == calibration.MIN_SCALE
    assert calibration.busy_scale([{}], 4, alpha, beta, gamma) == 1.0


def test_parallel_overheads_are_the_difference_per_module():
    # Two ranks: [F, B under tensor parallelism, F, B of the same shard as plain Linears].
    rows = [[5e-3, 7e-3, 1e-3, 2e-3], [6e-3, 9e-3, 1e-3, 2e-3]]
    fitted = calibration.parallel_overheads(rows)
    assert fitted["parallel_forward_s"] == pytest.approx((5.5e-3 - 1e-3) / 2)
    assert fitted["parallel_backward_s"] == pytest.approx((8e-3 - 2e-3) / 2)
    assert calibration.parallel_overheads([[1e-3, 1e-3, 2e-3, 2e-3]]) == {
        "parallel_forward_s": 0.0,
        "parallel_backward_s": 0.0,
    }
    assert calibration.parallel_overheads([]) == {}  # one rank: the typical figures
