"""Lesson 4 end to end: Megatron TP of the MiniGPT by hand and by torch on real gloo ranks,
equal to one process; f and g; the collectives of the Program; Korthikanti's activation
bytes; predict without torch; each mistake departs from the reference; bad input exits 2.

Tests that start ranks are marked `ranks` (`pytest -m "not ranks"` skips them)."""

from __future__ import annotations

import json

import pytest
from test_cli import playground, predict_without_torch

from runtime.engine.launch import LaunchSpec, launch
from runtime.sim.profiles import get_profile
from runtime.sim.simulate import simulate
from scenarios.metrics import Metric
from scenarios.registry import get_lesson
from scenarios.tensor_parallel import memory
from scenarios.tensor_parallel.lesson import LESSON, build
from scenarios.tensor_parallel.params import TPParams
from scenarios.tensor_parallel.program import LOSS_PLACES, MISTAKES, hand_plan, phase, plan_counts

TOL = 1e-5


def get(metrics: list[Metric], name: str, series: str | None = None) -> Metric:
    found = [m for m in metrics if m.name == name and m.series == series]
    assert len(found) == 1, (name, series, len(found))
    return found[0]


# -- the Program (pure) -------------------------------------------------------------------


@pytest.mark.parametrize("layers", [1, 3])
def test_megatron_counts_per_layer_and_loss(layers):
    """2 all-reduces per layer each way; SP: 2 AG + 2 RS each way; the loss 3 forward."""
    plain = plan_counts(hand_plan(layers, sp=False), layers)
    assert plain["layer.forward.all_reduce"] == 2 and plain["layer.backward.all_reduce"] == 2
    assert plain["loss.forward.all_reduce"] == 3
    assert not any(k.startswith("loss.backward") for k in plain)
    sp = plan_counts(hand_plan(layers, sp=True), layers)
    for direction in ("forward", "backward"):
        assert sp[f"layer.{direction}.all_gather"] == 2
        assert sp[f"layer.{direction}.reduce_scatter"] == 2
        assert f"layer.{direction}.all_reduce" not in sp
    assert sp["loss.forward.all_reduce"] == 3
    missing = plan_counts(hand_plan(layers, sp=False, mistake="missing-f"), layers)
    assert "layer.backward.all_reduce" not in missing


@pytest.mark.parametrize("sp", ["off", "on"])
@pytest.mark.parametrize("mistake", MISTAKES)
def test_program_simulates_and_every_phase_has_a_step(sp, mistake):
    params = LESSON.parse({"tp": "4", "sp": sp, "mistake": mistake}, "predict")
    program = build(params)
    model = LESSON.prepare_model(params, get_profile("cpu-default"))
    timeline = simulate(program, model)
    assert {s.series for s in timeline.spans} == {"hand", "torch"}
    phases = {a.phase for actions in program.ranks for a in actions}
    assert all(LESSON.step_for_phase(p) is not None for p in phases), phases
    bytes_ = {
        a.bytes for a in program.ranks[0] if a.is_collective and a.arg("place") not in LOSS_PLACES
    }
    assert params.sizes.activation in bytes_


def test_collective_actions_name_layer_and_place():
    items = hand_plan(2, sp=False)
    labels = [i for i in items if not i.is_compute and i.layer == 1]
    assert [(i.place, i.direction) for i in labels] == [
        ("attn-out", "forward"),
        ("mlp-out", "forward"),
        ("mlp-in", "backward"),
        ("attn-in", "backward"),
    ]
    assert phase(labels[0], False, "none") == "g" and phase(labels[2], False, "none") == "f"


# -- memory (pure) ----------------------------------------------------------------------------


def test_korthikanti_table_2():
    s, b, h, a, t = 4096, 1, 4096, 32, 8
    sbh = s * b * h
    got = memory.korthikanti(s, b, h, a, t)
    assert got == {
        "none": sbh * (34 + 5 * a * s / h),
        "tp": sbh * (10 + 24 / t + 5 * a * s / (h * t)),
        "tp_sp": sbh * (34 / t + 5 * a * s / (h * t)),
        "tp_selective": sbh * (10 + 24 / t),
        "tp_sp_selective": 34 * sbh / t,
        "full_recompute": 2 * sbh,
    }
    assert got["tp_sp"] < got["tp"] < got["none"]
    assert memory.korthikanti(s, b, h, a, 1)["tp"] == got["none"]


