"""Lesson 2 end to end: DDP, ZeRO-1/2/3 and FSDP2 on real gloo ranks train like one
process, hold the bytes the shards say, send the bytes the rings say; the ZeRO
paper's calculator; the memory bars in the HTML export; bad input exits 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from test_cli import playground

from playground import session
from playground.export.html import render_html
from playground.export.memory import build_memory_figure
from runtime import formulas
from runtime.units import parse_count
from scenarios.zero import SCENARIO, unit_numels

GB = 1e9


# -- the calculator (pure) -----------------------------------------------------------


def test_paper_figure_1_numbers():
    """ZeRO Fig. 1: Ψ = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB."""
    psi, nd = 7.5e9, 64
    totals = {
        stage: sum(formulas.zero_model_state_bytes(psi, nd, stage, "mixed").values())
        for stage in formulas.ZERO_STAGES
    }
    assert totals == {
        "ddp": 120 * GB,
        "zero1": 30 * GB + 12 * psi / nd,
        "zero2": 15 * GB + 14 * psi / nd,
        "zero3": 120 * GB / nd,
    }
    assert round(totals["zero1"] / GB, 1) == 31.4 and round(totals["zero2"] / GB, 1) == 16.6
    # fp32 Adam: 4 + 4 + 8 bytes per parameter, the moments sharded from ZeRO-1 on
    assert formulas.zero_model_state_bytes(1000, 4, "zero1", "fp32") == {
        "params": 4000,
        "grads": 4000,
        "optimizer": 2000,
    }
    assert formulas.zero_comm_elements(psi, "zero2") == 2 * psi
    assert formulas.zero_comm_elements(psi, "zero3") == 3 * psi
    assert formulas.zero_comm_bytes_per_rank(1000, 4, "ddp", 4) == 2 * 3 / 4 * 1000 * 4
    assert formulas.zero_comm_bytes_per_rank(1000, 4, "zero3", 4) == 3 * 3 / 4 * 1000 * 4


def test_program_collectives_per_stage():
    """Per step and unit: DDP one all-reduce; ZeRO-1/2 a reduce-scatter and an all-gather;
    ZeRO-3 two all-gathers and a reduce-scatter. The Program validates and simulates."""
    params = SCENARIO.resolve({"ranks": "2", "steps": "1"}, "predict")
    program = SCENARIO.build(params)
    program.validate()
    units = len(unit_numels(params))
    for stage, expected in {
        "ddp": {"all_reduce": 1},
        "zero1": {"reduce_scatter": 1, "all_gather": 1},
        "zero2": {"reduce_scatter": 1, "all_gather": 1},
        "zero3": {"reduce_scatter": 1, "all_gather": 2},
        "fsdp2": {},
    }.items():
        kinds = [a.kind for a in program.ranks[0] if a.id.startswith(f"{stage}/")]
        for kind in ("all_reduce", "reduce_scatter", "all_gather"):
            assert kinds.count(kind) == expected.get(kind, 0) * units, (stage, kind)
    outcome = session.predict("zero", {"ranks": "2"}, hardware="cpu-default")
    assert set(outcome.metrics["makespan_predicted_s"]) == set(params["stage"])


@pytest.mark.parametrize(
    ("text", "value"),
    [("7e9", 7 * 10**9), ("7B", 7 * 10**9), ("70B", 70 * 10**9), ("125M", 125 * 10**6),
     ("1.5T", 15 * 10**11), ("350k", 350_000), ("1000", 1000)],
)  # fmt: skip
def test_parse_count(text, value):
    assert parse_count(text) == value


def test_predict_7b_on_64_gpus_no_torch():
    """The issue's command, in-process, with torch never imported; every stage exactly
    the paper's formula for Ψ = 7e9, N_d = 64, K = 12, and which fit 80 GB."""
    code = (
        "import sys, io, json, contextlib\n"
        "from playground.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['predict', 'zero', '-p', 'params=7e9', '-p', 'dp=64', '-p', 'precision=mixed',"
        " '-p', 'gpu_memory=80GB', '--json'])\n"
        "assert rc == 0, rc\n"
        "assert 'torch' not in sys.modules, 'predict imported torch'\n"
        "print(json.dumps(json.loads(buf.getvalue())['metrics']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    m = json.loads(result.stdout)
    psi, nd, k = 7e9, 64, 12
    expected = {
        "ddp": (2 * psi, 2 * psi, k * psi),
        "zero1": (2 * psi, 2 * psi, k * psi / nd),
        "zero2": (2 * psi, 2 * psi / nd, k * psi / nd),
        "zero3": (2 * psi / nd, 2 * psi / nd, k * psi / nd),
        "fsdp2": (2 * psi / nd, 2 * psi / nd, k * psi / nd),
    }
    for stage, (p, g, o) in expected.items():
        entry = m["per_device_bytes"][stage]
        assert (entry["params_bytes"], entry["grads_bytes"], entry["optimizer_bytes"]) == (p, g, o)
        assert entry["total_bytes"] == p + g + o
        assert "activations_bytes" not in entry  # Ψ given without a shape
    assert m["per_device_bytes"]["ddp"]["total_bytes"] == 112 * GB
    assert m["fits_gpu_memory"] == {
        "ddp": False, "zero1": True, "zero2": True, "zero3": True, "fsdp2": True,
    }  # fmt: skip
    assert m["comm_bytes_per_rank"]["zero3"]["predicted_elements"] == 3 * psi
    assert m["comm_bytes_per_rank"]["ddp"]["predicted_bytes"] == 2 * psi * 63 / 64 * 2


def test_predict_70b_with_a_shape_counts_activations():
    out = playground(
        "predict", "zero", "-p", "params=70B", "-p", "dp=1024", "-p", "precision=mixed",
        "-p", "stage=zero3", "-p", "layers=80", "-p", "hidden=8192", "-p", "heads=64",
        "-p", "seq=4096", "-p", "microbatch=1", "-p", "gpu_memory=80GB", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    entry = json.loads(out.stdout)["metrics"]["per_device_bytes"]["zero3"]
    s, b, h, a, layers = 4096, 1, 8192, 64, 80
    assert entry["activations_bytes"] == layers * s * b * h * (34 + 5 * a * s / h)
    assert entry["params_bytes"] == 2 * 70e9 / 1024


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["predict", "zero", "-p", "dp=0"], "dp=0"),
        (["predict", "zero", "-p", "params=-1"], "params=-1"),
        (["predict", "zero", "-p", "params=abc"], "params=abc"),
        (["predict", "zero", "-p", "stage=zero4"], "stage must be one of"),
        (["predict", "zero", "-p", "precision=bf16"], "precision must be one of"),
        (["predict", "zero", "-p", "params=10", "-p", "dp=64"], "more ranks than"),
        (["predict", "zero", "-p", "dp=4", "-p", "ranks=8"], "give one of them"),
        (["predict", "zero", "-p", "stage=ddp,ddp"], "once"),
        (["run", "zero", "-p", "precision=mixed"], "mixed"),
        (["run", "zero", "-p", "params=7B"], "for predict"),
        (["run", "zero", "--ranks", "16"], "ranks=16"),
    ],
)
def test_bad_params_exit_2(args, needle):
    out = playground(*args)
    assert out.returncode == 2
    assert needle in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


