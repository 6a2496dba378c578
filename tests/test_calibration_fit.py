"""runtime.fit.calibration's fit, on figures made up here (no ranks): a ring step is timed
as the lesson times an iteration, a busy collective may beat the formula, and a
block's time is fitted to its FLOPs and its activation elements apart. The lessons'
own rates, fitted by each lesson from its probes: tests/test_lesson_probes.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runtime.fit import calibration, calibration_busy, compute_fit, link_fit
from runtime.sim import compute, formulas


def test_ring_step_spans_first_rank_in_to_last_rank_out():
    # Two ranks, three repetitions of 4 steps each: [start, end, steps] per repetition.
    rank0 = [[0.0, 8.0, 4], [20.0, 28.0, 4], [40.0, 48.0, 4]]
    rank1 = [[1.0, 12.0, 4], [20.5, 28.5, 4], [41.0, 60.0, 4]]
    # Extents 12, 8.5, 20 over 4 steps: the median 12 / 4; each rank's own time
    # (8, 11 / 8, 8 / 8, 19) would miss the skew between them.
    assert link_fit.ring_step_time([rank0, rank1]) == pytest.approx(3.0)


def test_ring_step_needs_every_rank_for_every_repetition():
    with pytest.raises(ValueError):
        link_fit.ring_step_time([[[0.0, 1.0, 2]], [[0.0, 1.0, 2], [2.0, 3.0, 2]]])


def _busy(seconds: list[float]) -> list[dict]:
    return [{"busy_all_reduce": seconds}]


def test_busy_scale_is_measured_over_formula_and_may_be_below_one():
    alpha, beta, gamma = 1e-3, 1e-9, 1e-10
    formula = formulas.ring_all_reduce_time(4, calibration_busy.BUSY_BYTES, alpha, beta, gamma)
    faster = calibration_busy.busy_scale(_busy([0.5 * formula] * 3), 4, alpha, beta, gamma)
    slower = calibration_busy.busy_scale(_busy([2.0 * formula] * 3), 4, alpha, beta, gamma)
    assert faster == pytest.approx(0.5)
    assert slower == pytest.approx(2.0)
    floored = calibration_busy.busy_scale(_busy([1e-9]), 4, alpha, beta, gamma)
    assert floored == calibration_busy.MIN_SCALE
    assert calibration_busy.busy_scale([{}], 4, alpha, beta, gamma) == 1.0


def _block_samples(overhead: float, rate: float, per_element: float) -> list[tuple]:
    out = []
    for hidden, tokens, seq in calibration.BLOCK_SHAPES:
        flops, elements = compute.block_flops(tokens, hidden, seq), tokens * hidden
        out.append((flops, elements, overhead + flops / rate + elements * per_element))
    return out


def test_block_fit_recovers_flops_and_elementwise_apart():
    # A CPU-like block: matmuls near peak, a third of a hidden-64 block elementwise.
    overhead, rate, per_element = compute_fit.fit_block(_block_samples(3e-4, 170e9, 35e-9))
    assert overhead == pytest.approx(3e-4, rel=1e-6)
    assert rate == pytest.approx(170e9, rel=1e-6)
    assert per_element == pytest.approx(35e-9, rel=1e-6)
    # Then a block costs the three terms (ComputeRates.block_seconds).
    rates = replace(compute.TYPICAL_CPU, forward_overhead_s=overhead, forward_flops_per_s=rate)
    rates = replace(rates, forward_s_per_element=per_element)
    forward, _ = rates.block_seconds(2048, 64, 64)
    assert forward == pytest.approx(
        3e-4 + compute.block_flops(2048, 64, 64) / 170e9 + 2048 * 64 * 35e-9
    )


def test_block_fit_falls_back_to_flops_only_rather_than_a_negative_term():
    # Times that fall with the elements (noise, or a machine that got faster midway)
    # would fit a negative per-element cost: the FLOPs-only fit instead.
    skewed = _block_samples(3e-4, 50e9, -2e-9)
    assert all(t > 0 for _, _, t in skewed)
    overhead, rate, per_element = compute_fit.fit_block(skewed)
    assert per_element == 0.0
    assert (overhead, rate) == compute_fit.fit_rates([(f, t) for f, _, t in skewed])
    assert overhead >= 0 and rate > 0


def test_block_fit_of_flops_only_samples_has_no_elementwise_term():
    overhead, rate, per_element = compute_fit.fit_block(_block_samples(4e-4, 40e9, 0.0))
    assert per_element == pytest.approx(0.0, abs=1e-15)
    assert rate == pytest.approx(40e9, rel=1e-6)
    assert overhead == pytest.approx(4e-4, rel=1e-6)


def test_saving_drops_an_older_methods_entries_and_keeps_other_hosts(tmp_path, monkeypatch):
    """A bump of METHOD_VERSION leaves entries no lookup reads again: the next save drops
    them; another host's (a shared home) and this method's other world sizes stay."""
    import json

    from runtime.sim.profiles import PROFILES

    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path))
    model = PROFILES["cpu-default"]
    method = f"v{calibration.METHOD_VERSION}"
    stale = calibration.cache_key("gloo", 4).replace(method, "v1")
    other_host = calibration.cache_key("gloo", 4, host="elsewhere")
    two = calibration.cache_key("gloo", 2)
    calibration.cache_file().parent.mkdir(parents=True, exist_ok=True)
    calibration.cache_file().write_text(
        json.dumps({stale: model.describe(), other_host: model.describe(), two: model.describe()})
    )
    calibration.save(model, "gloo", 4)
    kept = set(json.loads(calibration.cache_file().read_text()))
    assert kept == {calibration.cache_key("gloo", 4), other_host, two}
    assert calibration.lookup("gloo", 4) is not None


def test_adam_fit_splits_elements_from_tensors():
    """An Adam step over one large tensor and one over many small ones give back the
    per-element and per-tensor costs they were made of; noise never makes one negative."""
    from runtime.fit.calibration import ADAM_LARGE, ADAM_SMALL, ADAM_TENSORS, fit_adam

    e, c = 3e-9, 25e-6
    large = ADAM_LARGE * e + c
    small = ADAM_TENSORS * (ADAM_SMALL * e + c)
    fitted = fit_adam(large, small)
    assert fitted["adam_s_per_element"] == pytest.approx(e)
    assert fitted["adam_s_per_tensor"] == pytest.approx(c)
    # Many small tensors timed cheaper than their elements: no per-tensor cost, not < 0.
    assert fit_adam(large, 1e-9)["adam_s_per_tensor"] == 0.0
    assert fit_adam(1e-9, small)["adam_s_per_element"] > 0  # a bandwidth is read off it


def test_adam_seconds_adds_a_cost_per_tensor():
    from runtime.sim.compute import TYPICAL_CPU

    one = TYPICAL_CPU.adam_seconds(1000)
    assert TYPICAL_CPU.adam_seconds(1000, 29) == pytest.approx(
        one + 28 * TYPICAL_CPU.adam_s_per_tensor
    )


def test_reduce_scatter_and_all_gather_are_scaled_by_their_own_half_of_the_busy_ring():
    alpha, beta, gamma = 1e-3, 1e-9, 1e-10
    rs = formulas.ring_reduce_scatter_time(4, calibration_busy.BUSY_BYTES, alpha, beta, gamma)
    ag = formulas.ring_all_gather_time(4, calibration_busy.BUSY_BYTES, alpha, beta)
    # The reduce-scatter half at 3x its formula, the all-gather half at 1.5x.
    took, half = 3.0 * rs + 1.5 * ag, 3.0 * rs
    results = [{"busy_all_reduce": [took] * 3, "busy_reduce_scatter": [half] * 3}]
    scales = calibration_busy.busy_ring_scales(results, 4, alpha, beta, gamma)
    assert scales["reduce_scatter"] == pytest.approx(3.0)
    assert scales["all_gather"] == pytest.approx(1.5)
    assert scales["all_reduce"] == pytest.approx(took / (rs + ag))
    # A result without the halves: every kind the whole's scale.
    older = calibration_busy.busy_ring_scales([{"busy_all_reduce": [took]}], 4, alpha, beta, gamma)
    assert older["reduce_scatter"] == older["all_gather"] == older["all_reduce"]


def test_torchs_all_gather_is_scaled_by_its_own_timing_not_its_all_reduces():
    alpha, beta = 1e-3, 1e-9
    ag = formulas.ring_all_gather_time(4, calibration_busy.BUSY_BYTES, alpha, beta)
    results = [
        {"busy_builtin_all_gather": [2.0 * ag, 2.5 * ag]},
        {"busy_builtin_all_gather": [3.0 * ag]},
    ]
    assert calibration_busy.busy_gather_scale(results, 4, alpha, beta, 0.7) == pytest.approx(2.5)
    # A result without it (an older calibration job): torch's all-reduce's scale.
    assert calibration_busy.busy_gather_scale([{}], 4, alpha, beta, 0.7) == 0.7
    floored = calibration_busy.busy_gather_scale(
        [{"busy_builtin_all_gather": [1e-12]}], 4, alpha, beta, 0.7
    )
    assert floored == calibration_busy.MIN_SCALE


PACES = [1.0, 0.8, 1.0, 1.0, 1.5, 1.0, 1.0, 1.0, 1.0]  # per repetition, every size alike


def _rank_results(alpha: float, beta: float) -> list[dict]:
    """Two ranks' results of a calibrate job, made up: ring steps of alpha + S·beta at
    each repetition's pace (rank 1 ends last), reductions and block timings."""
    assert len(PACES) == calibration.REPS
    results = []
    for rank in range(2):
        sendrecv = {}
        for size in link_fit.SIZES:
            step = alpha + size * beta
            rows, t = [], 0.0
            for pace in PACES:
                rows.append([t, t + 4 * step * pace * (1.0 if rank else 0.9), 4])
                t += 1.0
            sendrecv[str(size)] = rows
        # Each input's forward + backward: ten at the median, one 10% faster, one 30% slower.
        pairs = [1e-3] * 10 + [0.9e-3, 1.3e-3]
        blocks = [[h, tok, seq, 4e-4, 6e-4, pairs] for h, tok, seq in calibration.BLOCK_SHAPES]
        results.append(
            {
                "sendrecv": sendrecv,
                "reduce_s": [1e-3 * pace for pace in PACES],
                "blocks": blocks,
                "adam": [1e-3, 2e-3],
                "op_s": 5e-6,
                "wake": [2e-5, 1e-5],
                "probes": {},
            }
        )
    return results