def test_predict_issue_command_without_torch():
    doc = predict_without_torch(
        "tensor-parallel", "-p", "hidden=4096", "-p", "heads=32", "-p", "seq=4096",
        "-p", "microbatch_size=1", "-p", "tp=8",
    )  # fmt: skip
    metrics = [Metric.from_dict(m) for m in doc["metrics"]]
    expected = memory.korthikanti(4096, 1, 4096, 32, 8)
    for key in memory.KEYS:
        assert get(metrics, "activation_bytes_per_layer", key).predicted == expected[key]
    assert get(metrics, "collectives_per_layer.forward.all_reduce", "hand").predicted == 2
    assert get(metrics, "collective_bytes", "hand").predicted == 4096 * 4096 * 4


def test_tp_beyond_a_node_pays_the_inter_node_link():
    """h100-nvlink has 8 GPUs a node: at tp=16 each TP collective crosses nodes."""

    def comm(tp: int) -> float:
        raw = {"tp": str(tp), "hidden": "8192", "heads": "64", "seq": "2048", "vocab": "1024",
               "microbatch_size": "1", "implementation": "hand"}  # fmt: skip
        params = LESSON.parse(raw, "predict")
        model = LESSON.prepare_model(params, get_profile("h100-nvlink"))
        _, metrics = LESSON.predict(params, model)
        return get(metrics, "tp_comm_per_layer_s", "hand").predicted

    assert comm(16) > 4 * comm(8)


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["-p", "tp=3", "-p", "hidden=48", "-p", "heads=4", "-p", "vocab=96"], "heads"),
        (["-p", "tp=4", "-p", "vocab=66"], "vocab"),
        (["-p", "tp=8", "-p", "hidden=36", "-p", "heads=4"], "hidden"),
        (["-p", "tp=4", "-p", "sp=on", "-p", "seq=18"], "seq"),
        (["--ranks", "2", "-p", "tp=4"], "tp"),
        (["-p", "tp=9"], "tp"),
        (["-p", "tp=0"], "tp"),
        (["-p", "mistake=typo"], "mistake"),
        (["-p", "implementation=jax"], "implementation"),
    ],
)
def test_bad_params_exit_2_with_one_line(args, field):
    result = playground("run", "tensor-parallel", *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], result.stderr


def test_params_parse_and_registry():
    params = TPParams.parse({}, "run")
    assert params.world_size == 2 and params.implementation == ("hand", "torch")
    assert get_lesson("tensor-parallel") is LESSON


# -- real ranks -------------------------------------------------------------------------------


@pytest.mark.ranks
def test_f_and_g_and_tp2_on_real_ranks():
    params = {"configs": ["off/none"]}
    result = launch(LaunchSpec("tp_rank_jobs:check_f_g", 2, params=params))
    for rank_result in result.rank_results:
        assert rank_result["failures"] == []
        tp2 = rank_result["models"]["off/none"]
        assert max(tp2["hand"]) <= TOL and max(tp2["torch"]) <= TOL, tp2
        assert (
            tp2["counts"]["layer.forward.all_reduce"]
            == tp2["counts"]["layer.backward.all_reduce"]
            == 2
        )
        full = rank_result["full_bytes"]
        # f bwd AR, g fwd AR, SP f: AG fwd + RS bwd, SP g: RS fwd + AG bwd; every one b·s·h·4
        assert rank_result["events"] == [
            ["all_reduce", "backward", full],
            ["all_reduce", "forward", full],
            ["all_gather", "forward", full],
            ["reduce_scatter", "backward", full],
            ["reduce_scatter", "forward", full],
            ["all_gather", "backward", full],
        ]


