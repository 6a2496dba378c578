"""Lesson 5 end to end: MiniGPT cut into stages, schedules run on real gloo ranks,
gradients equal to one process's, in-flight memory as predicted, the CLI contract."""

from __future__ import annotations

import json

import pytest
import torch
from test_cli import playground

from playground import session
from runtime import formulas
from runtime.models import GPTConfig, MiniGPT, batch, split_stages, stage_layers
from runtime.pipeline_exec import PipelineExecutor
from runtime.program import Action

SMALL = {"layers": "4", "hidden": "32", "seq": "16", "microbatch_size": "4"}


def test_minigpt_size_and_stage_cut():
    cfg = GPTConfig()
    model = MiniGPT(cfg)
    count = sum(p.numel() for p in model.parameters())
    assert count == formulas.gpt_parameter_count(cfg.vocab, cfg.seq, cfg.hidden, cfg.layers)
    assert count <= 500_000
    assert [list(r) for r in stage_layers(8, 3)] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    stages = split_stages(model, 4)
    assert stages[0].is_first and not stages[0].is_last and stages[3].is_last
    # the stages, chained, are the model
    x, y = batch(cfg, 2)
    h = x
    for stage in stages[:-1]:
        h = stage(h)
    assert torch.equal(stages[-1](h, y), model(x, y))


@pytest.mark.parametrize("split", [False, True])
def test_split_backward_gives_the_same_gradients(split):
    """B (input grad) + W (weight grad from the kept x and g) == one full backward."""
    cfg = GPTConfig(layers=2, hidden=32, seq=16)
    inputs, targets = batch(cfg, 8)
    reference = MiniGPT(cfg)
    reference(inputs, targets).backward()
    model = MiniGPT(cfg)
    executor = PipelineExecutor(
        {0: split_stages(model, 1)[0]},
        list(inputs.chunk(4)),
        list(targets.chunk(4)),
        hidden=cfg.hidden,
    )
    args = (("split", split),)
    for kind in ("F", "B", "W") if split else ("F", "B"):
        for mb in range(4):
            executor(Action(id=f"{kind}{mb}", rank=0, kind=kind, stage=0, microbatch=mb, args=args))
    assert not executor.held  # everything released after its last backward action
    for mine, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, atol=1e-6, rtol=1e-5)


def test_all_schedules_on_real_ranks_match_the_reference():
    raw = {
        "schedule": "gpipe,1f1b,zb-h1,interleaved",
        "stages": "2",
        "microbatches": "4",
        "chunks": "2",
        **SMALL,
    }
    outcome = session.run("pipeline", raw)
    metrics = outcome.metrics
    assert metrics["schedules"] == ["gpipe", "1f1b", "zb-h1", "interleaved"]
    for name in metrics["schedules"]:
        m = metrics[name]
        assert m["max_grad_diff_vs_reference"] <= 1e-5, name
        assert m["peak_inflight_microbatches"] == m["peak_inflight_predicted"], name
        assert m["p2p_bytes"] == m["p2p_bytes_predicted"], name
        assert m["makespan_measured_s"] > 0 and m["makespan_predicted_s"] > 0
    assert metrics["gpipe"]["peak_inflight_predicted"] == [4, 4]
    assert metrics["1f1b"]["peak_inflight_predicted"] == [2, 1]
    # measured and predicted spans pair one to one
    assert set(outcome.measured.by_action()) == set(outcome.predicted.by_action())
    # memory was sampled from the live tensors, per rank
    inflight = [c for c in outcome.measured.counters if c.category == "inflight"]
    held = [c for c in outcome.measured.counters if c.category == "activations"]
    assert {c.rank for c in inflight} == {0, 1} and max(c.value for c in held) > 0
    assert "stage costs" in outcome.profile.source


def test_cli_run_four_stages_json():
    out = playground(
        "run", "pipeline", "-p", "schedule=gpipe,1f1b", "-p", "stages=4",
        "-p", "microbatches=8", *[f"-p{k}={v}" for k, v in SMALL.items()], "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    for name in ("gpipe", "1f1b"):
        m = doc["metrics"][name]
        assert m["max_grad_diff_vs_reference"] <= 1e-5
        assert m["peak_inflight_microbatches"] == m["peak_inflight_predicted"]
    assert doc["metrics"]["gpipe"]["peak_inflight_microbatches"] == [8, 8, 8, 8]
    assert doc["metrics"]["1f1b"]["peak_inflight_microbatches"] == [4, 3, 2, 1]
    assert any(c["category"] == "activations" for c in doc["counters"])


def test_predict_unit_textbook_numbers():
    out = playground(
        "predict", "pipeline", "--hardware", "unit", "-p", "schedule=gpipe,1f1b,interleaved,zb-h1",
        "-p", "stages=4", "-p", "microbatches=8", "-p", "chunks=2", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)["metrics"]
    assert m["gpipe"]["makespan_predicted_s"] == 33
    assert m["1f1b"]["makespan_predicted_s"] == 33
    assert m["gpipe"]["bubble_fraction_predicted"] == pytest.approx(3 / 11)
    assert m["1f1b"]["bubble_fraction_formula"] == pytest.approx(3 / 11)
    assert m["interleaved"]["makespan_predicted_s"] == 28.5
    assert m["zb-h1"]["makespan_predicted_s"] == 27
    assert m["gpipe"]["peak_inflight_predicted"] == [8, 8, 8, 8]
    assert m["1f1b"]["peak_inflight_predicted"] == [4, 3, 2, 1]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-p", "schedule=interleaved", "-p", "microbatches=6"], "multiple of p=4"),
        (["-p", "stages=1"], "stages=1"),
        (["-p", "microbatches=0"], "microbatches=0"),
        (["-p", "microbatches=257"], "microbatches=257"),
        (["-p", "schedule=interleaved", "-p", "chunks=1"], "v >= 2"),
        (["-p", "schedule=pipedream"], "schedule must be one of"),
        (["-p", "layers=2"], "at least that many layers"),
        (["-p", "hidden=30", "-p", "heads=4"], "multiple of heads"),
        (["-p", "schedule=gpipe,gpipe"], "once"),
    ],
)
def test_bad_params_exit_2(args, needle):
    out = playground("predict", "pipeline", *args)
    assert out.returncode == 2
    assert needle in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr
