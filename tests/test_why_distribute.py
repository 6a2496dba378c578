"""Lesson 0, why distribute: the diagnosis, the planner's memory and time accounting against
hand-computed cases, the lesson's predict and bad input, and (ranks) the real demonstration."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace

import pytest
from cli_server import run_cli

from playground import session
from playground.outcome import Outcome
from runtime.sim.formulas import ring_all_reduce_time
from runtime.sim.simulate import simulate
from scenarios.metrics import Metric
from scenarios.registry import get_lesson
from scenarios.why_distribute import costs, demo, planner
from scenarios.why_distribute.costs import Problem
from scenarios.why_distribute.diagnosis import diagnose
from scenarios.why_distribute.efficiency import GEMM_PEAK, Kernels
from scenarios.why_distribute.footprint import (
    Layout,
    inference_bytes,
    shape_for,
    training_bytes,
)
from scenarios.why_distribute.gpus import gpu_named
from scenarios.why_distribute.model import Model
from scenarios.why_distribute.phrases import _phrases

LESSON = get_lesson("why-distribute")
GB = 1e9


def predict(**raw: str) -> list[Metric]:
    return session.predict("why-distribute", raw).metrics


def value(metrics: list[Metric], name: str, series: str | None = None) -> object:
    for m in metrics:
        if m.name == name and m.series == series:
            return m.value if m.value is not None else m.predicted
    raise KeyError(name)


def spanish(metrics: list[Metric], name: str, series: str | None = None) -> object:
    """What a Spanish-speaking learner reads: the metric's Spanish twin."""
    for m in metrics:
        if m.name == name and m.series == series:
            return m.text("es")
    raise KeyError(name)


# -- the diagnosis ------------------------------------------------------------------------
def test_7b_in_fp32_does_not_fit_an_a100_and_names_memory_pressure():
    m = predict(params="7B", gpu="a100-80gb", precision="fp32")
    states = {x.category: x.value for x in m if x.name == "memory_per_gpu_bytes"}
    assert states["params"] == states["grads"] == 28 * GB and states["optimizer"] == 56 * GB
    assert states["params"] + states["grads"] + states["optimizer"] == 112 * GB  # 16 B/param
    assert value(m, "fits_one_gpu") is False
    # weights and grads (56 GB) fit; Adam's 56 GB more do not: shard the optimizer
    assert value(m, "pressure") == "memory" and value(m, "strategy") == "ZeRO-1"
    # 112 GB is 104 GiB, said in the device's own unit: an "80 GB" A100 holds 80 GiB
    assert "104 GiB of state" in value(m, "reason") and value(m, "deadline_days") is None
    assert "the GPU has 80 GiB" in value(m, "reason") and "85.9" not in value(m, "reason")
    assert "la GPU tiene 80 GiB" in spanish(m, "reason")
    # with a 30-day deadline Chinchilla's 140B tokens (545 days on one A100) press too
    m = predict(params="7B", gpu="a100-80gb", precision="fp32", deadline="720h")
    assert value(m, "pressure") == "both" and "545 days" in value(m, "reason")
    assert value(m, "strategy").startswith("3D")


def test_the_lesson_opens_on_7b_on_one_gpu_and_switches_to_70b_and_the_minigpt():
    """Issue 40 item 6: the defaults ask a real question, and `question` switches it."""
    m = predict()
    assert value(m, "parameters") == 6_738_415_616  # Llama 2 7B, its published count
    assert value(m, "gpu") == "a100-80gb" and value(m, "fits_one_gpu") is False
    assert value(m, "pressure") == "memory" and value(m, "strategy") == "ZeRO-1"
    assert "what is too big is optimizer" in value(m, "reason")
    assert "No layout fits on 1" in value(m, "recommended")
    assert "Predicted only" in value(m, "real_run") and "Solo predicción" in spanish(m, "real_run")
    m = predict(question="70b-64-gpus")
    assert value(m, "parameters") == 70_553_706_496 and value(m, "gpu") == "h100-80gb"
    assert value(m, "recommended_gpus") == 64 and value(m, "pressure") == "memory"
    assert "what is too big is weights" in value(m, "reason")
    m = predict(question="minigpt")
    assert value(m, "pressure") == "none" and value(m, "fits_one_gpu") is True
    assert value(m, "parameters") == value(m, "demo_parameters")
    assert "trains this MiniGPT" in value(m, "real_run")
    # what the learner types wins over the question: the model, the GPU, the GPUs
    m = predict(params="13B", gpus="16", gpu="h100-80gb")
    assert value(m, "parameters") == 13e9 and value(m, "recommended_gpus") == 16
    assert value(m, "gpu") == "h100-80gb"
    params = LESSON.parse({}, "predict")
    assert LESSON.parse(params.to_dict(), "predict") == params  # the question round-trips


