"""Lesson 2 end to end: DDP, ZeRO-1/2/3 and FSDP2 on real gloo ranks train like one
process, hold the bytes the shards say, send the bytes the rings say; the ZeRO
paper's calculator; the memory bars (category metrics) in the app and the HTML
export; bad input exits 2 naming its field.

Tests that start ranks are marked `ranks` (`pytest -m "not ranks"` skips them)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from test_cli import playground, predict_without_torch

from playground import session
from playground.export.html import render_html
from playground.export.memory import build_memory_figure
from playground.outcome import Outcome
from runtime.sim.units import parse_count
from scenarios.metrics import CATEGORIES, Metric
from scenarios.params import ParamError
from scenarios.zero import formulas
from scenarios.zero.lesson import LESSON
from scenarios.zero.memory import unit_numels
from scenarios.zero.params import ZeroParams
from scenarios.zero.program import build

GB = 1e9
STAGES = ["ddp", "zero1", "zero2", "zero3", "fsdp2"]


def get(metrics: list[Metric], name: str, series: str | None = None, category: str | None = None):
    """The one metric of that name, series and category (asserting it exists)."""
    found = [m for m in metrics if m.name == name and m.series == series and m.category == category]
    assert len(found) == 1, (name, series, category, len(found))
    return found[0]


def peaks(metrics: list[Metric], stage: str, *, predicted: bool = False) -> dict[str, Any]:
    """Category -> the stage's peak bytes (measured, or predicted)."""
    return {
        m.category: m.predicted if predicted else m.value
        for m in metrics
        if m.name == "peak_bytes" and m.series == stage
    }