def test_the_fit_records_its_spread_the_boot_and_the_load_it_ran_at():
    from runtime.fit import conditions

    alpha, beta = 2e-4, 1e-9
    model = calibration.fit(_rank_results(alpha, beta), "gloo", 2, load1=0.75)
    assert model.alpha == pytest.approx(alpha) and model.beta == pytest.approx(beta)
    recorded = conditions.of(model)
    assert recorded is not None and recorded.load1 == 0.75
    assert recorded.booted_at is None or recorded.booted_at <= recorded.calibrated_at
    # The links: the fastest and slowest repetition's pace; the compute: each input's.
    assert recorded.spread.communication == pytest.approx((0.8, 1.5))
    assert recorded.spread.compute == pytest.approx((0.9, 1.3))
    # Each link figure's range: alpha and beta fitted on the fastest and slowest
    # repetitions, gamma's fastest and slowest reduction.
    assert recorded.figures["alpha"] == pytest.approx((0.8 * alpha, 1.5 * alpha))
    assert recorded.figures["beta"] == pytest.approx((0.8 * beta, 1.5 * beta))
    gamma = 1e-3 / link_fit.REDUCE_BYTES
    assert recorded.figures["gamma"] == pytest.approx((0.8 * gamma, 1.5 * gamma))
    assert model.gamma == pytest.approx(gamma)
    # A block row without its inputs' timings (an older job): no compute spread.
    older = _rank_results(alpha, beta)
    for r in older:
        r["blocks"] = [row[:5] for row in r["blocks"]]
    assert calibration.compute_spread(older) == (1.0, 1.0)