# -- the real run ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def four_ranks() -> session.Outcome:
    """Every stage on 4 real gloo ranks, the default small MiniGPT, 2 Adam steps."""
    return session.run("zero", {"ranks": "4"}, hardware="cpu-default")


def test_every_stage_trains_like_ddp_and_ddp_like_one_process(four_ranks):
    m = four_ranks.metrics
    assert m["stages"] == ["ddp", "zero1", "zero2", "zero3", "fsdp2"]
    assert m["max_param_diff_vs_ddp"] <= 1e-5
    assert set(m["param_diff_vs_ddp"]) == {"zero1", "zero2", "zero3", "fsdp2"}
    assert m["ddp_param_diff_vs_single_process"] <= 1e-5
    # the hand-made stages do the same arithmetic as DDP: the same losses
    assert m["losses"]["zero1"] == m["losses"]["ddp"] == m["losses"]["zero3"]


def test_measured_bytes_are_the_shards(four_ranks):
    """Done means: optimizer bytes Ψ·8/4 (two fp32 moments) in ZeRO-1/2/3, grads Ψ·4/4 in
    ZeRO-2/3, params Ψ·4/4 in ZeRO-3, within the rounding of the shards; and every
    model-state category equal to the per-rank prediction exactly."""
    m, n = four_ranks.metrics, 4
    psi = m["parameters"]
    units = len(unit_numels(four_ranks.params))
    assert psi == sum(unit_numels(four_ranks.params))
    measured, predicted = m["measured_peak_bytes"], m["predicted_peak_bytes"]
    # at most one element of rounding per unit, and Adam's 4-byte step count per tensor
    slack = units * (8 + 4)
    for stage in ("zero1", "zero2", "zero3"):
        for value in measured[stage]["optimizer_bytes"]:
            assert abs(value - psi * 8 / n) <= slack, stage
    for stage in ("zero2", "zero3"):
        for value in measured[stage]["grads_bytes"]:
            assert abs(value - psi * 4 / n) <= units * 4, stage
    for value in measured["zero3"]["params_bytes"]:
        assert abs(value - psi * 4 / n) <= units * 4
    assert measured["ddp"]["optimizer_bytes"] == [psi * 8 + 4 * units] * n
    assert measured["ddp"]["params_bytes"] == measured["ddp"]["grads_bytes"] == [psi * 4] * n
    for stage in m["stages"]:
        for category in ("params", "grads", "optimizer", "buffers"):
            key = f"{category}_bytes"
            assert measured[stage][key] == predicted[stage][key], (stage, category)
        assert min(measured[stage]["activations_bytes"]) > 0
    # what each stage removes, and what ZeRO-3 adds: the gathered unit in flight
    assert measured["ddp"]["buffers_bytes"] == [0] * n
    assert min(measured["zero3"]["buffers_bytes"]) > 0


