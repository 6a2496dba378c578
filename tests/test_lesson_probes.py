"""Each lesson's calibration probes and own rates (runtime.fit.calibration_probes), no ranks.

A lesson's `fit` turns its probes' samples (made up here, one row per rank) into its
rates record with the figures worked out by hand below; the calibration keeps them
under the lesson's name and the lesson reads them back; a profile of the older format
(every lesson's rates flat among the generic ones) is still read; a datasheet profile
derives them from its launch cost, as it always did.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from playground.saved_profile import ProfileDoc
from runtime.fit import calibration, calibration_probes
from runtime.sim.compute import TYPICAL_CPU, ComputeRates, LessonRates
from runtime.sim.costmodel import CostModel
from runtime.sim.profiles import PROFILES
from scenarios.failure_resume import rates as resume
from scenarios.mixed_precision import rates as mixed
from scenarios.pipeline import rates as pipeline
from scenarios.registry import LESSONS
from scenarios.tensor_parallel import rates as tp
from scenarios.zero import rates as zero


def close(fitted: LessonRates | None, expected: LessonRates) -> bool:
    """The same record, its figures equal to rounding (pytest.approx knows no dataclass)."""
    assert fitted is not None and type(fitted) is type(expected)
    return fitted.to_dict() == pytest.approx(expected.to_dict())


def test_zero_fits_fsdp2s_overheads_per_tensor():
    # Each rank's [tensors, F, B, opt under FSDP2, F, B, opt plain, first Adam's extra].
    rows = [
        [29.0, 0.030, 0.050, 0.0100, 0.001, 0.002, 0.0005, 0.29],
        [29.0, 0.032, 0.060, 0.0110, 0.001, 0.002, 0.0005, 0.58],
        [29.0, 0.040, 0.040, 0.0090, 0.001, 0.002, 0.0005, 0.29],
    ]
    fitted = zero.fit({"sharded": rows})
    assert close(fitted, zero.ZeroRates(0.031 / 29, 0.048 / 29, 0.0095 / 29, 0.01))
    # FSDP2 timed faster than plain (noise): no negative overhead.
    assert zero.fit({"sharded": [[29.0, 0, 0, 0, 1, 1, 1, -1]]}) == zero.ZeroRates(0, 0, 0, 0)
    assert zero.fit({"sharded": []}) is None  # nothing measured: the defaults stand


def test_tensor_parallel_fits_dtensors_dispatch_per_module():
    # Two ranks: [F, B under tensor parallelism, F, B of the same shard as plain Linears].
    rows = [[5e-3, 7e-3, 1e-3, 2e-3], [6e-3, 9e-3, 1e-3, 2e-3]]
    assert close(tp.fit({"parallelized": rows}), tp.TPRates(2.25e-3, 3e-3))
    assert tp.fit({"parallelized": [[1e-3, 1e-3, 2e-3, 2e-3]]}) == tp.TPRates(0.0, 0.0)
    assert tp.fit({"parallelized": []}) is None  # one rank: the typical figures


def test_pipeline_fits_the_split_backwards_fractions():
    # Each rank's [full backward, Bi, W] seconds; a row that timed nothing is left out.
    rows = [[10.0, 9.0, 4.0], [20.0, 16.0, 8.0], [10.0, 8.0, 5.0], [0.0, 1.0, 1.0]]
    fitted = pipeline.fit({"split": rows})
    assert close(fitted, pipeline.PipelineRates(0.8, 0.4))
    assert pipeline.fit({"split": []}) is None
    assert pipeline.PipelineRates() == pipeline.PipelineRates(0.5, 0.5)  # half each


def test_mixed_precision_fits_the_slowdowns_over_fp32():
    # Each rank's [fp32, fp16, bf16] seconds of one block's forward and backward.
    rows = [[1.0, 6.0, 5.0], [2.0, 10.0, 12.0], [1.0, 7.0, 4.0]]
    assert close(mixed.fit({"low_precision": rows}), mixed.MixedRates(6.0, 5.0))
    assert mixed.fit({"low_precision": []}) is None  # the lesson's own guess stands
    assert mixed.MixedRates() == mixed.MixedRates(None, None)


def test_failure_resume_fits_a_checkpoints_fixed_cost_and_bandwidth():
    # Rank 0's [seconds of next to no bytes, of CHECKPOINT_BYTES more], and its write rate.
    fitted = resume.fit({"disk": [4e8], "checkpoint": [[0.010, 0.015]]})
    assert close(fitted, resume.ResumeRates(2**20 / 0.005, 0.010))
    # Noise left no difference: the large write's bandwidth stands in for it.
    assert resume.fit({"disk": [4e8], "checkpoint": [[0.010, 0.009]]}) == resume.ResumeRates(
        4e8, 0.010
    )
    # The large write alone: its bandwidth, the fixed cost's guess.
    assert resume.fit({"disk": [4e8], "checkpoint": []}) == resume.ResumeRates(4e8, 5e-3)
    assert resume.fit({"disk": [], "checkpoint": []}) is None
    # Then a checkpoint costs its fixed part, then its bytes.
    rates = resume.ResumeRates(disk_bytes_per_s=1e8, checkpoint_s=0.01)
    assert rates.checkpoint_seconds(2e6) == pytest.approx(0.01 + 0.02)


def _rank_results(probes: dict[str, dict[str, object]], ranks: int) -> list[dict]:
    """What each rank's calibrate job returns under "probes" (rank 0 alone writes)."""
    out = []
    for rank in range(ranks):
        mine = {lesson: dict(samples) for lesson, samples in probes.items()}
        if rank:
            mine["failure-resume"] = {"disk": None, "checkpoint": None}
        out.append({"probes": mine})
    return out