def test_a_cached_calibration_keeps_its_conditions_and_an_older_one_still_loads(
    tmp_path, monkeypatch
):
    import json

    from runtime.fit import conditions

    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path))
    model = calibration.fit(_rank_results(2e-4, 1e-9), "gloo", 2, load1=0.75)
    calibration.save(model, "gloo", 2)
    back = calibration.lookup("gloo", 2)
    assert conditions.of(back) == conditions.of(model)
    assert conditions.ends(back) is not None
    # The same entry as written before the conditions were recorded: it loads, and its
    # interval is unknown (the before-run prediction then says so).
    data = json.loads(calibration.cache_file().read_text())
    for entry in data.values():
        del entry["details"]["conditions"]
    calibration.cache_file().write_text(json.dumps(data))
    older = calibration.lookup("gloo", 2)
    assert older is not None and older.alpha == back.alpha
    assert conditions.of(older) is None and conditions.ends(older) is None


def test_pace_and_sample_ranges_never_put_the_median_outside():
    from runtime.fit import conditions

    assert conditions.pace_range([]) == (1.0, 1.0)
    assert conditions.pace_range([[2.0, 4.0]] * 3) == (1.0, 1.0)
    fast, slow = conditions.pace_range([[1.0, 2.0], [2.0, 4.0], [1.5, 3.0]])
    assert (fast, slow) == pytest.approx((1 / 1.5, 2 / 1.5))
    assert conditions.sample_range([[1.0], []]) == (1.0, 1.0)  # nothing to spread
    assert conditions.sample_range([[1.0, 1.0, 1.2], [1.0, 0.5, 1.0]]) == pytest.approx((0.75, 1.1))