def test_bytes_sent_match_the_rings(four_ranks):
    """2(n−1)/n·Ψ·4 for DDP, ZeRO-1, ZeRO-2; 3(n−1)/n·Ψ·4 for ZeRO-3 and FSDP2 (per step)."""
    m, n = four_ranks.metrics, 4
    psi = m["parameters"]
    for stage in m["stages"]:
        factor = 3 if stage in ("zero3", "fsdp2") else 2
        expected = factor * (n - 1) / n * psi * 4
        comm = m["comm_bytes_per_rank"][stage]
        assert comm["predicted_bytes"] == expected
        for sent in comm["measured_bytes"]:
            assert abs(sent - expected) <= 0.05 * expected, stage


def test_memory_sampled_through_the_step_and_spans_pair(four_ranks):
    counters = four_ranks.measured.counters
    categories = {c.category for c in counters}
    for stage in ("ddp", "zero1", "zero2", "zero3", "fsdp2"):
        for category in ("params", "grads", "optimizer", "activations", "buffers"):
            assert f"{stage}/{category}" in categories
    assert {c.rank for c in counters} == {0, 1, 2, 3}
    # activations rise through forward and fall through backward: many distinct samples
    acts = [c.value for c in counters if c.category == "zero3/activations" and c.rank == 0]
    assert len(set(acts)) > 3
    assert set(four_ranks.measured.by_action()) == set(four_ranks.predicted.by_action())


def test_memory_bars_in_the_app_rows_and_the_html(four_ranks):
    rows = SCENARIO.memory_rows(four_ranks.params, four_ranks.metrics)
    # per stage and rank, measured beside predicted
    assert len(rows) == 5 * 4 * 2
    assert rows[0][:3] == ("ddp", 0, False) and rows[1][:3] == ("ddp", 0, True)
    assert set(rows[0][3]) == {"params", "grads", "optimizer", "activations", "buffers"}
    figure = build_memory_figure(four_ranks)
    titles = [a.text for a in figure.layout.annotations]
    assert titles == ["ddp", "zero1", "zero2", "zero3", "fsdp2"]
    bars = [t for t in figure.data if t.type == "bar"]
    assert len(bars) == 5 * 5  # one trace per (stage, category)
    page = render_html(four_ranks)
    assert len(re.findall(r"Plotly\.newPlot", page)) == 2


def test_cli_run_three_ranks_uneven_shards():
    """3 ranks do not divide the units: the shards' rounding, and FSDP2's torch.chunk rows."""
    out = playground(
        "run", "zero", "--ranks", "3", "-p", "stage=ddp,zero3,fsdp2", "--hardware",
        "cpu-default", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)["metrics"]
    assert m["max_param_diff_vs_ddp"] <= 1e-5
    for stage in ("zero3", "fsdp2"):
        measured, predicted = m["measured_peak_bytes"][stage], m["predicted_peak_bytes"][stage]
        for key in ("params_bytes", "grads_bytes", "optimizer_bytes"):
            assert measured[key] == predicted[key], (stage, key)
    # FSDP2 rounds per parameter (dim 0), hand-made ZeRO per flat unit: they differ
    assert (
        m["measured_peak_bytes"]["fsdp2"]["params_bytes"]
        != m["measured_peak_bytes"]["zero3"]["params_bytes"]
    )


def test_app_form_fields_and_shape_rule():
    """The app's form sends every field: a shape knob at its default is not 'given'."""
    form = {p.name: str(p.default) for p in SCENARIO.params}
    assert SCENARIO.resolve({**form, "params": "7B"}, "predict")["activations"] == "off"
    assert SCENARIO.resolve(form, "predict")["activations"] == "on"
    assert (
        SCENARIO.resolve({**form, "params": "7B", "layers": "32"}, "predict")["activations"] == "on"
    )


async def test_lesson_screen_predicts_and_opens_a_saved_run(four_ranks, tmp_path):
    from playground.app import PlaygroundApp
    from playground.screens.lesson import LessonScreen

    saved = tmp_path / "zero-4ranks.json"
    saved.write_text(json.dumps(four_ranks.to_doc()))
    app = PlaygroundApp(language="en")
    async with app.run_test(size=(120, 36)) as pilot:
        app.open_lesson("zero")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        await pilot.press("p")
        await pilot.pause()
        memory = screen.query_one("#memory")
        assert [(r.group, r.predicted) for r in memory.rows][:2] == [("ddp", True), ("zero1", True)]
        screen.open_path(str(saved))
        await pilot.pause()
        rows = screen.query_one("#memory").rows
        assert len(rows) == 5 * 4 * 2 and rows[0].bytes_by_category["params"] > 0