def test_the_calibration_keeps_each_lessons_fit_under_its_name_and_the_lesson_reads_it():
    every = [lesson.hooks.probes for lesson in LESSONS.values() if lesson.hooks.probes]
    assert {p.lesson for p in every} == {
        "zero",
        "tensor-parallel",
        "pipeline",
        "mixed-precision",
        "failure-resume",
    }
    results = _rank_results(
        {
            "zero": {"sharded": [29.0, 0.03, 0.05, 0.01, 0.001, 0.002, 0.0005, 0.29]},
            "tensor-parallel": {"parallelized": None},  # one rank: nothing to time
            "pipeline": {"split": [10.0, 8.0, 4.0]},
            "mixed-precision": {"low_precision": []},  # no half-precision kernel
            "failure-resume": {"disk": 4e8, "checkpoint": [0.010, 0.015]},
        },
        ranks=2,
    )
    lessons = calibration_probes.fit_lessons(every, results)
    assert set(lessons) == {"zero", "pipeline", "failure-resume"}
    rates = ComputeRates(1e9, 1e9, 0, 0, 1e-9, lessons=lessons)
    assert zero.ZeroRates.of(rates).sharded_forward_s == pytest.approx(0.029 / 29)
    assert close(pipeline.PipelineRates.of(rates), pipeline.PipelineRates(0.8, 0.4))
    assert resume.ResumeRates.of(rates).checkpoint_s == 0.010
    assert tp.TPRates.of(rates) == tp.TPRates()  # not measured: the defaults
    assert mixed.MixedRates.of(rates) == mixed.MixedRates()
    # The job the ranks are handed: plain data, every probe of every lesson in turn.
    job = calibration_probes.job(every)
    assert ("zero", "sharded", "scenarios.zero.probes:sharded") in job
    assert len(job) == sum(len(p.probes) for p in every)
    # ... and the saved model reads back the same.
    back = CostModel.from_dict(
        json.loads(json.dumps(CostModel("m", 1, 1, 1, rates=rates).describe()))
    )
    assert back.rates is not None and back.rates.lessons == lessons


# What a calibrated profile's rates looked like before lessons kept their own.
OLDER = {
    "forward_flops_per_s": 4e10,
    "backward_flops_per_s": 4e10,
    "forward_overhead_s": 1.5e-4,
    "backward_overhead_s": 4e-4,
    "adam_s_per_element": 3e-9,
    "disk_bytes_per_s": 2.5e8,
    "checkpoint_s": 0.02,
    "sharded_forward_s": 1e-3,
    "sharded_backward_s": 2e-3,
    "sharded_adam_s": 3e-4,
    "sharded_first_adam_s": 4e-3,
    "parallel_forward_s": 5e-4,
    "parallel_backward_s": 6e-4,
    "split_input_fraction": 0.9,
    "split_weight_fraction": 0.4,
    "fp16_slowdown": 7.0,
    "bf16_slowdown": None,
    "source": "calibrated before",
}


