"""Lesson 6 end to end: the hand-written loss scaler against torch's GradScaler, the bucket
assignment against torch's DDP rule, the number formats against torch's casts, the
simulator's overlapped all-reduces, bad params exiting 2 with one line, predict without
torch at any size, and two real gloo ranks training every precision by hand and by torch.

Tests that start ranks are marked `ranks` (`pytest -m "not ranks"` skips them)."""

from __future__ import annotations

import math
import sys

import pytest
import torch
import torch.distributed as dist
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import playground, predict_without_torch

from playground import session
from playground.outcome import Outcome
from runtime.engine.models import GPTConfig, MiniGPT, batch
from runtime.sim.costmodel import CostModel
from runtime.sim.simulate import simulate
from scenarios.metrics import Metric
from scenarios.mixed_precision import buckets, formats, sweep, timing
from scenarios.mixed_precision.lesson import LESSON
from scenarios.mixed_precision.plan import build, variants
from scenarios.mixed_precision.scaler import INIT_SCALE, DynamicLossScaler
from scenarios.params import ParamError
from scenarios.shape import GPTShape

KiB, MiB = 1024, 2**20


def get(metrics: list[Metric], name: str, series: str | None = None) -> Metric:
    found = [m for m in metrics if m.name == name and m.series == series and m.category is None]
    assert len(found) == 1, (name, series, len(found))
    return found[0]


# -- the scaler ----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    pattern=st.lists(st.booleans(), min_size=1, max_size=40),
    growth=st.integers(1, 5),
)
def test_scaler_rule_equals_gradscaler(pattern, growth):
    """Over a random overflow pattern: the same scale after every step, the same skips."""
    hand = DynamicLossScaler(growth_interval=growth)
    scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE, growth_interval=growth)
    param = torch.zeros(4, requires_grad=True)
    optimizer = torch.optim.SGD([param], lr=0.0)
    scaler.scale(torch.ones(()))
    torch_skips = []
    for k, overflow in enumerate(pattern, 1):
        param.grad = torch.full((4,), math.inf if overflow else 1.0)
        scaler.unscale_(optimizer)
        found = sum(v.item() for v in scaler._found_inf_per_device(optimizer).values())
        scaler.step(optimizer)
        scaler.update()
        if found:
            torch_skips.append(k)
        assert hand.update(overflow) == bool(found)
        assert hand.scale == scaler.get_scale()
    assert hand.skipped == torch_skips


def test_scaler_backs_off_to_zero_and_stays():
    hand = DynamicLossScaler(scale=1.0, growth_interval=1)
    for _ in range(200):
        hand.update(True)
    assert hand.scale == 0.0 and hand.inverse == math.inf
    hand.update(False)
    assert hand.scale == 0.0


# -- buckets ---------------------------------------------------------------------------------

SHAPES = [
    GPTShape(layers=4, hidden=64, heads=4, seq=32, vocab=128),
    GPTShape(layers=2, hidden=32, heads=2, seq=16, vocab=64),
    GPTShape(layers=6, hidden=48, heads=4, seq=24, vocab=96),
]
CAPS = [(KiB, 0), (16 * KiB, 0), (64 * KiB, 0), (64 * KiB, 8 * KiB), (256 * KiB, 0), (25 * MiB, 0)]


def model_of(shape: GPTShape, dtype: torch.dtype = torch.float16) -> MiniGPT:
    return MiniGPT(GPTConfig.from_shape(shape)).to(dtype)


@pytest.mark.parametrize("shape", SHAPES)
def test_params_and_ready_order_are_the_minigpts(shape):
    """Names in construction order, and the order autograd readies the gradients in."""
    model = model_of(shape, torch.float32)
    assert [n for n, _ in model.named_parameters()] == [p.name for p in buckets.gpt_params(shape)]
    assert [p.numel() for p in model.parameters()] == [p.numel for p in buckets.gpt_params(shape)]
    seen: list[int] = []
    for i, p in enumerate(model.parameters()):
        p.register_post_accumulate_grad_hook(lambda _p, i=i: seen.append(i))
    model(*batch(GPTConfig.from_shape(shape), 2)).backward()
    assert seen == buckets.ready_order(shape.layers)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("cap", "first"), CAPS)
def test_bucket_assignment_equals_torchs(shape, cap, first):
    """torch's own C++ rule (the one DDP's Reducer calls), initial and rebuilt."""
    tensors = list(model_of(shape).parameters())
    sizes = [t.numel() * t.element_size() for t in tensors]
    limits = buckets.limits(cap, first)
    order = buckets.ready_order(shape.layers)
    # torch takes the tensors in the order walked, each with its index (Reducer's rebuild)
    in_order = [tensors[i] for i in order]
    want, _ = dist._compute_bucket_assignment_by_size(
        in_order, limits, [False] * len(tensors), order
    )
    assert buckets.rebuilt_buckets(sizes, order, cap, first) == [list(b) for b in want]
    initial = [limits] if first else [[sys.maxsize]]
    want0, _ = dist._compute_bucket_assignment_by_size(tensors, initial[0], [False] * len(tensors))
    assert buckets.initial_buckets(sizes, cap, first) == [list(b) for b in reversed(want0)]


