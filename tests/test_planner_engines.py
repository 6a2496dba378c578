"""Lesson 0's planner, how published runs were run: DeepSpeed's pipeline engine (its
TrainSchedule replayed with blocking sends) and ZeRO-2 inside a pipeline (FSDP as Llama 3
ran it). Each test fails on the code before issue 38's last three rows."""

from __future__ import annotations

import pytest

from playground import session
from scenarios.params import ParamError
from scenarios.registry import get_lesson
from scenarios.why_distribute import costs, deepspeed, planner
from scenarios.why_distribute.costs import Problem
from scenarios.why_distribute.footprint import Layout, training_bytes
from scenarios.why_distribute.gpus import GPUS
from scenarios.why_distribute.model import PRESETS
from scenarios.why_distribute.syntax import read_layout

GIB = 2**30
LESSON = get_lesson("why-distribute")
LLAMA_8K = dict(
    preset="llama3-405b", attention="flash", global_batch="2048", gpus="8192",
    gpu="h100-80gb", recompute="none",
)  # fmt: skip


def step(layout: str, **raw: str) -> float:
    out = session.predict("why-distribute", {**raw, "layout": layout}, hardware="h100-nvlink")
    return next(
        m.predicted for m in out.metrics if m.name == "step_s" and m.series == "recommended"
    )


def test_deepspeed_instructions_are_its_train_schedule():
    """Stage 1 of 4, 3 microbatches, as TrainSchedule.steps() yields them (written out by
    hand from deepspeed/runtime/pipe/schedule.py: odd stage, forward on odd steps)."""
    expected = [
        ("recv_act", 0), ("F", 0), ("send_act", 0), ("recv_act", 1), ("F", 1),
        ("send_act", 1), ("recv_act", 2), ("F", 2), ("recv_grad", 0), ("send_act", 2),
        ("B", 0), ("send_grad", 0), ("recv_grad", 1), ("B", 1), ("send_grad", 1),
        ("recv_grad", 2), ("B", 2), ("send_grad", 2),
    ]  # fmt: skip
    assert deepspeed.instructions(1, 4, 3) == expected
    first = deepspeed.instructions(0, 4, 3)
    assert [k for k, _ in first].count("F") == 3 and "recv_act" not in dict(first)


def test_deepspeed_makespan_is_1f1b_plus_its_blocking_sends():
    """Free transfers: the 1F1B makespan (m − 1)(F + B) + p(F + B). Each blocking
    transfer then lands on the critical path: more than the fill's 2(p − 1) of them."""
    p, m, f, b = 4, 8, 1.0, 2.0
    assert deepspeed.makespan([(f, b)] * p, m, [0.0] * (p - 1)) == pytest.approx(
        (m - 1) * (f + b) + p * (f + b)
    )
    tau = 0.01
    slower = deepspeed.makespan([(f, b)] * p, m, [tau] * (p - 1)) - 33.0
    assert slower > 2 * (p - 1) * tau


def test_a_deepspeed_layout_is_read_and_costed_by_its_schedule():
    assert read_layout("tp8,pp35,dp8,deepspeed") == dict(tp=8, pp=35, dp=8, engine="deepspeed")
    raw = dict(preset="mt-nlg-530b", global_batch="1920", gpus="2240", gpu="a100-80gb",
               recompute="full")  # fmt: skip
    out = session.predict("why-distribute", {**raw, "layout": "tp8,pp35,dp8,deepspeed"},
                          hardware="a100-nvlink")  # fmt: skip
    megatron = session.predict("why-distribute", {**raw, "layout": "tp8,pp35,dp8"},
                               hardware="a100-nvlink")  # fmt: skip

    def pipe(o):
        return next(m.predicted for m in o.metrics
                    if m.name == "step_pipeline_s" and m.series == "recommended")  # fmt: skip

    assert pipe(out) > pipe(megatron)  # its sends block every microbatch, not only the fill