def test_a_400k_model_fits_and_only_time_could_justify_distributing():
    m = predict(params="400k", gpu="a100-80gb", precision="fp32")
    assert value(m, "fits_one_gpu") is True and value(m, "pressure") == "none"
    assert "only time could justify it" in value(m, "reason")
    assert "no deadline given" in value(m, "reason")
    assert "solo el tiempo" in spanish(m, "reason") and spanish(m, "pressure") == "ninguna"
    assert not [x.name for x in m if x.name.endswith("_es")]  # one metric, both languages
    # the same model with a deadline too short for one GPU: time pressure, DDP
    m = predict(params="400k", gpu="a100-80gb", tokens="1e15", deadline="1h")
    assert value(m, "pressure") == "time" and value(m, "strategy") == "DDP"


def test_inference_beside_training_7b_fp16_on_a_24gb_card():
    """7B in fp16 is 14 GB of weights and fits a 24 GB card with room for KV; training does not."""
    shape = shape_for(7_000_000_000, 2048)
    assert (shape.layers, shape.hidden, shape.heads) == (32, 4096, 32)
    inference = inference_bytes(7e9, shape, "mixed", 1)
    assert inference["params"] == 14 * GB
    assert inference["activations"] == 2 * 32 * 4096 * 2 * 2048  # K and V, 2 B, 2048 tokens
    rtx = gpu_named("rtx4090")
    d = diagnose(7e9, shape, "mixed", "none", 1, rtx.memory_bytes, 1e14, 1e9, 1e9)
    assert d.inference_fits and not d.fits and d.pressure == "memory"


def test_what_is_too_big_picks_the_strategy():
    shape = shape_for(1_000_000_000, 1024)
    # 1B mixed: weights 2, +grads 4, +Adam 16 GB; activations on top
    activations = training_bytes(1e9, shape, "mixed", Layout())["activations"]
    d = diagnose(1e9, shape, "mixed", "none", 1, 16 * GB + activations / 2, 1e14, 1e6, 1e9)
    assert d.axis == "activations" and "recompute" in d.strategy
    d = diagnose(1e9, shape, "mixed", "none", 1, 10 * GB, 1e14, 1e6, 1e9)
    assert d.axis == "optimizer" and d.strategy == "ZeRO-1"
    d = diagnose(1e9, shape, "mixed", "none", 1, 3 * GB, 1e14, 1e6, 1e9)
    assert d.axis == "grads" and d.strategy == "ZeRO-2"
    d = diagnose(1e9, shape, "mixed", "none", 1, 1.5 * GB, 1e14, 1e6, 1e9)
    assert d.axis == "weights" and "ZeRO-3" in d.strategy
    # the Spanish reason says the axis and the strategy in Spanish too (it once read
    # "lo que sobra es weights: ZeRO-3/FSDP, or PP across nodes")
    assert "weights" in d.reason["en"] and "or PP across nodes" in d.reason["en"]
    assert "los pesos: ZeRO-3/FSDP, o PP entre nodos" in d.reason["es"]
    assert "weights" not in d.reason["es"] and "across" not in d.reason["es"]
    assert d.strategy_text["es"] == "ZeRO-3/FSDP, o PP entre nodos"


# -- the planner: memory and time accounting, by hand ---------------------------------------
def test_training_bytes_of_a_3d_layout_by_hand():
    shape = Model(32, 4096, 32, 2048, 32000, psi_given=8e9)
    layout = Layout(tp=2, pp=2, dp=4, zero="zero1", recompute="full", micro=1, microbatches=8)
    got = training_bytes(8e9, shape, "mixed", layout)
    # the stage's 16 layers and the head (the last stage's V·h), split over TP = 2
    per_layer = (8e9 - (32000 * 4096 + 2048 * 4096 + 2 * 4096)) / 32
    local = (16 * per_layer + 32000 * 4096) / 2
    assert got["params"] == pytest.approx(2 * local) and got["grads"] == pytest.approx(2 * local)
    assert got["optimizer"] == pytest.approx(12 * local / 4)  # ZeRO-1 over DP = 4
    # full recomputation keeps each layer's input, 2·s·b·h bytes, not divided by t
    # (Korthikanti Table 2, bug 3: it was 2·s·b·h/t), 16 layers, min(m, p) = 2
    # microbatches in flight; plus the layer being recomputed, whole (TP + SP)
    sbh = 2048 * 1 * 4096
    working = sbh * (34 / 2 + 5 * 32 * 2048 / 4096 / 2)
    assert got["activations"] == pytest.approx(2 * sbh * 16 * 2 + working)