def from_doc(doc: dict[str, Any]) -> list[Metric]:
    return [Metric.from_dict(m) for m in doc["metrics"]]


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
    ZeRO-3 two all-gathers and a reduce-scatter. Every Action carries its stage as its
    series; ids are unique. The Program validates and simulates."""
    params = LESSON.parse({"ranks": "2", "steps": "1"}, "predict")
    program = build(params)
    program.validate()
    actions = list(program.actions())
    assert len({a.id for a in actions}) == len(actions)
    assert {a.series for a in actions} == set(STAGES)
    units = len(unit_numels(params))
    for stage, expected in {
        "ddp": {"all_reduce": 1},
        "zero1": {"reduce_scatter": 1, "all_gather": 1},
        "zero2": {"reduce_scatter": 1, "all_gather": 1},
        "zero3": {"reduce_scatter": 1, "all_gather": 2},
        "fsdp2": {},
    }.items():
        kinds = [a.kind for a in program.ranks[0] if a.series == stage]
        for kind in ("all_reduce", "reduce_scatter", "all_gather"):
            assert kinds.count(kind) == expected.get(kind, 0) * units, (stage, kind)
    outcome = session.predict("zero", {"ranks": "2"}, hardware="cpu-default")
    makespans = [m for m in outcome.metrics if m.name == "makespan_s"]
    assert [m.series for m in makespans] == list(params.stage)
    assert all(m.predicted > 0 and m.value is None for m in makespans)
    # the narrative quotes metrics that exist (after a run, for the measured ones)
    named = {m.name for m in outcome.metrics} | {"param_diff_vs_ddp", "fits_gpu_memory"}
    assert {step.metric for step in LESSON.narrative} <= named


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
    m = from_doc(
        predict_without_torch(
            "zero",
            "-p",
            "params=7e9",
            "-p",
            "dp=64",
            "-p",
            "precision=mixed",
            "-p",
            "gpu_memory=80GB",
        )  # fmt: skip
    )
    psi, nd, k = 7e9, 64, 12
    expected = {
        "ddp": (2 * psi, 2 * psi, k * psi),
        "zero1": (2 * psi, 2 * psi, k * psi / nd),
        "zero2": (2 * psi, 2 * psi / nd, k * psi / nd),
        "zero3": (2 * psi / nd, 2 * psi / nd, k * psi / nd),
        "fsdp2": (2 * psi / nd, 2 * psi / nd, k * psi / nd),
    }
    for stage, (p, g, o) in expected.items():
        # the paper's bytes per device, one figure for every device (the memory bars)
        bars = peaks(m, stage, predicted=True)
        assert bars == {"params": p, "grads": g, "optimizer": o}  # Ψ given without a shape
        assert all(v is None for v in peaks(m, stage).values())
        assert get(m, "per_device_total_bytes", stage).value == p + g + o
    assert get(m, "per_device_total_bytes", "ddp").value == 112 * GB
    fits = {stage: get(m, "fits_gpu_memory", stage).value for stage in STAGES}
    assert fits == {"ddp": False, "zero1": True, "zero2": True, "zero3": True, "fsdp2": True}
    assert get(m, "comm_elements", "zero3").value == 3 * psi
    assert get(m, "comm_bytes_per_rank", "ddp").predicted == 2 * psi * 63 / 64 * 2
    assert get(m, "parameters").value == psi and get(m, "ranks").value == nd


def test_predict_70b_with_a_shape_counts_activations():
    out = playground(
        "predict", "zero", "-p", "params=70B", "-p", "dp=1024", "-p", "precision=mixed",
        "-p", "stage=zero3", "-p", "layers=80", "-p", "hidden=8192", "-p", "heads=64",
        "-p", "seq=4096", "-p", "microbatch=1", "-p", "gpu_memory=80GB", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    bars = peaks(from_doc(json.loads(out.stdout)), "zero3", predicted=True)
    s, b, h, a, layers = 4096, 1, 8192, 64, 80
    assert bars["activations"] == layers * s * b * h * (34 + 5 * a * s / h)
    assert bars["params"] == 2 * 70e9 / 1024


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["predict", "zero", "-p", "dp=0"], "ranks=0"),
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


@pytest.mark.parametrize(
    ("raw", "mode", "field"),
    [
        ({"dp": "0"}, "predict", "ranks"),
        ({"params": "10", "dp": "64"}, "predict", "ranks"),
        ({"dp": "4", "ranks": "8"}, "predict", "dp"),
        ({"stage": "ddp,ddp"}, "predict", "stage"),
        ({"precision": "mixed"}, "run", "precision"),
        ({"params": "7B"}, "run", "params"),
        ({"hidden": "30"}, "predict", "hidden"),
        ({"hidden": "512"}, "run", "hidden"),  # the run-size limit
    ],
)
def test_param_errors_name_their_field(raw, mode, field):
    with pytest.raises(ParamError) as caught:
        LESSON.parse(raw, mode)
    assert caught.value.field == field


def test_app_form_fields_and_shape_rule():
    """The app's form sends every field: a shape knob at its default is not 'given'.
    Parsing never changes a value: `params` stays `auto` and Ψ is a property."""
    form = ZeroParams().typed()
    assert not LESSON.parse({**form, "params": "7B"}, "predict").counts_activations
    default = LESSON.parse(form, "predict")
    assert default.counts_activations and default.params == "auto"
    assert default.psi == default.model.parameters == sum(unit_numels(default))
    assert LESSON.parse({**form, "params": "7B", "layers": "32"}, "predict").counts_activations
    assert LESSON.parse({**form, "params": "7B", "microbatch": "8"}, "predict").counts_activations
    assert not LESSON.parse({**form, "activations": "off"}, "predict").counts_activations
    assert LESSON.parse(default.to_dict(), "predict") == default


# -- the real run ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def four_ranks() -> Outcome:
    """Every stage on 4 real gloo ranks, the default small MiniGPT, 2 Adam steps."""
    return session.run("zero", {"ranks": "4"}, hardware="cpu-default")


@pytest.mark.ranks
def test_every_stage_trains_like_ddp_and_ddp_like_one_process(four_ranks):
    m = four_ranks.metrics
    assert [s.series for s in m if s.name == "makespan_s"] == STAGES
    assert get(m, "max_param_diff_vs_ddp").value <= 1e-5
    assert {x.series for x in m if x.name == "param_diff_vs_ddp"} == set(STAGES) - {"ddp"}
    assert get(m, "ddp_param_diff_vs_single_process").value <= 1e-5
    # the hand-made stages do the same arithmetic as DDP: the same losses
    losses = {stage: get(m, "losses", stage) for stage in STAGES}
    assert losses["ddp"].per == "step" and len(losses["ddp"].value) == 2
    assert losses["zero1"].value == losses["ddp"].value == losses["zero3"].value
    # the prediction was refined with the units the ranks timed
    assert "unit costs measured in this run" in four_ranks.profile.source
    assert all(x.value > 0 for x in m if x.name == "makespan_s")


@pytest.mark.ranks
def test_measured_bytes_are_the_shards(four_ranks):
    """Done means: optimizer bytes Ψ·8/4 (two fp32 moments) in ZeRO-1/2/3, grads Ψ·4/4 in
    ZeRO-2/3, params Ψ·4/4 in ZeRO-3, within the rounding of the shards; and every
    model-state category equal to the per-rank prediction exactly."""
    m, n = four_ranks.metrics, 4
    psi = get(m, "parameters").value
    units = len(unit_numels(four_ranks.params))
    assert psi == sum(unit_numels(four_ranks.params))
    measured = {stage: peaks(m, stage) for stage in STAGES}
    predicted = {stage: peaks(m, stage, predicted=True) for stage in STAGES}
    # at most one element of rounding per unit, and Adam's 4-byte step count per tensor
    slack = units * (8 + 4)
    for stage in ("zero1", "zero2", "zero3"):
        for value in measured[stage]["optimizer"]:
            assert abs(value - psi * 8 / n) <= slack, stage
    for stage in ("zero2", "zero3"):
        for value in measured[stage]["grads"]:
            assert abs(value - psi * 4 / n) <= units * 4, stage
    for value in measured["zero3"]["params"]:
        assert abs(value - psi * 4 / n) <= units * 4
    assert measured["ddp"]["optimizer"] == [psi * 8 + 4 * units] * n
    assert measured["ddp"]["params"] == measured["ddp"]["grads"] == [psi * 4] * n
    for stage in STAGES:
        assert set(measured[stage]) == set(CATEGORIES)
        for category in ("params", "grads", "optimizer", "buffers"):
            assert measured[stage][category] == predicted[stage][category], (stage, category)
        assert min(measured[stage]["activations"]) > 0
        assert len(predicted[stage]["activations"]) == n
    # what each stage removes, and what ZeRO-3 adds: the gathered unit in flight
    assert measured["ddp"]["buffers"] == [0] * n
    assert min(measured["zero3"]["buffers"]) > 0


@pytest.mark.ranks
def test_bytes_sent_match_the_rings(four_ranks):
    """2(n−1)/n·Ψ·4 for DDP, ZeRO-1, ZeRO-2; 3(n−1)/n·Ψ·4 for ZeRO-3 and FSDP2 (per step)."""
    m, n = four_ranks.metrics, 4
    psi = get(m, "parameters").value
    for stage in STAGES:
        factor = 3 if stage in ("zero3", "fsdp2") else 2
        expected = factor * (n - 1) / n * psi * 4
        comm = get(m, "comm_bytes_per_rank", stage)
        assert comm.predicted == expected and comm.per == "rank" and len(comm.value) == n
        for sent in comm.value:
            assert abs(sent - expected) <= 0.05 * expected, stage
        assert comm.error <= 0.05
        assert get(m, "comm_measured_vs_predicted", stage).value == max(comm.value) / expected


@pytest.mark.ranks
def test_memory_sampled_through_the_step_and_spans_pair(four_ranks):
    counters = four_ranks.measured.counters
    sampled = {(c.series, c.category) for c in counters}
    for stage in STAGES:
        for category in CATEGORIES:
            assert (stage, category) in sampled
    assert {c.rank for c in counters} == {0, 1, 2, 3}
    # activations rise through forward and fall through backward: many distinct samples
    acts = [
        c.value
        for c in counters
        if (c.series, c.category) == ("zero3", "activations") and c.rank == 0
    ]
    assert len(set(acts)) > 3
    assert set(four_ranks.measured.by_action()) == set(four_ranks.predicted.by_action())
    # every measured Span carries its stage, like its Action
    assert {s.series for s in four_ranks.measured.spans} == set(STAGES)


@pytest.mark.ranks
def test_memory_bars_are_category_metrics(four_ranks):
    """The bars are the category metrics: per stage and category, measured per rank
    beside predicted per rank (the app and the HTML export draw them)."""
    bars = [m for m in four_ranks.metrics if m.category is not None]
    assert {(m.name, m.unit, m.per) for m in bars} == {("peak_bytes", "bytes", "rank")}
    assert [(m.series, m.category) for m in bars] == [
        (stage, category) for stage in STAGES for category in CATEGORIES
    ]
    assert all(len(m.value) == len(m.predicted) == 4 for m in bars)


@pytest.mark.ranks
def test_memory_bars_in_the_html(four_ranks):
    figure = build_memory_figure(four_ranks)
    titles = [a.text for a in figure.layout.annotations]
    assert titles == STAGES
    traces = [t for t in figure.data if t.type == "bar"]
    assert len(traces) == 5 * 5  # one trace per (stage, category)
    assert all(len(t.y) == 4 * 2 for t in traces)  # each rank measured and predicted
    page = render_html(four_ranks)
    # the timeline, the per-rank utilisation panel (a real run) and the bars
    assert len(re.findall(r"Plotly\.newPlot", page)) == 3


@pytest.mark.ranks
def test_cli_run_three_ranks_uneven_shards():
    """3 ranks do not divide the units: the shards' rounding, and FSDP2's torch.chunk rows."""
    out = playground(
        "run", "zero", "--ranks", "3", "-p", "stage=ddp,zero3,fsdp2", "--hardware",
        "cpu-default", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    m = from_doc(json.loads(out.stdout))
    assert get(m, "max_param_diff_vs_ddp").value <= 1e-5
    for stage in ("zero3", "fsdp2"):
        measured, predicted = peaks(m, stage), peaks(m, stage, predicted=True)
        for key in ("params", "grads", "optimizer"):
            assert measured[key] == predicted[key], (stage, key)
    # FSDP2 rounds per parameter (dim 0), hand-made ZeRO per flat unit: they differ
    assert peaks(m, "fsdp2")["params"] != peaks(m, "zero3")["params"]


@pytest.mark.ranks
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
        rows = screen.query_one("#memory").rows
        # predicted bars only, per stage in order (per rank: Ψ is the shape's)
        assert [r.group for r in rows][:5] == ["ddp"] * 4 + ["zero1"]
        assert all(r.predicted for r in rows)
        screen.open_path(str(saved))
        await pilot.pause()
        rows = screen.query_one("#memory").rows
        assert len(rows) == 5 * 4 * 2 and rows[0].bytes_by_category["params"] > 0
        assert (rows[0].group, rows[0].predicted, rows[1].predicted) == ("ddp", False, True)


def test_shard_bytes_per_rank_written_out_for_3_ranks():
    """A one-layer MiniGPT of hidden 35 (vocab 64, seq 16) over 3 ranks: units of 2,800
    (embeddings: 64·35 + 16·35), 15,155 (a block: 12·35² + 13·35) and 2,310 (final
    LayerNorm and head: 2·35 + 64·35) elements, Ψ = 20,265. even_split gives the
    remainder to the first ranks: 2,800 = 934 + 933 + 933, 15,155 = 5,052 + 5,052 + 5,051,
    2,310 = 770 · 3; so ranks hold 6,756, 6,755 and 6,754 elements (4 bytes each). Adam:
    two fp32 moments per element held plus a 4-byte step count per unit (3)."""
    from scenarios.zero.memory import predicted_rank_bytes

    params = ZeroParams.parse(
        {"ranks": "3", "layers": "1", "hidden": "35", "heads": "5", "vocab": "64"}, "run"
    )
    assert unit_numels(params) == [2_800, 15_155, 2_310]
    optimizer = [6_756 * 8 + 12, 6_755 * 8 + 12, 6_754 * 8 + 12]
    assert optimizer == [54_060, 54_052, 54_044]
    zero3 = predicted_rank_bytes(params, "zero3")
    assert zero3["params"] == [27_024, 27_020, 27_016]
    assert zero3["grads"] == [27_024, 27_020, 27_016]
    assert zero3["optimizer"] == optimizer
    assert zero3["buffers"] == [2 * 15_155 * 4] * 3  # the largest unit gathered, its grads
    zero2 = predicted_rank_bytes(params, "zero2")
    assert zero2["params"] == [20_265 * 4] * 3  # every rank holds all the params
    assert zero2["grads"] == [27_024, 27_020, 27_016]
    assert zero2["optimizer"] == optimizer
    assert zero2["buffers"] == [15_155 * 4] * 3  # one unit's gradient bucket
    zero1 = predicted_rank_bytes(params, "zero1")
    assert zero1["params"] == zero1["grads"] == [81_060] * 3
    assert zero1["optimizer"] == optimizer


def test_parameter_tensors_count_the_minigpt():
    """The shape's tensor count (FSDP2's per-tensor overheads scale with it) is the model's."""
    from runtime.engine.models import GPTConfig, MiniGPT
    from scenarios.shape import GPTShape

    for layers in (1, 2, 5):
        shape = GPTShape(layers=layers)
        model = MiniGPT(GPTConfig.from_shape(shape))
        assert shape.parameter_tensors == len(list(model.parameters()))