def test_deepspeed_refuses_interleaving_in_the_learners_language():
    raw = dict(preset="mt-nlg-530b", global_batch="1920", gpus="2240", gpu="a100-80gb")
    with pytest.raises(ParamError) as err:
        LESSON.parse({**raw, "layout": "tp8,pp35,dp8,v3,deepspeed"}, "predict")
    assert err.value.field == "layout" and "v3" in str(err.value)
    assert "DeepSpeed" in err.value.es and "intercalar" in err.value.es  # Spanish too


def test_zero2_in_a_pipeline_shards_the_gradients_by_hand():
    """Llama 3's FSDP (ZeRO-2) against ZeRO-1 on its 8K layout: the gradients of the
    busiest rank's elements (its 8 layers, over t) go from 2 bytes to 2/64."""
    model = PRESETS["llama3-405b"].model
    one, two = (Layout(8, 16, 64, z, "none", 1, 32, 8) for z in ("zero1", "zero2"))
    b1 = training_bytes(model.psi, model, "mixed", one, flash=True)
    b2 = training_bytes(model.psi, model, "mixed", two, flash=True)
    local = 8 * model.layer_weights / 8
    assert b1["grads"] == pytest.approx(2 * local)
    assert b2["grads"] == pytest.approx(2 * local / 64)
    assert b2["params"] == b1["params"] and b2["activations"] == b1["activations"]
    assert sum(b1.values()) > 80 * GIB > sum(b2.values())


def test_zero2_pipeline_reduce_scatters_fp32_each_microbatch():
    """m reduce-scatters of 4-byte gradients and one 16-bit gather: half an all-reduce each."""
    model = PRESETS["llama3-405b"].model
    problem = Problem(model.psi, model, "mixed", 1, 2048, 1e12, GPUS["h100-80gb"], 8192, 8,
                      flash=True)  # fmt: skip
    lay = Layout(8, 16, 64, "zero2", "none", 1, 32, 8)
    group = range(0, 8192, 128)
    local = costs.local_elements(problem, lay)
    by_hand = (32 * problem.all_reduce(group, 4 * local) + problem.all_reduce(group, 2 * local)) / 2
    assert costs.dp_seconds(problem, lay) == pytest.approx(by_hand)
    assert costs.exposed_dp_seconds(problem, lay, by_hand) == 0.0  # hidden beside the compute


def test_llamas_published_layout_is_accepted_and_zero3_still_refused():
    assert step("tp8,pp16,dp64,v8,zero2", **LLAMA_8K) > 0
    with pytest.raises(ParamError) as err:
        LESSON.parse({**LLAMA_8K, "layout": "tp8,pp16,dp64,v8,zero3"}, "predict")
    assert err.value.field == "layout" and "zero3" in str(err.value)
    assert planner.PIPELINE_ZERO == ("ddp", "zero1")  # the search itself is unchanged


def test_llamas_busiest_rank_by_hand_and_no_stage_outputs_counted():
    """Rank 1 of Llama 3's 8K layout holds 2·(16 − 1 − 1) + (8 − 1)·16 + 1 = 141 one-layer
    chunk-microbatches, each 31.75·s·b·h/t bytes (no dropout masks 8, K and V at 8/128
    heads 4·8/128, Q and the projection's input 4, SwiGLU 6·f/h = 19.5; flash keeps no
    scores). Nothing more: a stage's sent output is freed once sent (Megatron's
    deallocate_pipeline_outputs, DeepSpeed's cleared .data, Meta's §3.3.2), so the model
    never counts it, and the received input is the first layer's own LayerNorm input."""
    model = PRESETS["llama3-405b"].model
    lay = Layout(8, 16, 64, "zero2", "none", 1, 32, 8)
    assert lay.held(126)[1] == 2 * (16 - 1 - 1) + (8 - 1) * 16 + 1 == 141
    per_layer = 31.75 * 8192 * 1 * 16384 / 8
    memory = training_bytes(model.psi, model, "mixed", lay, flash=True)
    assert memory["activations"] == pytest.approx(141 * per_layer)
    assert sum(memory.values()) / GIB == pytest.approx(76.5, abs=0.1)