def test_one_layers_time_by_hand():
    """With `achieved_tflops` every matmul runs at that rate and nothing else is charged:
    the layer's matmul FLOPs and its (unfused) attention's, by hand."""
    gpu = gpu_named("a100-80gb")
    shape = Model(4, 1024, 8, 1024, 32000)
    pb = Problem(shape.psi, shape, "mixed", 2, 64, 1e9, gpu, 8, 8, tflops=100)
    layout = Layout(tp=2, micro=2)
    one = costs.layer_costs(pb, layout)
    tokens = 2 * 1024
    matmuls = 2 * tokens * 12 * 1024**2 / 2  # 12h² weights a layer, over t = 2
    attention = 4 * tokens * 1024 * 1024 / 2  # QKᵀ and AV over all s keys, over t
    assert one.forward == pytest.approx((matmuls + attention) / 1e14)
    assert one.backward == pytest.approx(2 * (matmuls + attention) / 1e14)
    # 2 all-reduces of b·s·h 16-bit elements forward, 2 backward, inside a node (NVLink)
    link = pb.model
    ar = ring_all_reduce_time(2, tokens * 1024 * 2, link.alpha, link.beta, link.gamma)
    assert one.tp_forward == pytest.approx(2 * ar) and one.tp_backward == pytest.approx(2 * ar)
    # across nodes (2 GPUs a node, TP = 4) the same all-reduce is slower
    across = replace(pb, per_node=2, _cache={})
    assert costs.layer_costs(across, Layout(tp=4, micro=2)).tp_forward > 2 * ar


def test_the_efficiency_model_makes_thin_matmuls_slower_per_flop():
    """TP leaves each GPU a thinner matmul (k = h/t): its operands weigh more against
    its FLOPs, so TP = 8 on h = 6144 reaches a lower share of the peak than t = 1."""
    k = Kernels(312e12, 2.039e12, 5e-6)
    wide = 2 * 2048 * 6144 * 6144 / k.gemm(2048, 6144, 6144)
    thin = 2 * 2048 * 6144 * 768 / k.gemm(2048, 6144, 768)
    assert thin < wide < 312e12 * GEMM_PEAK
    assert wide / 312e12 > 0.6


def test_a_tp_that_does_not_divide_a_node_is_costed_on_its_group_across_nodes():
    """TP = 3 on 8-GPU nodes: ranks 6, 7, 8 form a group that spans two nodes, so every
    layer waits for the inter-node all-reduce (the slowest group sets the pace)."""
    gpu = gpu_named("a100-80gb")
    shape = Model(4, 1024, 12, 1024, 32000)
    pb = Problem(shape.psi, shape, "mixed", 2, 64, 1e9, gpu, 48, 8, tflops=100)
    nbytes = 2 * 1024 * 1024 * 2
    link = pb.model
    inside = ring_all_reduce_time(3, nbytes, link.alpha, link.beta, link.gamma)
    across = ring_all_reduce_time(3, nbytes, link.inter_alpha, link.inter_beta, link.gamma)
    assert pb.all_reduce(range(3), nbytes) == pytest.approx(inside)
    assert pb.tp_all_reduce(3, nbytes) == pytest.approx(across) and across > 2 * inside
    assert pb.tp_all_reduce(4, nbytes) == pytest.approx(pb.all_reduce(range(4), nbytes))