def _read_back(rates: ComputeRates) -> tuple:
    return (
        zero.ZeroRates.of(rates),
        tp.TPRates.of(rates),
        pipeline.PipelineRates.of(rates),
        mixed.MixedRates.of(rates),
        resume.ResumeRates.of(rates),
    )


def test_a_profile_of_the_older_format_gives_each_lesson_the_rates_it_held():
    expected = (
        zero.ZeroRates(1e-3, 2e-3, 3e-4, 4e-3),
        tp.TPRates(5e-4, 6e-4),
        pipeline.PipelineRates(0.9, 0.4),
        mixed.MixedRates(7.0, None),
        resume.ResumeRates(2.5e8, 0.02),
    )
    # As the calibration cache holds it (runtime.fit.calibration.lookup) ...
    rates = ComputeRates.from_dict(OLDER)
    assert rates.forward_overhead_s == 1.5e-4 and rates.lessons == {}
    assert _read_back(rates) == expected
    # ... and as a saved run's profile, through its schema (playground.saved_profile).
    doc = {"name": "old", "alpha": 1e-5, "beta": 1e-9, "gamma": 1e-10, "rates": OLDER}
    decoded = msgspec.json.decode(json.dumps(doc), type=ProfileDoc)
    model = CostModel.from_dict(msgspec.to_builtins(decoded))
    assert model.rates is not None and _read_back(model.rates) == expected
    # A profile of the new format goes through the schema whole.
    saved = CostModel("new", 1e-5, 1e-9, 1e-10, rates=TYPICAL_CPU.with_lesson(expected[0]))
    decoded = msgspec.json.decode(json.dumps(saved.describe()), type=ProfileDoc)
    again = CostModel.from_dict(msgspec.to_builtins(decoded))
    assert again.rates is not None and zero.ZeroRates.of(again.rates) == expected[0]


def test_a_saved_lesson_rate_out_of_bounds_is_refused_by_the_schema():
    doc = {"name": "x", "alpha": 0, "beta": 0, "gamma": 0, "rates": {**OLDER, "lessons": {}}}
    doc["rates"]["lessons"] = {"zero": {"sharded_forward_s": -1.0}}
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(json.dumps(doc), type=ProfileDoc)


def test_a_datasheet_profile_derives_the_lessons_rates_from_its_launch_cost():
    # The H100's datasheet rates: a kernel launch of 5 µs, an NVMe disk at 2 GB/s.
    rates = PROFILES["h100-nvlink"].rates
    assert rates is not None and rates.op_s == 5e-6
    assert _read_back(rates) == (
        zero.ZeroRates(2e-5, 4e-5, 1e-5, 5e-3),
        tp.TPRates(2e-5, 4e-5),
        pipeline.PipelineRates(0.5, 0.5),
        mixed.MixedRates(None, None),
        resume.ResumeRates(2e9, 5e-3),
    )
    # An uncalibrated CPU's (and no rates at all): the records' defaults.
    assert _read_back(TYPICAL_CPU) == (
        zero.ZeroRates(3e-4, 3e-4, 1.5e-4, 5e-3),
        tp.TPRates(3e-4, 3e-4),
        pipeline.PipelineRates(0.5, 0.5),
        mixed.MixedRates(None, None),
        resume.ResumeRates(5e8, 5e-3),
    )
    assert zero.ZeroRates.of(None) == zero.ZeroRates()


def test_fit_compute_hands_each_lesson_its_samples():
    """runtime.fit.calibration.fit_compute: the generic rates, and the lessons' own from
    the probes it is handed (none: no lesson's)."""
    block = [[h, t, s, 1e-3, 2e-3] for h, t, s in calibration.BLOCK_SHAPES]
    ranks = [
        {"blocks": block, "adam": [1e-3, 2e-3], "op_s": 5e-6, "probes": {}},
        {
            "blocks": block,
            "adam": [1e-3, 2e-3],
            "op_s": 7e-6,
            "probes": {"pipeline": {"split": [10.0, 8.0, 4.0]}},
        },
    ]
    without = calibration.fit_compute(ranks)
    assert without.lessons == {} and without.op_s == pytest.approx(6e-6)
    fitted = calibration.fit_compute(ranks, [pipeline.PROBES, zero.PROBES])
    assert fitted.lessons == {
        "pipeline": {"split_input_fraction": 0.8, "split_weight_fraction": 0.4}
    }
    assert "pipeline" in fitted.source