def test_fsdp2_estimate_adds_its_overheads_and_bytes():
    """Before a run, FSDP2's forward is ZeRO-3's FLOPs plus its per-tensor overheads and
    its all-gathers' bytes at the link's bandwidth; its Adam pays per tensor too."""
    from dataclasses import replace

    from runtime.sim.compute import TYPICAL_CPU
    from runtime.sim.costmodel import CostModel
    from scenarios.zero.program import estimate

    params = ZeroParams()
    base = CostModel("t", alpha=1e-5, beta=1e-9, gamma=0.0, rates=TYPICAL_CPU)
    costs = estimate(params, base).compute
    units = len(unit_numels(params))
    flops_f = sum(costs[f"F.u{u}"] for u in range(units))
    flops_b = sum(costs[f"B.u{u}"] for u in range(units))
    tensors = params.model.parameter_tensors
    moved = params.psi * 4 * 3 / 4 * 1e-9
    assert costs["F.fsdp2"] == pytest.approx(flops_f + tensors * 3e-4 + moved)
    assert costs["B.fsdp2"] == pytest.approx(flops_b + tensors * 3e-4 + 2 * moved)
    # The hand-made stages' Adam steps one flat tensor per unit, FSDP2's one fused Adam.
    # Written out: Ψ = 30,080 over 4 ranks is 7,520 elements each, at 3 ns per element
    # and 20 µs per tensor (TYPICAL_CPU); 4 units by hand, 1 fused tensor in FSDP2,
    # which adds 1.5e-4 s per parameter tensor (29).
    assert (params.psi, params.ranks, units, tensors) == (30_080, 4, 4, 29)
    assert costs["opt.zero3"] == pytest.approx(7_520 * 3e-9 + 4 * 20e-6)  # 1.0256e-4 s
    assert costs["opt.fsdp2"] == pytest.approx(7_520 * 3e-9 + 20e-6 + 29 * 1.5e-4)  # 4.39256e-3
    assert costs["opt.fsdp2.first"] == pytest.approx(costs["opt.fsdp2"] + tensors * 5e-3)
    first = [a for a in build(params).actions() if a.kind == "opt" and a.series == "fsdp2"]
    assert {a.cost_key for a in first if a.step == 0} == {"opt.fsdp2.first"}
    assert {a.cost_key for a in first if a.step == 1} == {"opt.fsdp2"}
    from scenarios.zero.rates import ZeroRates  # the lesson's own rates

    slower = TYPICAL_CPU.with_lesson(ZeroRates(sharded_forward_s=1e-3))
    assert estimate(params, replace(base, rates=slower)).compute["F.fsdp2"] > costs["F.fsdp2"]


def test_sharded_overheads_fit():
    from scenarios.zero.rates import fit  # the lesson's probe's fit

    rows = [[29.0, 0.03, 0.05, 0.01, 0.001, 0.002, 0.0005, 0.29]] * 3
    fitted = fit({"sharded": rows})
    assert fitted is not None
    assert fitted.sharded_forward_s == pytest.approx(0.029 / 29)
    assert fitted.sharded_backward_s == pytest.approx(0.048 / 29)
    assert fitted.sharded_adam_s == pytest.approx(0.0095 / 29)
    assert fitted.sharded_first_adam_s == pytest.approx(0.01)
    assert fit({"sharded": []}) is None