def test_the_extended_simulation_matches_simulating_every_microbatch():
    gpu = gpu_named("h100-80gb")
    shape = shape_for(13_000_000_000, 2048)
    pb = Problem(13e9, shape, "mixed", 1, 64, 1e12, gpu, 32, 8)
    for chunks in (1, 2):
        layout = Layout(tp=8, pp=4, dp=1, zero="ddp", micro=1, microbatches=32, chunks=chunks)
        plan = planner.evaluate(pb, layout)
        timed, _ = planner.simulated(pb, plan)
        stages = costs.stage_costs(pb, layout)
        table = {f"F.s{s}of{4 * chunks}": f for s, (f, _) in enumerate(stages)}
        table |= {f"B.s{s}of{4 * chunks}": b for s, (_, b) in enumerate(stages)}
        model = replace(costs.pipeline_model(pb, layout), compute=table)
        schedule = "interleaved" if chunks > 1 else "1f1b"
        nbytes = costs.activation_message_bytes(pb, layout)
        full = simulate(planner._program(schedule, 4, 32, chunks, nbytes), model).makespan
        pipe = timed.step_s - timed.parts["dp"] - timed.parts["optimizer"]
        assert pipe == pytest.approx(full, rel=1e-6)
        # and the closed form that ranks every layout is within a few percent of it
        closed = plan.step_s - plan.parts["dp"] - plan.parts["optimizer"]
        assert closed == pytest.approx(full, rel=0.05)


def test_70b_on_64_h100s_keeps_tp_inside_a_node():
    """Done means: the best plans keep TP ≤ 8 inside a node; nothing hard-codes it."""
    raw = dict(params="70B", gpus="64", gpus_per_node="8", gpu="h100-80gb")
    params = LESSON.parse(raw, "predict")
    from scenarios.why_distribute import report

    plans = report.planning(params)
    assert plans.layouts_fitting > 0 and plans.recommended is not None
    for plan in plans.by_time[:5] + plans.by_cost[:5]:
        assert plan.layout.tp <= 8
    assert not plans.dp_only.fits  # DDP alone holds the whole 70B on every GPU
    # a layout with TP across nodes exists among those tried and loses on time
    wide = [p for p in plans.by_time if p.layout.tp > 8]
    assert all(p.train_s > plans.by_time[0].train_s for p in wide)
    m = predict(**raw)
    assert value(m, "train_days") > 0 and value(m, "train_days_rule_of_thumb") > 0
    assert len(value(m, "plan")) == 8 and value(m, "plan_why")[0] == "the fastest"
    assert spanish(m, "plan_why")[0] == "el más rápido" and "días" in spanish(m, "plan")[0]
    assert value(m, "recommended_gpus") == 64  # the cluster asked, all of it


def test_predict_is_quick_and_never_imports_torch():
    code = (
        "import sys, time; t = time.perf_counter()\n"
        "from playground import session\n"
        "session.predict('why-distribute', {'params': '70B', 'gpus': '64', "
        "'gpus_per_node': '8', 'gpu': 'h100-80gb'})\n"
        "assert 'torch' not in sys.modules\n"
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout) > 0  # its time is benchmarks' business, not a test's


# -- the lesson ----------------------------------------------------------------------------
def test_the_budget_sentence_of_the_recommended_plan():
    m = predict(params="400k", gpu="rtx4090", gpus="1", price="0.35", spot="yes", budget="3")
    sentence = value(m, "budget_sentence")
    assert sentence.startswith("This starts 1× RTX 4090 spot at ~$0.35/h each = $0.35/h")
    assert "Budget: $3.00. Accepted" in sentence
    assert value(m, "budget_left_usd") == pytest.approx(3 - value(m, "cost_estimate_usd"))
    assert "Presupuesto: $3.00" in spanish(m, "budget_sentence")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"gpu": "rtx5090"}, "gpu"),
        ({"ranks": "3"}, "ranks"),
        ({"price": "-1"}, "price"),
        ({"margin": "0.5"}, "margin"),
        ({"gpus": "12", "gpus_per_node": "8"}, "gpus"),
        ({"deadline": "-3h"}, "deadline"),
    ],
)
def test_bad_input_names_its_field_in_one_line_with_exit_2(raw, field):
    args = [a for k, v in raw.items() for a in ("-p", f"{k}={v}")]
    out = run_cli(["predict", "why-distribute", *args])  # its own process (cli_server)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and field in out.stderr


def test_the_program_and_its_predicted_memory():
    params = LESSON.parse({"ranks": "4"}, "predict")
    program = LESSON.build(params)
    series = {a.series for a in program.actions()}
    assert {"alone", "zero3", "fsdp2", "ddp1", "ddp2", "ddp4", "torch_ddp4"} <= series
    assert {a.rank for a in program.actions() if a.series == "alone" and a.kind != "barrier"} == {0}
    m = predict(ranks="4")
    cap = value(m, "gpu_memory_cap_bytes")
    alone = next(x for x in m if x.name == "peak_total_bytes" and x.series == "alone")
    zero3 = next(x for x in m if x.name == "peak_total_bytes" and x.series == "zero3")
    assert zero3.predicted < cap < alone.predicted
    assert value(m, "fits_gpu_memory", "alone") is False
    assert value(m, "fits_gpu_memory", "zero3") is True