def test_one_bucket_above_the_models_size():
    shape = SHAPES[0]
    plan = buckets.plan(shape, 2, 25 * MiB, 0)
    assert plan[0] == plan[2] == [2 * shape.parameters]  # one bucket, launched after emb
    assert plan[3] == [shape.layers + 1]


# -- formats -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_formats_match_finfo(fmt):
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[fmt]
    info, spec = torch.finfo(dtype), formats.FORMATS[fmt]
    assert (spec.max, spec.smallest_normal, spec.eps) == (info.max, info.tiny, info.eps)
    assert spec.smallest_subnormal == info.tiny * info.eps  # 2^-24, 2^-133


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, width=64))
def test_rounding_matches_torchs_casts(value):
    for fmt, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        want = torch.tensor(value, dtype=torch.float32).to(dtype).item()
        assert formats.stored(formats.stored(value, "fp32"), fmt) == want


def test_classify():
    assert formats.classify(1e5, "fp16") == "overflow"
    assert formats.classify(1e-8, "fp16") == "underflow"
    assert formats.classify(1e-5, "fp16") == "subnormal"
    assert formats.classify(1e-5, "bf16") == "normal"
    assert formats.classify(0.5, "fp16") == "exact"


# -- the Program, the simulator, predict ---------------------------------------------------------


def params_of(**raw: str):
    return LESSON.parse({"ranks": "2", "steps": "3", **raw}, "predict")


def test_one_bucket_means_no_predicted_overlap_and_small_buckets_some():
    model = CostModel("t", alpha=1e-4, beta=1e-9, gamma=0.0, compute={})
    for cap, overlapped in (("25MiB", False), ("64KiB", True)):
        params = params_of(bucket_cap=cap, precision="fp16", implementation="hand")
        model = LESSON.prepare_model(params, model)
        predicted = simulate(build(params), model)
        fraction = timing.overlap_fraction(predicted, "fp16/hand")
        assert (fraction > 0.1) if overlapped else fraction == 0.0


def test_low_precision_compute_before_a_run_is_the_calibrated_slowdown():
    """On a CPU, fp16's and bf16's forward and backward cost fp32's times what calibrate
    measured; without a calibrated figure, the lesson's guess."""
    from dataclasses import replace

    from runtime.sim.compute import TYPICAL_CPU
    from scenarios.mixed_precision.lesson import CPU_LOW_PRECISION, estimate

    params = LESSON.parse({"implementation": "hand"}, "predict")
    base = CostModel("cpu", 1e-5, 1e-9, 1e-10, rates=TYPICAL_CPU)
    guessed = estimate(params, base).compute
    assert guessed["F.fp16/hand"] == pytest.approx(CPU_LOW_PRECISION * guessed["F.fp32/hand"])
    from scenarios.mixed_precision.rates import MixedRates  # the lesson's own rates

    rates = TYPICAL_CPU.with_lesson(MixedRates(fp16_slowdown=7.0, bf16_slowdown=6.0))
    measured = estimate(params, replace(base, rates=rates)).compute
    assert measured["F.fp16/hand"] == pytest.approx(7.0 * measured["F.fp32/hand"])
    assert measured["B.bf16/hand.block"] == pytest.approx(6.0 * measured["B.fp32/hand.block"])


def test_a_bucket_before_a_run_is_torchs_all_reduce_between_computes():
    """A DDP bucket's all-reduce runs while its rank computes: before a run it takes the
    scale calibrate timed for torch's all-reduce between computes; a run's own timing of
    the series' buckets replaces it."""
    from dataclasses import replace

    from runtime.sim.corrections import ScaleKey
    from runtime.sim.effects import NONBLOCKING
    from runtime.sim.program import Action

    bucket = Action("b@r0", 0, "all_reduce", group=(0, 1), bytes=2**16, algorithm="builtin",
                    series="fp32/hand", effects=NONBLOCKING)  # fmt: skip
    model = CostModel("cpu", 1e-4, 1e-9, 1e-10)
    formula = model.collective_formula(bucket)
    assert model.collective_time(bucket) == pytest.approx(formula)
    calibrated = ScaleKey("all_reduce", builtin=True)
    busy = replace(model, collective_scale={calibrated: 1.5})
    assert busy.collective_time(bucket) == pytest.approx(1.5 * formula)
    own = ScaleKey("all_reduce", series="fp32/hand", timing="async")
    ran = replace(busy, collective_scale={calibrated: 1.5, own: 3.0})
    assert ran.collective_time(bucket) == pytest.approx(3.0 * formula)


