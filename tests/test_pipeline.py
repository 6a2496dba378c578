"""Lesson 5 end to end: MiniGPT cut into stages, schedules run on real gloo ranks,
gradients equal to one process's, in-flight memory as predicted, typed params and
metrics, `playground show`, the CLI contract."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest
import torch
from test_cli import playground

from playground import session
from playground.memory_rows import memory_rows
from runtime.engine.models import GPTConfig, MiniGPT, batch, split_stages, stage_layers
from runtime.sim import formulas
from runtime.sim.profiles import PROFILES
from runtime.sim.program import Action
from runtime.sim.simulate import simulate
from runtime.sim.trace import Timeline
from scenarios.metrics import Metric, find
from scenarios.params import ParamError
from scenarios.pipeline.executor import PipelineExecutor
from scenarios.pipeline.lesson import LESSON, build, estimate, metrics
from scenarios.pipeline.params import PipelineParams, PipelineResult

SMALL = {"layers": "4", "hidden": "32", "seq": "16", "microbatch_size": "4"}
UNIT = PROFILES["unit"]


def metric(doc_metrics: list[dict], name: str, series: str | None = None) -> Metric:
    """A metric of a `--json` document, by name and series."""
    found = find([Metric.from_dict(m) for m in doc_metrics], name, series)
    assert found is not None and found.series == series, (name, series)
    return found


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


# -- typed params -------------------------------------------------------------------------
def test_params_are_typed_with_the_shared_model_shape():
    params = PipelineParams.parse({"schedule": "1f1b,zb-h1", "hidden": "32"}, "predict")
    assert params.schedule == ("1f1b", "zb-h1")
    assert (params.stages, params.microbatches, params.chunks) == (4, 8, 2)
    assert (params.model.layers, params.model.hidden, params.model.seq) == (8, 32, 64)
    assert params.world_size == 4 and PipelineParams.ranks_field == "stages"
    assert params.activation_bytes == 32 * 64 * 32 * 4
    assert params.shape("1f1b").chunks == 1 and PipelineParams().shape("interleaved").chunks == 2
    assert PipelineParams.parse(params.to_dict(), "predict") == params


@pytest.mark.parametrize(
    ("raw", "mode", "field"),
    [
        ({"schedule": "interleaved", "microbatches": "6"}, "predict", "microbatches"),
        ({"schedule": "interleaved", "chunks": "1"}, "predict", "chunks"),
        ({"stages": "1"}, "predict", "stages"),
        ({"microbatches": "257"}, "predict", "microbatches"),
        ({"schedule": "pipedream"}, "predict", "schedule"),
        ({"schedule": "gpipe,gpipe"}, "predict", "schedule"),
        ({"layers": "2"}, "predict", "layers"),
        ({"schedule": "interleaved", "layers": "7"}, "predict", "layers"),
        ({"hidden": "30"}, "predict", "hidden"),
        ({"hidden": "512", "layers": "16"}, "run", "hidden"),  # the run-size limit
        ({"stages": "9"}, "run", "stages"),
    ],
)
def test_every_rule_is_a_param_error_naming_its_field(raw, mode, field):
    with pytest.raises(ParamError) as caught:
        PipelineParams.parse(raw, mode)
    assert caught.value.field == field
    assert "\n" not in str(caught.value)


# -- prediction ------------------------------------------------------------------------------
def test_estimate_keeps_the_unit_profile_and_fills_every_stage_from_the_rates():
    params = PipelineParams.parse({"schedule": "gpipe,interleaved"}, "predict")
    assert estimate(params, UNIT) is UNIT
    profile = PROFILES["cpu-default"]
    model = estimate(params, profile)
    keys = {a.cost_key for a in build(params).actions() if a.cost_key}
    assert keys <= set(model.compute)
    # A middle stage of 4 holds 2 blocks: overhead + (2·12h² + 4sh)·tokens / rate each.
    rates, shape = profile.rates, params.model
    tokens = params.microbatch_size * shape.seq
    flops = 2 * 12 * shape.hidden**2 * tokens + 4 * shape.seq * shape.hidden * tokens
    block = rates.forward_overhead_s + flops / rates.forward_flops_per_s
    assert model.compute["F.s1of4"] == pytest.approx(2 * block)
    # the first stage adds the embedding, the last the head: both cost more
    assert model.compute["F.s0of4"] > model.compute["F.s1of4"] < model.compute["F.s3of4"]
    assert model.compute["Bi.s1of8"] == pytest.approx(model.compute["B.s1of8"] / 2)
    # A calibrated CPU's split backward: Bi and W as the fractions of B it measured.
    from scenarios.pipeline.rates import PipelineRates  # the lesson's own rates

    cpu = rates.with_lesson(PipelineRates(split_input_fraction=0.9, split_weight_fraction=0.4))
    calibrated = estimate(params, replace(profile, rates=cpu))
    assert calibrated.compute["Bi.s1of8"] == pytest.approx(0.9 * calibrated.compute["B.s1of8"])
    assert calibrated.compute["W.s1of8"] == pytest.approx(0.4 * calibrated.compute["B.s1of8"])


def test_a_run_refines_stage_costs_and_alpha_as_before():
    """compute_costs go in as measured (one rank per stage); alpha becomes the median
    of one-way p2p time − bytes·beta (the old lesson's own formula)."""
    params = PipelineParams.parse({"stages": "2", "schedule": "1f1b"}, "run")
    model = PROFILES["cpu-default"]
    nbytes = params.activation_bytes
    one_way = [3e-4, 5e-4]
    results = [
        PipelineResult(
            compute_costs={f"F.s{r}of2": 0.01 * (r + 1)},
            p2p=[(nbytes, one_way[r])],
            activations=[],
            schedules={},
        )
        for r in range(2)
    ]
    refined = LESSON.prepare_model(params, model, results)
    assert refined.alpha == pytest.approx(statistics.median(one_way) - nbytes * model.beta)
    assert refined.compute["F.s0of2"] == 0.01 and refined.compute["F.s1of2"] == 0.02
    assert "stage costs and p2p latency measured" in refined.source


def test_metrics_never_read_action_ids():
    """Ids are opaque: the same timeline with other ids gives the same metrics."""
    params = PipelineParams.parse({"schedule": "gpipe,1f1b,zb-h1"}, "predict")
    predicted = simulate(build(params), UNIT)
    renamed = Timeline(
        spans=[replace(s, action_id=f"opaque{i}") for i, s in enumerate(predicted.spans)]
    )
    assert metrics(params, renamed, None) == metrics(params, predicted, None)


def test_narrative_quotes_metrics_that_exist():
    outcome = session.predict("pipeline", {"schedule": "gpipe,1f1b,interleaved,zb-h1"}, "unit")
    names = {m.name for m in outcome.metrics}
    for step in LESSON.narrative:
        assert step.metric in names, step.id
    phases = {a.phase for a in build(outcome.params).actions()}
    assert phases <= {p for step in LESSON.narrative for p in step.phases}


def test_predict_unit_textbook_numbers():
    out = playground(
        "predict", "pipeline", "--hardware", "unit", "-p", "schedule=gpipe,1f1b,interleaved,zb-h1",
        "-p", "stages=4", "-p", "microbatches=8", "-p", "chunks=2", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)["metrics"]
    assert metric(m, "makespan_s", "gpipe").predicted == 33
    assert metric(m, "makespan_s", "1f1b").predicted == 33
    assert metric(m, "bubble_fraction", "gpipe").predicted == pytest.approx(3 / 11)
    assert metric(m, "bubble_fraction_formula", "1f1b").value == pytest.approx(3 / 11)
    assert metric(m, "makespan_s", "interleaved").predicted == 28.5
    assert metric(m, "makespan_s", "zb-h1").predicted == 27
    assert metric(m, "peak_inflight_microbatches", "gpipe").predicted == [8, 8, 8, 8]
    assert metric(m, "peak_inflight_microbatches", "1f1b").predicted == [4, 3, 2, 1]
    assert metric(m, "p2p_messages", "interleaved").value == 112
    assert metric(m, "parameters").value == 412_288
    assert metric(m, "makespan_s", "gpipe").value is None  # nothing measured yet


# -- playground show -------------------------------------------------------------------------
SHOW_1F1B = ["show", "pipeline", "-p", "schedule=1f1b", "-p", "stages=4", "-p", "microbatches=8"]
RANK0_COMPUTE = [
    "F0",
    "F1",
    "F2",
    "F3",
    "B0",
    "F4",
    "B1",
    "F5",
    "B2",
    "F6",
    "B3",
    "F7",
    "B4",
    "B5",
    "B6",
    "B7",
]


def check_rank0_tokens(tokens: list[str]) -> None:
    compute = [t for t in tokens if t[:1] in ("F", "B")]
    assert compute == RANK0_COMPUTE
    at = [i for i, t in enumerate(tokens) if t[:1] in ("F", "B")]
    between = [tokens[a + 1 : b] for a, b in zip(at, at[1:], strict=False)]
    # each forward sends its activation to rank 1 at once; each backward first
    # receives its gradient from rank 1
    for gap, before, after in zip(between, compute, compute[1:], strict=False):
        if before.startswith("F"):
            assert gap[:1] == ["→1"], (before, gap, after)
        if after.startswith("B"):
            assert gap[-1:] == ["←1"], (before, gap, after)
    assert tokens[at[-1] + 1 :] == [] and tokens[: at[0]] == ["|"]
    assert between[0] == ["→1"]  # F0 →1 F1
    assert between[3] == ["→1", "←1"]  # F3 →1 ←1 B0
    assert between[4] == []  # B0 F4 (rank 0 sends no gradient back)
    assert between[-1] == ["←1"]  # B6 ←1 B7
    assert set(tokens) - set(RANK0_COMPUTE) == {"|", "→1", "←1"}


def test_show_prints_1f1b_rank0_in_order_with_its_messages():
    out = playground(*SHOW_1F1B)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("rank 0:"))
    end = next(i for i in range(start + 1, len(lines)) if "rank 1:" in lines[i])
    text = " ".join(lines[start:end]).split(":", 1)[1]
    check_rank0_tokens(text.split())