def test_every_phrase_has_both_languages_and_the_json_is_strict():
    assert all(set(texts) == {"es", "en"} for texts in _phrases().values())
    out = run_cli(["predict", "why-distribute", "--json"])  # its own process (cli_server)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["curves"][0]["lines"]["predicted"][0] == pytest.approx(1.0)


def test_ddp_stops_scaling_on_a_gpu_profile():
    params = LESSON.parse({"params": "125M", "gpus": "4096", "gpu": "rtx4090"}, "predict")
    curve = LESSON.curves(params)[0]
    speedups = curve.lines["predicted"]
    assert speedups[1] > speedups[0]  # 2 GPUs help
    assert max(speedups) < curve.x[-1] / 4  # far from ideal at 4096: communication dominates
    assert math.isfinite(curve.marks["fastest"])


# -- the real demonstration -----------------------------------------------------------------
@pytest.fixture(scope="module")
def two_ranks() -> Outcome:
    return session.run("why-distribute", {"ranks": "2"}, hardware="cpu-default")


@pytest.mark.ranks
def test_the_cap_refuses_one_rank_and_admits_zero3_and_fsdp2(two_ranks):
    m = two_ranks.metrics
    cap = value(m, "gpu_memory_cap_bytes")
    refusal = value(m, "refusal", "alone")
    assert refusal.startswith("Rank 0 alone:") and f"{cap:,} B" in refusal
    assert spanish(m, "refusal", "alone").startswith("Rango 0 solo:")
    assert value(m, "fits_gpu_memory", "alone") is False
    for series in ("zero3", "fsdp2"):
        assert value(m, "fits_gpu_memory", series) is True
        peak = next(x for x in m if x.name == "peak_total_bytes" and x.series == series)
        assert peak.value <= cap
        # the model states are the shards, measured = predicted
        for category in ("params", "grads"):
            bars = next(
                x
                for x in m
                if x.name == "peak_bytes" and x.series == series and x.category == category
            )
            assert bars.value == pytest.approx(bars.predicted, rel=0.01)


@pytest.mark.ranks
def test_every_series_trains_like_one_process(two_ranks):
    m = two_ranks.metrics
    for series in ("zero3", "fsdp2", "ddp1", "ddp2", "torch_ddp1", "torch_ddp2"):
        assert value(m, "param_diff_vs_single_process", series) <= 1e-4, series
    for series in ("ddp1", "ddp2", "torch_ddp1", "torch_ddp2"):
        step = next(x for x in m if x.name == "step_s" and x.series == series)
        assert step.value > 0 and step.predicted > 0
    assert "measured in this run" in two_ranks.profile.source
    assert demo.series(2, 1)[-1].name == "torch_ddp2"


def test_steady_step_is_the_period_between_steps_ends() -> None:
    """A series' steady step runs from the warm-up's last end to the last step's, per
    step: the skew its ranks start a step with (one left the step before 2 ms early)
    is not read as a step's time, and the prediction, whose ranks start together, is
    held to the same measure. One step alone: its makespan; barriers never count."""
    from runtime.sim.trace import Span, Timeline

    def span(rank: int, step: int, start: float, end: float, kind: str = "F") -> Span:
        return Span(rank, kind, "", start, end, series="ddp2", step=step)

    skewed = Timeline(
        [
            span(0, 0, 0.0, 10.0), span(1, 0, 0.0, 8.0),  # rank 1 leaves step 0 early
            span(0, 1, 10.0, 20.0), span(1, 1, 8.0, 20.0),  # a collective joins them
            span(0, 2, 20.0, 30.0), span(1, 2, 20.0, 30.0),
            span(0, None, 30.0, 99.0, "barrier"),
        ]
    )  # fmt: skip
    assert demo.steady_step_s(skewed, "ddp2", 3) == pytest.approx(10.0)
    assert demo.steady_step_s(Timeline([span(0, 0, 1.0, 4.0)]), "ddp2", 1) == pytest.approx(3.0)