def test_lumped_step_equals_the_full_simulation():
    """One rank's closed form (sweep.one_step) against every rank simulated."""
    params = params_of(bucket_cap="16KiB")
    model = LESSON.prepare_model(params, CostModel("t", 1e-4, 1e-9, 0.0, {}))
    predicted = simulate(build(params), model)
    for v in variants(params):
        spans, comm = sweep.one_step(params, model, v, 2, 0.0)
        assert math.isclose(
            max(s.end for s in spans), timing.step_s(predicted, v.series), rel_tol=1e-9
        )
        # the sweep's span-free walk of the same step
        compute = sum(s.duration for s in spans if s.kind not in ("all_reduce", "wait"))
        fast = sweep.step_seconds(params, model, v, params.bucket_cap)
        assert math.isclose(fast[0], max(s.end for s in spans), rel_tol=1e-9)
        assert math.isclose(fast[1], compute + comm, rel_tol=1e-9)


def test_step_is_the_mean_period_of_the_steady_steps():
    """step_s: from the last end of step 1 to the last end of the last step, per step
    (a slow step and the ranks' start skew weigh as they do in the spans' sums the
    prediction after a run is built from); with no step before the steady ones, the
    median step from its first start to its last end."""
    from runtime.sim.trace import Span, Timeline

    def span(rank: int, step: int, start: float, end: float) -> Span:
        return Span(rank, "F", "", start, end, series="fp16/hand", step=step)

    ends = (0.0, 10.0, 20.0, 50.0, 60.0)  # step 3 slow: 30
    spans = [span(r, k, ends[k - 1] - r, ends[k]) for k in range(1, 5) for r in (0, 1)]
    assert timing.step_s(Timeline(spans), "fp16/hand") == pytest.approx((60 - 10) / 3)
    two = [span(0, 0, 0.0, 4.0), span(1, 1, 4.0, 6.0), span(0, 1, 5.0, 9.0)]
    assert timing.step_s(Timeline(two), "fp16/hand") == pytest.approx(4.5)  # median of 4, 5


def test_predict_at_scale_without_torch():
    doc = predict_without_torch(
        "mixed-precision", "-p", "ranks=1048576", "-p", "steps=1000000", "-p", "layers=48",
        "-p", "hidden=4096", "-p", "heads=32", "-p", "seq=2048", "-p", "vocab=50304",
        "-p", "bucket_cap=25MiB", "--hardware", "h100-nvlink",
    )  # fmt: skip
    m = [Metric.from_dict(x) for x in doc["metrics"]]
    assert get(m, "best_bucket_cap", "fp16/hand").predicted > 0
    assert doc["curves"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["predict", "mixed-precision", "-p", "precision=fp8"], "precision"),
        (["predict", "mixed-precision", "-p", "bucket_cap=12"], "bucket_cap"),
        (["predict", "mixed-precision", "-p", "bucket_cap=abc"], "bucket_cap"),
        (["predict", "mixed-precision", "-p", "first_bucket_cap=1MiB"], "first_bucket_cap"),
        (["predict", "mixed-precision", "-p", "growth_interval=0"], "growth_interval"),
        (["predict", "mixed-precision", "-p", "implementation=apex"], "implementation"),
        (["run", "mixed-precision", "-p", "precision=fp32", "--fault", "overflow:step=1"], "fp16"),
        (["run", "mixed-precision", "--fault", "overflow:step=99"], "step"),
        (["run", "mixed-precision", "--ranks", "16"], "ranks"),
    ],
)
def test_bad_params_exit_2(args, needle):
    out = playground(*args)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_param_errors_name_their_field():
    with pytest.raises(ParamError) as caught:
        LESSON.parse({"first_bucket_cap": "1MiB", "bucket_cap": "64KiB"}, "predict")
    assert caught.value.field == "first_bucket_cap"


# -- the real run ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_ranks() -> Outcome:
    """Every precision by hand and by torch on 2 gloo ranks, an overflow at step 2."""
    return session.run(
        "mixed-precision",
        {"ranks": "2", "steps": "4", "growth_interval": "2", "bucket_cap": "64KiB"},
        hardware="cpu-default",
        faults=["overflow:step=2"],
    )


