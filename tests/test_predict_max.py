"""`predict` at every knob's predict maximum (issue 37, item 8): behaviour, never time.

- Every knob of every lesson, alone at its predict maximum (each choice of a choice
  knob): accepted, or refused with a ParamError naming a field (exit 2, one line);
  never another exception. The times are benchmarks/predict_max.py's.
- Mixed precision walks every bucket of every layer exactly: past MAX_PREDICT_LAYERS
  it refuses `layers` and says the limit; at the limit it predicts lumped, finite.
- The faster paths agree with the exact ones where both run: torch's bucket rule
  (buckets.assign's tight loop against the rule as written), the sweep's shared
  compute walk against its per-cap one, and the inference goodput curve's point at
  the lesson's rate (shared with the prediction) against the prediction's metric.
"""

from __future__ import annotations

import math
import random

import pytest

from runtime.sim.profiles import PROFILES
from scenarios.inference import predict as inference_predict
from scenarios.inference.goodput import predicted_goodput
from scenarios.inference.program import layout
from scenarios.mixed_precision import buckets, sweep
from scenarios.mixed_precision.params import MAX_PREDICT_LAYERS
from scenarios.mixed_precision.plan import variants
from scenarios.params import ParamError
from scenarios.registry import LESSONS, get_lesson


@pytest.mark.parametrize("name", list(LESSONS))
def test_every_knob_at_its_predict_maximum_is_accepted_or_refused_in_one_line(name):
    lesson = get_lesson(name)
    for field, knob in lesson.params.knobs():
        for value in knob.predict_extremes():
            try:
                params = lesson.params.parse({field: value}, "predict")
            except ParamError as refused:
                assert str(refused) and "\n" not in str(refused)
                continue
            assert params.values()[field] is not None


def test_mixed_precision_refuses_layers_past_its_predict_limit_and_says_it():
    lesson = get_lesson("mixed-precision")
    with pytest.raises(ParamError) as refused:
        lesson.params.parse({"layers": str(MAX_PREDICT_LAYERS + 1)}, "predict")
    assert refused.value.field == "layers"
    assert str(MAX_PREDICT_LAYERS) in str(refused.value)


def test_mixed_precision_at_its_layer_limit_predicts_lumped_and_finite():
    lesson = get_lesson("mixed-precision")
    params = lesson.params.parse({"layers": str(MAX_PREDICT_LAYERS)}, "predict")
    model = lesson.prepare_model(params, PROFILES["cpu-default"])
    timeline, metrics = lesson.predict(params, model)
    by_name = {(m.name, m.series): m for m in metrics}
    assert ("lumped", None) in by_name
    for v in variants(params):
        step = by_name[("step_s", v.series)].predicted
        assert step is not None and math.isfinite(step) and step > 0
    figures, _ = lesson.figures(params, model)
    assert all(math.isfinite(float(m.predicted)) for m in figures if m.predicted is not None)


def reference_assign(sizes, limits, order=None):
    """torch's rule as buckets.assign was first written (the exact path)."""
    walk = range(len(sizes)) if order is None else order
    out: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for index in walk:
        current.append(index)
        filled += sizes[index]
        if filled >= limits[min(len(out), len(limits) - 1)]:
            out.append(current)
            current, filled = [], 0
    if current:
        out.append(current)
    if order is None:
        out.sort(key=min)
    return out


def test_bucket_rule_fast_loop_equals_the_rule_as_written():
    rng = random.Random(37)
    for _ in range(200):
        sizes = [rng.choice((2, 128, 4096, 100_000)) for _ in range(rng.randint(1, 60))]
        limits = rng.choice(([rng.randint(1, 200_000)], [rng.randint(1, 9_000), 50_000]))
        order = rng.sample(range(len(sizes)), len(sizes)) if rng.random() < 0.5 else None
        assert buckets.assign(sizes, limits, order) == reference_assign(sizes, limits, order)


def test_sweep_shared_compute_walk_equals_the_per_cap_walk():
    lesson = get_lesson("mixed-precision")
    params = lesson.params.parse({"layers": "12", "precision": "fp16"}, "predict")
    model = lesson.prepare_model(params, PROFILES["cpu-default"])
    v = variants(params)[0]
    shared = sweep.compute_template(params, model, v)
    for cap in sweep.sweep_caps(params, v):
        assert sweep.step_seconds(params, model, v, cap, shared) == sweep.step_seconds(
            params, model, v, cap
        )


def test_goodput_point_at_the_lesson_rate_is_the_prediction_shared():
    lesson = get_lesson("inference")
    params = lesson.params.parse({}, "predict")
    model = lesson.prepare_model(params, PROFILES["h100-nvlink"])
    _, metrics = lesson.predict(params, model)  # lumped on a GPU profile
    assert any(m.name == "lumped" for m in metrics)
    shared = predicted_goodput(params, model, layout, lumpable=True)
    inference_predict._LAST.clear()  # planned again from nothing
    fresh = predicted_goodput(params, model, layout, lumpable=True)
    assert shared == fresh
    goodput = {m.series: m.predicted for m in metrics if m.name == "goodput_rps"}
    for mode, value in fresh.items():
        if mode in goodput:
            assert math.isclose(value, goodput[mode], rel_tol=1e-12)