def test_show_json_lists_rank0_actions_with_tokens_and_series():
    out = playground(*SHOW_1F1B, "--json")
    assert out.returncode == 0, out.stderr
    ranks = json.loads(out.stdout)["ranks"]
    assert len(ranks) == 4
    check_rank0_tokens([entry["token"] for entry in ranks[0]])
    assert {entry["series"] for rank in ranks for entry in rank} == {"1f1b"}


# -- real runs ----------------------------------------------------------------------------------
@pytest.mark.ranks
def test_all_schedules_on_real_ranks_match_the_reference():
    raw = {
        "schedule": "gpipe,1f1b,zb-h1,interleaved",
        "stages": "2",
        "microbatches": "4",
        "chunks": "2",
        **SMALL,
    }
    outcome = session.run("pipeline", raw)
    ms = outcome.metrics
    names = ["gpipe", "1f1b", "zb-h1", "interleaved"]
    assert [s for s in dict.fromkeys(m.series for m in ms) if s] == names
    for name in names:
        at = {m.name: m for m in ms if m.series == name}
        assert at["max_grad_diff_vs_reference"].value <= 1e-5, name
        inflight = at["peak_inflight_microbatches"]
        assert inflight.value == inflight.predicted, name
        assert at["p2p_bytes"].value == at["p2p_bytes"].predicted, name
        assert at["makespan_s"].value > 0 and at["makespan_s"].predicted > 0
        assert at["makespan_s"].error is not None
        peak = at["peak_bytes"]
        assert peak.category == "activations" and peak.per == "rank"
        assert len(peak.value) == len(peak.predicted) == 2 and min(peak.predicted) > 0
        assert at["loss"].value > 0 and len(at["cpu_s"].value) == 2
    assert find(ms, "peak_inflight_microbatches", "gpipe").predicted == [4, 4]
    assert find(ms, "peak_inflight_microbatches", "1f1b").predicted == [2, 1]
    # measured and predicted spans pair one to one, and carry their schedule
    assert set(outcome.measured.by_action()) == set(outcome.predicted.by_action())
    assert {s.series for s in outcome.measured.spans} == set(names)
    # memory was sampled from the live tensors, per rank, and makes memory bars
    inflight = [c for c in outcome.measured.counters if c.category == "inflight"]
    held = [c for c in outcome.measured.counters if c.category == "activations"]
    assert {c.rank for c in inflight} == {0, 1} and max(c.value for c in held) > 0
    bars = memory_rows(ms)
    assert {(b.group, b.rank, b.predicted) for b in bars} == {
        (s, r, p) for s in names for r in (0, 1) for p in (False, True)
    }
    assert "stage costs" in outcome.profile.source


@pytest.mark.ranks
def test_cli_run_four_stages_json():
    out = playground(
        "run", "pipeline", "-p", "schedule=gpipe,1f1b", "-p", "stages=4",
        "-p", "microbatches=8", *[f"-p{k}={v}" for k, v in SMALL.items()], "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    m = doc["metrics"]
    for name in ("gpipe", "1f1b"):
        assert metric(m, "max_grad_diff_vs_reference", name).value <= 1e-5
        inflight = metric(m, "peak_inflight_microbatches", name)
        assert inflight.value == inflight.predicted
    assert metric(m, "peak_inflight_microbatches", "gpipe").value == [8, 8, 8, 8]
    assert metric(m, "peak_inflight_microbatches", "1f1b").value == [4, 3, 2, 1]
    assert any(c["category"] == "activations" for c in doc["counters"])


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


# -- issue 35 item 5 ----------------------------------------------------------------------


def test_bubble_step_states_no_core_count_and_the_cores_are_a_fact():
    """The narrative says when ranks share cores (fewer cores than ranks), never this
    machine's count as a fact; `cpu_cores` gives the count the prediction shares."""
    bubble = LESSON.narrative[0]
    assert "four ranks share two cores" not in bubble.body["en"]
    assert "cuatro rangos comparten dos núcleos" not in bubble.body["es"]
    assert "cpu_cores" in bubble.body["en"] and "cpu_cores" in bubble.body["es"]
    params = LESSON.parse({}, "predict")
    shared = replace(PROFILES["cpu-default"], cores=3)
    assert find(LESSON.figures(params, shared)[0], "cpu_cores").value == 3
    gpu = LESSON.figures(params, PROFILES["h100-nvlink"])[0]
    assert find(gpu, "cpu_cores").value is None


def test_profile_source_says_each_refinement_once():
    """Refined after a run, then replayed on unshared cores: each step said once, the
    replay's own scaling in its own words."""
    from runtime.fit.refine import refine_compute
    from runtime.fit.replay import replay_compute

    params = LESSON.parse({"schedule": "gpipe,1f1b"}, "predict")
    program = build(params)
    model = replace(LESSON.prepare_model(params, PROFILES["cpu-default"]), cores=2)
    predicted = simulate(program, model)
    measured = Timeline(
        [replace(s, start=s.start * 1.2, end=s.end * (1.2 + 0.1 * s.rank)) for s in predicted.spans]
    )
    refined = refine_compute(model, program, measured, predicted)
    replayed = replay_compute(refined, program, measured)
    assert replayed.source.count("compute as its spans measured") == 1
    assert replayed.source.count("replayed on unshared cores (×") == 1
    assert replayed.source.startswith(refined.source)