@pytest.mark.ranks
def test_tp4_both_implementations_and_every_mistake():
    configs = [
        "off/none",
        "on/none",
        "off/fused-qkv-split",
        "off/untied-embedding",
        "off/missing-f",
    ]
    result = launch(LaunchSpec("tp_rank_jobs:check_models", 4, params={"configs": configs}))
    for rank_result in result.rank_results:
        for config in ("off/none", "on/none"):
            got = rank_result[config]
            assert max(got["hand"]) <= TOL and max(got["torch"]) <= TOL, (config, got)
        plain, sp = rank_result["off/none"]["counts"], rank_result["on/none"]["counts"]
        assert plain["layer.forward.all_reduce"] == plain["layer.backward.all_reduce"] == 2
        assert sp["layer.forward.all_gather"] == sp["layer.backward.reduce_scatter"] == 2
        assert plain["loss.forward.all_reduce"] == 3 and "loss.backward.all_reduce" not in plain
        # b·s·h·4 = 4·16·32·4 for the activations, b·s·4 for the loss's three
        assert rank_result["off/none"]["bytes"] == [4 * 16 * 4, 4 * 16 * 32 * 4]
        assert rank_result["off/none"]["torch_counts"] == {
            "forward": {"all_reduce": 8},
            "backward": {"all_reduce": 5},
        }
        wrong = {c: rank_result[c] for c in configs[2:]}
        assert wrong["off/fused-qkv-split"]["hand"][0] > 1e-4  # even the loss departs
        for config, got in wrong.items():
            assert got["hand"][1] > 1e-3, config
            if "torch" in got:
                assert got["torch"][1] > 1e-3, config
        assert "layer.backward.all_reduce" not in wrong["off/missing-f"]["counts"]


@pytest.mark.ranks
def test_cli_run_tp2_sp_on_json():
    """The issue's command: exit 0, both implementations equal one process, Megatron's
    SP counts measured beside the Program, bytes b·s·h·4, memory measured as accounted."""
    result = playground("run", "tensor-parallel", "--ranks", "2", "-p", "sp=on", "--json")
    assert result.returncode == 0, result.stderr
    metrics = [Metric.from_dict(m) for m in json.loads(result.stdout)["metrics"]]
    for name in ("hand", "torch"):
        assert get(metrics, "max_loss_diff_vs_reference", name).value <= TOL
        assert get(metrics, "max_grad_diff_vs_reference", name).value <= TOL
    for key in (
        "forward.all_gather",
        "forward.reduce_scatter",
        "backward.all_gather",
        "backward.reduce_scatter",
    ):
        m = get(metrics, f"collectives_per_layer.{key}", "hand")
        assert m.value == m.predicted == 2
    assert get(metrics, "loss_collectives.forward.all_reduce", "hand").value == 3
    assert get(metrics, "loss_collectives.backward", "hand").value == 0
    b = get(metrics, "collective_bytes", "hand")
    assert b.value == b.predicted == 4 * 32 * 64 * 4
    for key in memory.MEASURED:
        m = get(metrics, "activation_bytes_per_layer", memory.FP32_SERIES[key])
        assert m.value == m.predicted
    assert get(metrics, "torch_tp_collectives.forward.all_gather", "torch").value >= 4
    # the whole hand step: the embedding's and 2 per layer's reduce-scatters; one
    # all-reduce after backward for the parameters that saw a sequence shard
    assert get(metrics, "step_collectives.forward.reduce_scatter", "hand").value == 1 + 2 * 2
    assert get(metrics, "step_collectives.backward.all_reduce", "hand").value == 1
    assert get(metrics, "worst_grad_parameter", "hand").value is None  # nothing departs


@pytest.mark.parametrize("sp", [False, True])
def test_torch_series_estimate_adds_dtensor_dispatch_per_parallelized_module(sp):
    """Before a run, torch's forward and backward are the hand-made segments plus
    DTensor's dispatch (ComputeRates.parallel_*) for each module its plan parallelizes:
    4 per block and the embedding and head; under SP the LayerNorms and inputs too."""
    from dataclasses import replace

    from scenarios.tensor_parallel.costs import parallelized_modules

    profile = get_profile("cpu-default")
    params = TPParams(sp="on" if sp else "off")
    modules = parallelized_modules(params.model.layers, sp)
    assert modules == params.model.layers * (7 if sp else 4) + (4 if sp else 2)
    rates = profile.rates
    from scenarios.tensor_parallel.rates import TPRates  # the lesson's own rates

    none = replace(profile, rates=rates.with_lesson(TPRates(0.0, 0.0)))
    some = replace(profile, rates=rates.with_lesson(TPRates(1e-3, 2e-3)))
    base, more = LESSON.prepare_model(params, none), LESSON.prepare_model(params, some)
    assert more.compute["F.torch"] - base.compute["F.torch"] == pytest.approx(modules * 1e-3)
    assert more.compute["B.torch"] - base.compute["B.torch"] == pytest.approx(modules * 2e-3)
    assert more.compute["F.attn"] == base.compute["F.attn"]  # the hand-made step: unchanged