@pytest.mark.ranks
def test_hand_equals_torch_on_real_ranks(two_ranks):
    m = two_ranks.metrics
    assert get(m, "scaler_equals_torch").value is True
    assert get(m, "buckets_equal_torch").value is True
    assert get(m, "max_grad_diff_vs_torch").value <= 1e-6
    for series in ("fp16/hand", "fp16/torch"):
        assert get(m, "skipped_steps", series).value == [2]
        assert get(m, "skips_same_on_every_rank", series).value is True
        assert get(m, "scale_trace", series).value == [INIT_SCALE, INIT_SCALE / 2] + [
            INIT_SCALE / 2,
            INIT_SCALE,
        ]
    for v in ("fp32/hand", "bf16/torch"):
        assert get(m, "comm_overlap_fraction", v).value > 0
        assert get(m, "bucket_sizes_bytes", v).value == get(m, "bucket_sizes_bytes", v).predicted
    assert get(m, "memory_bytes_per_param", "fp16/hand").value == 16.0
    assert get(m, "underflow_fraction_unscaled").value >= get(m, "underflow_fraction_scaled").value
    assert any(mark.kind == "skip" for mark in two_ranks.measured.marks)


def test_overlapping_all_reduces_get_a_communication_lane():
    """The HTML timeline (and the app's Gantt, by the same rule) draws the buckets that run
    under backward on a lane beneath the rank; blocking collectives stay on the rank's row."""
    from playground.export.timeline import comm_lane

    params = params_of(precision="fp16", implementation="hand")
    model = LESSON.prepare_model(params, CostModel("t", 1e-4, 1e-9, 0.0, {}))
    predicted = simulate(build(params), model)
    lane = comm_lane(predicted.spans)
    steady = [s for s in predicted.spans if s.kind == "all_reduce" and s.step == 2]
    assert steady and all(id(s) in lane for s in steady)
    assert all(s.kind == "all_reduce" for s in predicted.spans if id(s) in lane)
    ring = session.predict("ring-allreduce", {"ranks": "4"}, hardware="cpu-default")
    assert not comm_lane(ring.predicted.spans)


def test_simulator_overlaps_nonblocking_collectives_and_waits_for_them():
    """runtime.sim.simulate's non-blocking collectives: launched, the rank goes on; they run one
    after another on the rank's stream, from the last member's launch; `wait` ends with
    the last; a launch some member never makes is a deadlock, and an unwaited one refused."""
    from runtime.sim.effects import NONBLOCKING
    from runtime.sim.program import Action, Program, ProgramError
    from runtime.sim.simulate import DeadlockError

    model = CostModel("t", alpha=0.5, beta=0.0, gamma=0.0, compute={"c": 1.0, "slow": 3.0})
    group = (0, 1)

    def rank(r: int, first: str) -> list[Action]:
        ar = {"kind": "all_reduce", "bytes": 8, "group": group, "algorithm": "builtin",
              "effects": NONBLOCKING}  # fmt: skip
        return [
            Action(f"a{r}", r, "B", cost_key=first),
            Action(f"ar0@{r}", r, **ar),  # type: ignore[arg-type]
            Action(f"b{r}", r, "B", cost_key="c"),
            Action(f"ar1@{r}", r, **ar),  # type: ignore[arg-type]
            Action(f"w{r}", r, "wait"),
            Action(f"o{r}", r, "opt", cost_key="c"),
        ]

    program = Program(2)
    program.extend([*rank(0, "c"), *rank(1, "slow")])
    spans = {s.action_id: s for s in simulate(program, model).spans}
    # the ring of 2 ranks: 2 steps of alpha = 1 s each all-reduce
    assert (spans["ar0@0"].start, spans["ar0@0"].end) == (1.0, 4.0)  # waits for rank 1 (t=3)
    assert (spans["b0"].start, spans["b0"].end) == (1.0, 2.0)  # overlapped with it
    assert spans["ar1@0"].end == 5.0 and spans["w0"].end == 5.0 and spans["o0"].end == 6.0
    assert spans["ar1@1"].end == 5.0 and spans["w1"].start == 4.0 and spans["w1"].end == 5.0

    lonely = Program(2)
    lonely.extend([rank(0, "c")[1], rank(0, "c")[4], Action("w1", 1, "wait")])
    with pytest.raises(DeadlockError):
        simulate(lonely, model)
    unwaited = Program(2)
    unwaited.extend([rank(0, "c")[1], rank(1, "c")[1]])
    with pytest.raises(ProgramError, match="never waited"):
        unwaited.validate()


def test_default_value_shows_the_formats_apart():
    """At the explorer's default fp16 and bf16 store different numbers (and classes):
    at the old 1e-5 both stored 1.0014e-05, fp16's subnormal step (2^-24) being bf16's
    step there, so the metrics read alike."""
    value = LESSON.parse({}, "predict").value
    fp16, bf16 = formats.stored(value, "fp16"), formats.stored(value, "bf16")
    assert f"{fp16:.4g}" != f"{bf16:.4g}"  # as the metrics print them
    assert (formats.classify(value, "fp16"), formats.classify(value, "bf16")) == (
        "subnormal",
        "normal",
    )
    assert formats.stored(1e-5, "fp16") == formats.stored(1e-5, "bf16")
