"""Lesson 0's planner: model shapes, presets, pinned layouts, context parallelism, MFU and
HFU, the cluster asked, and the bugs of issue 38 (each test fails on the code before)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest
from cli_server import run_cli

from playground import session
from runtime.sim import formulas
from runtime.sim.profiles import get_profile
from scenarios.metrics import Metric
from scenarios.params import ParamError
from scenarios.registry import get_lesson
from scenarios.tensor_parallel import memory
from scenarios.why_distribute import report
from scenarios.why_distribute.footprint import Layout, training_bytes
from scenarios.why_distribute.model import PRESETS, Model

LESSON = get_lesson("why-distribute")
GIB = 2**30
NARAYANAN_145B = dict(
    layers="80", hidden="12288", heads="96", ffn="4h", vocab="51200", seq="2048",
    global_batch="2304", gpus="1536", gpus_per_node="8", gpu="a100-80gb",
    layout="tp8,pp8,dp24", recompute="full",
)  # fmt: skip


def predict(**raw: str) -> list[Metric]:
    return session.predict("why-distribute", raw).metrics


def value(metrics: list[Metric], name: str, series: str | None = None) -> object:
    for m in metrics:
        if m.name == name and m.series in (series, "recommended"):
            return m.value if m.value is not None else m.predicted
    raise KeyError(name)


def spanish(metrics: list[Metric], name: str) -> object:
    return next(m.text("es") for m in metrics if m.name == name)


# -- the bugs -------------------------------------------------------------------------------
def test_rtx4090_computes_at_its_dense_tensor_rate():
    """Bug 1: 165.2 TFLOP/s dense BF16/FP16 with FP32 accumulate, not 82.6 (FP32)."""
    assert value(predict(gpu="rtx4090"), "peak_tflops") == pytest.approx(165.2)


def test_no_plan_ranks_first_with_a_tp_group_across_nodes_costed_inside_one():
    """Bug 2: tp = 3 or 6 on 8-GPU nodes leaves a group across two nodes; it is costed
    there, so the fastest plan for 174.6B on 768 A100s keeps TP dividing a node."""
    raw = dict(params="174.6e9", gpus="768", global_batch="1536", rank_by="time")
    plans = report.planning(LESSON.parse(raw, "predict"))
    assert 8 % plans.by_time[0].layout.tp == 0


def test_full_recomputation_keeps_2sbh_per_layer_in_both_lessons():
    """Bug 3: Korthikanti Table 2's 2sbh, not 2sbh/t; the tensor-parallel lesson and the
    planner read the same function."""
    s, b, h, a, t = 2048, 1, 4096, 32, 8
    full = formulas.layer_activation_bytes(s, b, h, a, t, recompute="full")
    assert full == 2 * s * b * h == memory.korthikanti(s, b, h, a, t)["full_recompute"]
    shape = Model(32, h, a, s, 32000)
    one = Layout(tp=t, recompute="full")
    kept = training_bytes(shape.psi, shape, "mixed", one)["activations"]
    working = formulas.layer_activation_bytes(s, b, h, a, t)  # the layer recomputed
    assert kept == pytest.approx(32 * 2 * s * b * h + working)


def test_an_80_gb_gpu_holds_80_gib():
    """Bug 4: an "80 GB" A100 or H100 holds 80 GiB = 85.9e9 B (nvidia-smi: 81,920 MiB)."""
    for gpu, profile in (("a100-80gb", "a100-nvlink"), ("h100-80gb", "h100-nvlink")):
        assert value(predict(gpu=gpu), "gpu_memory_bytes") == 80 * GIB
        assert get_profile(profile).rates.memory_bytes == 80 * GIB


# (the params' names, layers, hidden, heads…, are the same in both languages)
ENGLISH = (" the ", " and ", " of ", "across", "weights", "fastest", "cheaper", "given",
           "derived", "only ", "vocabulary", "pinned")  # fmt: skip


@pytest.mark.parametrize(
    "raw",
    [
        {"params": "1B", "gpu_memory": "0", "deadline": "720h"},
        {"params": "70B", "gpus": "64", "gpu": "h100-80gb"},
        {"layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "8", "gpus": "16"},
        NARAYANAN_145B,
    ],
)
def test_every_spanish_text_is_spanish(raw):
    """Bug 5 and item 7: no English inside a Spanish sentence (the diagnosis once said
    "lo que sobra es weights: ZeRO-3/FSDP, or PP across nodes")."""
    for m in predict(**raw):
        if m.es is None or m.unit != "text":
            continue
        texts = m.es if isinstance(m.es, list) else [m.es]
        for text in texts:
            lowered = f" {text} ".lower()
            assert not [w for w in ENGLISH if w in lowered], (m.name, text)


# -- shapes and presets ---------------------------------------------------------------------
def test_params_alone_still_works_and_says_the_shape_was_derived():
    m = predict(params="13B")
    assert value(m, "parameters") == 13_000_000_000
    assert "derived from" in value(m, "model_shape") and "derivada" in spanish(m, "model_shape")


def test_a_shape_gives_psi_and_gqa_shrinks_it():
    m = predict(layers="32", hidden="4096", heads="32", ffn="14336", vocab="128256",
                mlp="swiglu", kv_heads="8", seq="8192")  # fmt: skip
    assert value(m, "parameters") == PRESETS["llama3-8b"].model.shape_parameters
    assert value(m, "parameters") == pytest.approx(8.03e9, rel=0.002)
    full = predict(layers="32", hidden="4096", heads="32", ffn="14336", vocab="128256",
                   mlp="swiglu", seq="8192")  # fmt: skip
    assert value(full, "parameters") - value(m, "parameters") == 32 * 2 * 4096 * (4096 - 1024)


def test_a_preset_names_its_source_and_a_typed_field_overrides_it():
    m = predict(preset="llama3-405b", gpus="512", gpu="h100-80gb")
    assert "Llama 3 Herd" in value(m, "model_shape") and "126 layers" in value(m, "model_shape")
    longer = LESSON.parse({"preset": "llama3-405b", "seq": "131072"}, "predict")
    assert longer.shape.seq == 131072 and longer.shape.kv == 8


def test_model_flops_per_token_count_causal_attention():
    m = PRESETS["gpt3-175b"].model
    weights = m.layers * m.layer_matmul_weights + m.vocab * m.hidden
    assert m.model_flops_per_token() == 6 * weights + 6 * m.layers * m.seq * m.hidden


@pytest.mark.parametrize(
    ("raw", "field", "es"),
    [
        ({"layers": "8", "hidden": "1000", "heads": "3"}, "heads", "debe dividir hidden"),
        ({"layers": "8", "hidden": "1024", "heads": "16", "kv_heads": "3"}, "kv_heads", "debe"),
        (
            {"layers": "8", "hidden": "1024", "heads": "16", "layout": "tp2,pp2,dp4", "gpus": "8"},
            "layout",
            "deben coincidir",
        ),  # fmt: skip
        ({"layout": "tp8,px2"}, "layout", "debe ser uno de"),
        ({"ffn": "4x"}, "ffn", "debe ser uno de"),
        ({"layers": "8", "hidden": "1024"}, "heads", "layers, hidden y heads"),
        ({"params": "7B", "layers": "8", "hidden": "1024", "heads": "8"}, "params", "no ambos"),
        ({"preset": "llama3-405b", "gpus": "8", "layout": "tp8"}, "layout", "no cabe"),
    ],
)
def test_bad_shapes_and_layouts_exit_2_naming_the_field_in_both_languages(raw, field, es):
    args = [a for k, v in raw.items() for a in ("-p", f"{k}={v}")]
    for language, said in (("en", field), ("es", es)):
        env = {**os.environ, "PLAYGROUND_LANG": language}
        out = run_cli(["predict", "why-distribute", *args], env=env)
        assert out.returncode == 2 and out.stdout == "", out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and field in out.stderr
        assert said in out.stderr, out.stderr


# -- layouts --------------------------------------------------------------------------------
def test_a_pinned_layout_is_costed_exactly():
    m = predict(**NARAYANAN_145B)
    assert value(m, "recommended") == "tp8·pp8·dp24 ddp rc=full"
    assert value(m, "recommended_gpus") == 1536 and value(m, "layouts_tried") == 1
    assert "fijado" in spanish(m, "recommended_why")
    parts = ("compute", "tp", "cp", "pipeline", "dp", "optimizer")
    assert sum(value(m, f"step_{p}_s") for p in parts) == pytest.approx(value(m, "step_s"))
    # full recomputation: the GPUs execute 4/3 of the model's FLOPs (more: attention
    # computed whole, not halved by the causal mask)
    assert 4 / 3 < value(m, "hfu") / value(m, "mfu") < 1.45


def test_without_a_layout_plans_use_the_whole_cluster_and_a_subset_is_the_alternative():
    m = predict(params="175B", tokens="300B", gpus="1024", achieved_tflops="140",
                recompute="full")  # fmt: skip
    assert value(m, "recommended_gpus") == 1024
    assert "rc=full" in value(m, "recommended")  # the recomputation asked, not "at most"
    assert value(m, "train_days_rule_of_thumb") == pytest.approx(33.9, abs=0.05)
    assert value(m, "alternative").startswith(("Cheaper", "No subset"))


def test_context_parallelism_splits_the_sequence_in_memory_and_passes_kv_round_the_ring():
    shape = PRESETS["llama3-405b"].model
    long = replace(shape, seq=131072)
    one = Layout(tp=8, pp=16, dp=8, zero="zero1", recompute="full", micro=1, microbatches=16)
    ring = Layout(tp=8, pp=16, dp=8, zero="zero1", recompute="full", micro=1, microbatches=16,
                  cp=16)  # fmt: skip
    alone = training_bytes(long.psi, long, "mixed", one, flash=True)["activations"]
    split = training_bytes(long.psi, long, "mixed", ring, flash=True)["activations"]
    assert split == pytest.approx(alone / 16)
    m = predict(preset="llama3-405b", seq="131072", global_batch="128", gpus="16384",
                gpu="h100-80gb", attention="flash", recompute="full",
                layout="tp8,cp16,pp16,dp8,zero1")  # fmt: skip
    assert value(m, "recommended") == "tp8·cp16·pp16·dp8 zero1 rc=full"
    assert value(m, "step_cp_s") >= 0 and value(m, "step_s") > 0


def test_presets_layouts_and_context_parallelism_predict_without_torch():
    code = (
        "import sys\n"
        "from playground import session\n"
        "session.predict('why-distribute', {'preset': 'llama3-405b', 'seq': '131072', "
        "'gpus': '16384', 'gpu': 'h100-80gb', 'attention': 'flash', 'global_batch': '128'})\n"
        "session.predict('why-distribute', {'preset': 'megatron-1t', 'gpus': '3072', "
        "'global_batch': '3072', 'recompute': 'full', 'layout': 'tp8,pp64,dp6'})\n"
        "assert 'torch' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


# -- Llama 3's pipeline: its chunks, the schedule's memory, an H100's matmuls --------------
def test_the_ends_of_a_pipeline_take_one_layer_fewer_when_that_divides():
    """Llama 3 (§3.3.2): 126 layers on 16 × 8 one-layer chunks, the first chunk only the
    embedding, the last only the output; BLOOM: 70 layers and 2 embeddings on 12 stages."""
    from scenarios.why_distribute.footprint import chunk_layers, fits_chunks

    assert chunk_layers(126, 128) == (0, *[1] * 126, 0)
    assert chunk_layers(70, 12) == (5, *[6] * 10, 5)
    assert chunk_layers(10, 4) == (2, 3, 3, 2)  # 12 = 4 × 3: the ends give one up
    assert list(chunk_layers(9, 4)) == formulas.even_split(9, 4)  # 11 does not divide: even
    assert fits_chunks(126, 128) and not fits_chunks(126, 127) and fits_chunks(126, 126)
    ok = LESSON.parse({"preset": "llama3-405b", "attention": "flash", "gpus": "16384",
                       "gpu": "h100-80gb", "global_batch": "2048",
                       "layout": "tp8,pp16,dp128,v8,zero1"}, "predict")  # fmt: skip
    assert ok.pinned is not None and ok.pinned.chunks == 8
    for pp, fits in ((12, True), (11, False)):  # 10 layers: 12 chunks fit, 11 do not
        raw = {"layers": "10", "hidden": "1024", "heads": "8", "gpus": str(pp),
               "gpus_per_node": "1", "layout": f"tp1,pp{pp},dp1"}  # fmt: skip
        if fits:
            assert LESSON.parse(raw, "predict").pinned is not None
            continue
        with pytest.raises(ParamError, match="layers \\+ 2") as refused:
            LESSON.parse(raw, "predict")
        assert refused.value.field == "layout" and "layers + 2" in (refused.value.es or "")


def test_the_schedule_says_how_many_microbatches_each_rank_holds():
    """1F1B: rank r holds min(p − r, m) microbatches of its layers; interleaved (Megatron's
    warm-up, 2·(p − r − 1) + (v − 1)·p, plus one): by hand for p = 4, v = 2, m = 8."""
    one = Layout(pp=4, microbatches=8, chunks=1)
    assert one.held(16) == (4 * 4, 3 * 4, 2 * 4, 1 * 4)
    assert Layout(pp=4, microbatches=2).held(16) == (2 * 4, 2 * 4, 2 * 4, 1 * 4)
    two = Layout(pp=4, microbatches=8, chunks=2)
    # 16 layers + 2 = 18, not a multiple of 8 chunks: 2 layers each; rank 0 runs 6 + 4 + 1
    # = 11 chunk-forwards before its first backward: 4 of chunk 0, 4 of chunk 1, 3 of chunk 0
    assert two.held(16)[0] == 11 * 2
    assert two.held(16)[3] == (0 + 4 + 1) * 2
    # the interleaved peak is never below 1F1B's on the first rank, and all of it when m = p
    assert Layout(pp=4, microbatches=4, chunks=2).held(16)[0] == 4 * 4


def test_an_h100s_matmuls_run_at_its_measured_share_against_the_a100s():
    from scenarios.why_distribute.gpus import A100_MAMF, GPUS

    h100, a100 = GPUS["h100-80gb"], GPUS["a100-80gb"]
    assert a100.matmul_scale == pytest.approx(1.0)
    assert h100.matmul_scale == pytest.approx((794.5 / 989) / A100_MAMF)
    assert GPUS["rtx4090"].matmul_scale == 1.0  # none measured: the A100's share
    pb = report.problem(LESSON.parse({"preset": "llama3-8b", "gpu": "h100-80gb"}, "predict"))
    flat = replace(pb.kernels, gemm_scale=1.0)
    big = (8192, 8192, 8192)
    assert pb.kernels.gemm(*big) > flat.gemm(*big)


def test_llama_3s_16k_gpu_run_is_reproduced_with_its_schedule():
    """Table 4's 16,384-GPU row: 400 TFLOP/s, 41% MFU, with v = 8 (published.py says why);
    the same layout without interleaving leaves most of the step in the bubble."""
    from scenarios.why_distribute.published import RUNS

    run = next(r for r in RUNS if "16,384" in r.name)
    assert "v8" in run.params["layout"] and not run.miss
    plain = {**run.params, "layout": "tp8,pp16,dp128,zero1"}
    steps = {}
    for name, raw in (("v8", run.params), ("v1", plain)):
        out = session.predict("why-distribute", raw, hardware=run.hardware).metrics
        steps[name] = value(out, "step_s")
        bubble = value(out, "step_pipeline_s")
        assert isinstance(bubble, float)
        steps[name + "_bubble"] = bubble
    assert steps["v8"] == pytest.approx(run.step_s, rel=0.15)
    assert steps["v1_bubble"] > 4 * steps["v8_bubble"]
