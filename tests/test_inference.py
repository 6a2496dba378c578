"""Lesson 7, distributed inference: the pure mechanism, the Program, predict and refusals.

The scheduler's decisions (continuous vs static batching, a finished slot
reused at once, prefix caching, routing), the paged KV bookkeeping, the
Program's collectives, `predict` with a real model shape and its config search,
the lumped prediction against the full simulation, and one-line refusals. The
real ranks are in tests/test_inference_ranks.py.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import replace

import pytest
from test_hostile_replay import cli, one_line_error

from runtime.sim.profiles import PROFILES
from runtime.sim.simulate import simulate
from runtime.sim.trace import Timeline
from scenarios.inference import report
from scenarios.inference.blocks import BlockManager
from scenarios.inference.latency import occupancy, served
from scenarios.inference.lesson import LESSON
from scenarios.inference.params import InferenceParams
from scenarios.inference.plan import Serving, plan
from scenarios.inference.predict import lump, on_clock
from scenarios.inference.program import layout
from scenarios.inference.stepmodel import Shape, planning_device
from scenarios.inference.trace import Request, TraceSpec, make_trace
from scenarios.inference.trace import draw_length as trace_length
from scenarios.metrics import find

SMALL = Shape(layers=2, hidden=64, heads=4, kv_heads=4, head_dim=16, vocab=64, seq=64)


def planned(serving: Serving, spec: TraceSpec):
    return plan(SMALL, planning_device(), serving, make_trace(spec))


def latencies(p):
    n = len(p.iterations)
    return served(p, [it.end for it in p.iterations], [0.0] * n)


# -- the paged KV cache ----------------------------------------------------------------
def test_blocks_grow_one_at_a_time_and_prefix_blocks_are_shared_then_kept():
    pool = BlockManager(num_blocks=8, block_size=4)
    prompt = tuple(range(10))  # two full blocks and a tail
    assert pool.can_admit(prompt, 12)
    assert pool.admit(0, prompt, 12) == 0  # nothing cached yet
    table = pool.write(0, prompt, 10)
    assert len(table) == 3 and pool.used_slots() == (10, 12)
    # Same first 8 tokens: both full blocks are found and skipped.
    assert pool.admit(1, prompt[:8] + (99, 98), 12) == 8
    assert pool.tables[1].blocks == list(table[:2])
    pool.finish(0)
    pool.finish(1)
    assert pool.used_slots() == (0, 0)
    assert pool.admit(2, prompt, 12) == 8  # kept, evictable, found again


def test_admission_counts_the_blocks_running_sequences_will_still_need():
    pool = BlockManager(num_blocks=4, block_size=4)
    pool.admit(0, (1, 2), 16)  # will take all 4 blocks
    pool.write(0, (1, 2), 2)
    assert not pool.can_admit((3, 4), 4)


# -- batching ---------------------------------------------------------------------------
BURST = TraceSpec(
    requests=12, rate=1000.0, prompt_len=8, output_len=12, lengths="exponential", seed=3
)


def test_a_finished_requests_slot_is_reused_in_the_next_iteration():
    p = planned(Serving(max_batch=2), BURST)  # every request there at once, 2 slots
    seen: set[int] = set()
    for it, nxt in zip(p.iterations, p.iterations[1:], strict=False):
        seen |= {piece.request for piece in it.pieces}
        if any(piece.leaves for piece in it.pieces) and len(seen) < len(p.requests):
            assert nxt.prefill  # the very next iteration admits the head of the queue
            assert [piece.request for piece in nxt.pieces] == [min(set(range(12)) - seen)]
            return
    pytest.fail("no request left while another waited")


def test_static_batching_lets_nobody_join_until_the_whole_batch_is_done():
    p = planned(Serving(max_batch=4, batching="static"), BURST)
    batch: set[int] = set()
    for it in p.iterations:
        members = {piece.request for piece in it.pieces}
        if it.prefill:
            assert not batch  # the previous batch has left entirely
            batch = set(members)
        else:
            assert members == batch  # finished members stay, as padding
        if any(piece.leaves for piece in it.pieces):
            assert all(piece.leaves for piece in it.pieces)
            batch = set()
    assert any(piece.padding for it in p.iterations for piece in it.pieces)


def test_continuous_batching_beats_static_on_throughput_at_the_same_rate_and_seed():
    spec = TraceSpec(
        requests=24, rate=200.0, prompt_len=8, output_len=12, lengths="exponential", seed=1
    )
    cont = latencies(planned(Serving(max_batch=4), spec))
    static = latencies(planned(Serving(max_batch=4, batching="static"), spec))
    assert cont.tokens == static.tokens  # the same answers, padding not counted
    assert cont.throughput > static.throughput
    # The same through the lesson's prediction (the simulated Program).
    got = {}
    for batching in ("continuous", "static"):
        params = LESSON.parse(
            {
                "batching": batching,
                "rate": "200",
                "requests": "24",
                "lengths": "exponential",
                "max_batch": "4",
                "seed": "1",
                "seq": "128",
            },
            "run",
        )
        model = LESSON.prepare_model(params, PROFILES["cpu-default"])
        metrics = LESSON.metrics(params, simulate(LESSON.build(params), model), None)
        got[batching] = find(metrics, "throughput_tokens_s", "tp").predicted
    assert got["continuous"] > got["static"]


# -- routing and prefix caching ----------------------------------------------------------------
SHARED = TraceSpec(
    requests=64, rate=50.0, prompt_len=4, output_len=6, prefixes=8, prefix_len=40, seed=0
)
WIDER = Shape(layers=4, hidden=128, heads=4, kv_heads=4, head_dim=32, vocab=64, seq=64)


def test_prefix_affinity_hits_the_cache_and_lowers_ttft_against_round_robin():
    """8 long prefixes, 4 replicas whose KV pools hold about 3 of them: round-robin sends
    every prefix everywhere and evicts; affinity keeps each prefix on one replica."""
    requests = make_trace(SHARED)
    affinity = plan(
        WIDER,
        planning_device(),
        Serving(replicas=4, router="prefix-affinity", kv_blocks=24),
        requests,
    )
    robin = plan(WIDER, planning_device(), Serving(replicas=4, kv_blocks=24), requests)
    hits = sum(it.hits for it in affinity.iterations)
    assert hits > sum(it.hits for it in robin.iterations) > 0
    assert latencies(affinity).p("ttft", 50) < latencies(robin).p("ttft", 50)
    # Requests sharing a prefix went to one replica.
    where = {}
    for it in affinity.iterations:
        for piece in it.pieces:
            prefix = affinity.requests[piece.request].prefix
            where.setdefault(prefix, set()).add(it.engine)
    assert all(len(engines) == 1 for engines in where.values())  # one replica per prefix


def test_paged_cache_wastes_less_than_contiguous_max_length_slots():
    occ = occupancy(planned(Serving(max_batch=8), BURST))
    assert 0 <= occ.paged_waste < 0.5 < occ.contiguous_waste < 1


# -- the Program ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["tp", "pp", "replicas"])
def test_program_validates_and_every_iteration_is_on_the_timeline(mode):
    params = LESSON.parse(
        {"mode": mode, "ranks": "4" if mode == "replicas" else "2", "prefixes": "2"}, "run"
    )
    program, indexes = layout(params)
    program.validate()
    timeline = simulate(program, LESSON.prepare_model(params, PROFILES["cpu-default"]))
    ids = {s.action_id for s in timeline.spans}
    assert all(marker in ids for marker in indexes[0].marker)


def test_tp_decode_runs_two_all_reduces_per_layer_and_one_gather():
    params = LESSON.parse({"mode": "tp", "ranks": "2", "layers": "3"}, "run")
    program, (index,) = layout(params)
    decode = next(k for k, it in enumerate(index.plan.iterations) if not it.prefill)
    kinds = [a.kind for a in program.ranks[0] if a.step == decode]
    assert kinds.count("all_reduce") == 2 * 3 and kinds.count("all_gather") == 1
    assert (
        find(
            LESSON.metrics(
                params,
                simulate(program, LESSON.prepare_model(params, PROFILES["cpu-default"])),
                None,
            ),
            "collectives_per_decode_step",
            "tp",
        ).predicted
        == 7
    )


def test_request_lanes_put_each_requests_ttft_and_decode_where_the_timeline_has_them():
    params = LESSON.parse({"mode": "tp,pp", "ranks": "2"}, "run")
    program, indexes = layout(params)
    timeline = simulate(program, LESSON.prepare_model(params, PROFILES["cpu-default"]))
    figures = LESSON.lanes(params, timeline, None)
    assert [f.title.split(":")[0] for f in figures] == ["tp", "pp"]
    for figure, index in zip(figures, indexes, strict=True):
        seen = report.read_timeline(index, timeline)
        assert len(figure.lanes) == params.requests and figure.omitted == 0
        for lane in figure.lanes:
            assert lane.label.startswith("req ")  # a request, never a rank's "r0"
            rid = int(lane.label.removeprefix("req "))
            (_, arrived, first), (_, start, last) = lane.phases
            assert lane.source == "predicted" and arrived <= first == start <= last
            assert first - arrived == pytest.approx(seen.ttft[rid])
            output_len = next(r.output_len for r in index.plan.requests if r.id == rid)
            assert (last - first) / (output_len - 1) == pytest.approx(seen.tpot[rid])
    # With a measured timeline, each request has a measured lane above its predicted one.
    both = LESSON.lanes(params, timeline, timeline)[0].lanes
    assert [lane.source for lane in both[:2]] == ["measured", "predicted"]


def test_html_export_draws_the_request_lanes(tmp_path):
    from playground.export.html import write_html
    from playground.session import predict

    out = tmp_path / "inference.html"
    write_html(predict("inference", {"mode": "pp", "ranks": "2"}), out)
    assert "pp: each request, arrival" in out.read_text()  # plotly writes → as \\u2192
    # Past LANE_REQUESTS requests, the first ones are drawn and the rest counted.
    params = LESSON.parse({"mode": "replicas", "ranks": "2", "requests": "60"}, "run")
    timeline = simulate(LESSON.build(params), LESSON.prepare_model(params, PROFILES["cpu-default"]))
    (figure,) = LESSON.lanes(params, timeline, None)
    assert len(figure.lanes) == report.LANE_REQUESTS and figure.omitted == 60 - report.LANE_REQUESTS
    # A lumped prediction (a GPU profile's clock) has no Actions to read requests off.
    gpu = predict("inference", {"mode": "tp", "ranks": "2"}, "h100-nvlink")
    assert gpu.lesson.lanes(gpu.params, gpu.predicted, None) == []


def test_metrics_never_read_action_ids():
    params = LESSON.parse({"mode": "tp,replicas", "ranks": "2"}, "run")
    program = LESSON.build(params)
    timeline = simulate(program, LESSON.prepare_model(params, PROFILES["cpu-default"]))
    names = {m.name for m in LESSON.metrics(params, timeline, None)}
    assert {"ttft_p50_s", "tpot_p50_s", "goodput_rps", "kv_waste_fraction"} <= names


def test_narrative_quotes_metrics_that_exist():
    params = LESSON.parse({"mode": "tp,pp"}, "predict")
    model = LESSON.prepare_model(params, PROFILES["cpu-default"])
    names = {m.name for m in LESSON.predict(params, model)[1]}
    for step in LESSON.narrative:
        assert step.metric in names, step.id


# -- predict ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["tp", "pp", "replicas"])
def test_lumped_prediction_equals_the_simulated_program(mode):
    """predict plans on the profile's clock; on the planning clock it is the Program's
    simulation, to rounding."""
    params = LESSON.parse({"mode": mode, "prefixes": "2", "router": "prefix-affinity"}, "run")
    model = LESSON.prepare_model(params, PROFILES["cpu-default"])
    simulated = LESSON.metrics(params, simulate(LESSON.build(params), model), None)
    lumped = on_clock(params, model).metrics
    for metric in simulated:
        if isinstance(metric.predicted, float):
            twin = find(lumped, metric.name, metric.series)
            assert math.isclose(metric.predicted, twin.predicted, rel_tol=1e-9), metric.name


def test_predict_a_real_model_shape_kv_bytes_and_config_search():
    status, out, err = cli(
        "predict",
        "inference",
        "-p",
        "layers=32",
        "-p",
        "kv_heads=8",
        "-p",
        "head_dim=128",
        "-p",
        "dtype=bf16",
        # The GPU this shape is served on: on this machine's own calibration (the suite
        # calibrates under load) no config may meet the SLO, and the search is empty.
        "--hardware",
        "h100-nvlink",
        "--json",
    )
    assert status == 0, err
    metrics = json.loads(out)["metrics"]
    by_name = {m["name"]: m for m in metrics if "series" not in m}
    assert by_name["kv_bytes_per_token"]["value"] == 131072  # 2 * 32 * 8 * 128 * 2
    assert by_name["configs_searched"]["value"] > 0
    assert by_name["best_configs"]["value"]
    assert by_name["disaggregated"]["value"].startswith("4 prefill + 4 decode GPUs")


def test_config_search_on_a_gpu_leaves_out_layouts_whose_weights_do_not_fit():
    params = LESSON.parse(
        {
            "layers": "80",
            "hidden": "8192",
            "heads": "64",
            "kv_heads": "8",
            "head_dim": "128",
            "dtype": "fp32",
            "vocab": "128000",
            "params": "70B",
            "seq": "4096",
            "prompt_len": "256",
            "output_len": "64",
            "rate": "2",
            "requests": "32",
            "ttft_slo": "2s",
            "tpot_slo": "0.2s",
            "kv_block": "16",
        },
        "predict",
    )
    metrics = lump(params, PROFILES["h100-nvlink"]).metrics
    assert find(metrics, "weights_fit", "tp").value is False  # 280 GB on 2 GPUs of 80 GB
    best = find(metrics, "best_configs").value
    assert best and all("tp=1 pp=1" not in line for line in best)


# -- refusals -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["run", "inference", "--ranks", "3", "-p", "mode=tp"], "tp"),
        (["predict", "inference", "-p", "tp=3"], "tp"),
        (["predict", "inference", "-p", "rate=0"], "rate"),
        (["predict", "inference", "-p", "rate=-1"], "rate"),
        (["predict", "inference", "-p", "ttft_slo=0s"], "ttft_slo"),
        (["predict", "inference", "-p", "tpot_slo=0"], "tpot_slo"),
        (["predict", "inference", "-p", "prompt_len=100"], "prompt_len"),
        (["run", "inference", "-p", "kv_heads=2"], "kv_heads"),
        (["run", "inference", "-p", "mode=pp", "-p", "pp=4"], "pp"),
        (["predict", "inference", "-p", "kv_blocks=2"], "kv_blocks"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_field(args, field):
    line = one_line_error(*cli(*args))
    assert field in line


def test_params_round_trip():
    params = LESSON.parse({"mode": "tp,pp", "rate": "12.5", "ttft_slo": "0.5s"}, "run")
    assert isinstance(params, InferenceParams)
    assert LESSON.parse(params.to_dict(), "run") == params


def test_trace_is_seeded():
    spec = TraceSpec(requests=5, rate=3.0, prompt_len=4, output_len=3, seed=7)
    assert make_trace(spec) == make_trace(spec)
    assert all(isinstance(r, Request) for r in make_trace(spec))


def drawn_one_by_one(spec: TraceSpec) -> tuple[Request, ...]:
    """The trace as random's own calls draw it, request after request: the reference
    make_trace keeps to while it draws a seed's prompts once for every rate."""
    rng = random.Random(f"inference-trace:{spec.seed}")
    shared = [
        tuple(rng.randrange(spec.vocab) for _ in range(spec.prefix_len))
        for _ in range(spec.prefixes)
    ]
    out, t = [], 0.0
    for rid in range(spec.requests):
        t += rng.expovariate(spec.rate)
        prefix = rng.randrange(spec.prefixes) if spec.prefixes else None
        own = trace_length(rng, spec.prompt_len, spec.lengths)
        tokens = tuple(rng.randrange(spec.vocab) for _ in range(own))
        head = shared[prefix] if prefix is not None else ()
        output = trace_length(rng, spec.output_len, spec.lengths)
        out.append(Request(rid, t, head + tokens, output, prefix))
    return tuple(out)


@pytest.mark.parametrize("lengths", ["fixed", "uniform", "exponential"])
@pytest.mark.parametrize("prefixes", [0, 3])
def test_the_trace_at_any_rate_and_length_is_the_seeds_own_draw(lengths, prefixes):
    """The goodput curve's traces (other rates, the first requests) reuse a seed's
    draws: each is still what drawing it alone gives, longer before shorter too."""
    for requests, rate, seed in itertools.product([300, 128, 7, 1], [0.3, 10.0, 1e9], [0, 5]):
        spec = TraceSpec(requests, rate, 12, 9, lengths, prefixes, 5, 64, seed)
        assert make_trace(spec) == drawn_one_by_one(spec)


# -- real ranks ---------------------------------------------------------------------------------------
def series_metrics(metrics: list[dict], series: str) -> dict:
    return {m["name"]: m for m in metrics if m.get("series") == series}


@pytest.mark.ranks
def test_tp_and_pp_decode_on_two_ranks_give_torchs_greedy_tokens():
    status, out, err = cli("run", "inference", "--ranks", "2", "-p", "mode=tp,pp", "--json")
    assert status == 0, err
    report = json.loads(out)
    metrics = report["metrics"]
    for series in ("tp", "pp"):
        got = series_metrics(metrics, series)
        assert got["tokens_equal_reference"]["value"] is True, series
        assert got["requests_answered"]["value"] == 16
    tp = series_metrics(metrics, "tp")["collectives_per_decode_step"]
    assert tp["value"] == tp["predicted"] == 2 * 2 + 1  # 2 layers: 4 all-reduces + 1 gather
    # After the run, the model holds the gap its ranks left between two actions, per
    # series (runtime.fit.refine.refine_dispatch), and the prediction puts it before each one.
    gap = report["profile"]["corrections"]["series_dispatch"]["tp"]
    assert 0 < gap < 1e-3
    predicted = sorted(
        (s for s in report["predicted"] if s["rank"] == 0 and s.get("series") == "tp"),
        key=lambda s: s["start"],
    )
    gaps = [b["start"] - a["end"] for a, b in itertools.pairwise(predicted)]
    assert min(gaps) == pytest.approx(gap)


@pytest.mark.ranks
def test_replicas_with_prefix_affinity_and_static_batching_on_four_ranks():
    status, out, err = cli(
        "run", "inference", "--ranks", "4", "-p", "mode=replicas", "-p", "router=prefix-affinity",
        "-p", "batching=static", "-p", "prefixes=8", "-p", "prefix_len=40", "-p", "prompt_len=4",
        "-p", "output_len=6", "-p", "kv_blocks=24", "-p", "requests=24", "--json",
    )  # fmt: skip
    assert status == 0, err
    got = series_metrics(json.loads(out)["metrics"], "replicas")
    assert got["tokens_equal_reference"]["value"] is True
    assert got["prefix_hit_tokens"]["value"] > 0
    assert got["requests_answered"]["value"] == 24


# -- goodput curve, concurrency (issue 35 item 5) ----------------------------------------


def _predicted_goodput(outcome, series="tp"):
    return find(outcome.metrics, "goodput_rps", series).predicted


@pytest.mark.parametrize("hardware", ["cpu-default", "h100-nvlink"])
def test_goodput_curve_passes_through_the_predicted_goodput(hardware):
    """The curve is the lesson's own prediction at each rate (simulated on a CPU profile,
    planned on a GPU profile's clock): at the lesson's rate it is the metric it predicts,
    and its title says where it was predicted."""
    from playground.session import predict
    from scenarios.inference.goodput import RATE_FACTORS

    outcome = predict("inference", {"mode": "tp", "ranks": "2"}, hardware)
    (curve,) = outcome.curves
    at = RATE_FACTORS.index(1.0)
    assert curve.x[at] == outcome.params.rate
    assert curve.lines["tp predicted"][at] == pytest.approx(_predicted_goodput(outcome))
    assert f"predicted on {outcome.profile.name}" in curve.title
    assert curve.text(curve.title, "es") != curve.title  # said in Spanish too
    assert not any(name.endswith("(this run)") for name in curve.lines)  # no run, no point


def test_a_long_trace_s_curve_samples_the_other_rates_but_not_its_own():
    """Past CURVE_REQUESTS requests the other rates replay the trace's start (predict
    stays cheap), the lesson's own rate the whole trace: still the predicted goodput."""
    from playground.session import predict
    from scenarios.inference.goodput import CURVE_REQUESTS, RATE_FACTORS

    raw = {"mode": "tp", "ranks": "2", "requests": str(CURVE_REQUESTS + 72)}
    outcome = predict("inference", raw, "h100-nvlink")
    (curve,) = outcome.curves
    at = RATE_FACTORS.index(1.0)
    assert curve.lines["tp predicted"][at] == pytest.approx(_predicted_goodput(outcome))
    assert f"first {CURVE_REQUESTS} requests" in curve.title
    assert all(y is not None and y >= 0 for y in curve.lines["tp predicted"])


def test_goodput_curve_shows_the_runs_goodput_beside_the_prediction():
    """After a run: the curve is predicted with the model the metrics were (replayed on
    the run's spans) and the run's goodput is one point, at its rate."""
    from runtime.fit.replay import replay_compute
    from scenarios.base import RunData
    from scenarios.inference.goodput import RATE_FACTORS, goodput_curve

    params = LESSON.parse({"mode": "tp", "ranks": "2"}, "run")
    model = LESSON.prepare_model(params, replace(PROFILES["cpu-default"], cores=2))
    program, indexes = layout(params)
    predicted = simulate(program, model)
    measured = Timeline([replace(s, start=s.start * 1.3, end=s.end * 1.3) for s in predicted.spans])
    run = RunData(measured, [])
    curve = goodput_curve(params, model, run, layout)
    at = RATE_FACTORS.index(1.0)
    point = curve.lines["tp measured (this run)"]
    seen = report.read_timeline(indexes[0], measured).goodput(params.ttft_slo, params.tpot_slo)
    assert point[at] == pytest.approx(seen)
    assert [y for k, y in enumerate(point) if k != at] == [None] * (len(point) - 1)
    # The prediction beside the run: the session simulates the model replayed on it.
    beside = simulate(program, replay_compute(model, program, measured))
    want = report.read_timeline(indexes[0], beside).goodput(params.ttft_slo, params.tpot_slo)
    assert curve.lines["tp predicted"][at] == pytest.approx(want)
    assert "refined by this run" in curve.title


def test_meets_slo_is_the_runs_beside_the_predictions():
    from scenarios.base import RunData

    params = LESSON.parse({"mode": "tp", "ranks": "2"}, "run")
    program, _ = layout(params)
    timeline = simulate(program, LESSON.prepare_model(params, PROFILES["cpu-default"]))
    before = find(LESSON.metrics(params, timeline, None), "meets_slo", "tp")
    assert before.value is None and isinstance(before.predicted, bool)
    # A run whose every request is late: it does not meet the SLO, whatever was predicted.
    late = Timeline([replace(s, start=s.start * 50, end=s.end * 50) for s in timeline.spans])
    after = LESSON.metrics(params, timeline, RunData(late, []))
    assert find(after, "meets_slo", "tp").value is False
    assert find(after, "goodput_rps", "tp").value == 0.0


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"rate": "1000"},
        {"mode": "replicas", "ranks": "2", "rate": "500"},
        {"mode": "pp", "ranks": "2", "rate": "500"},
    ],
)
def test_max_concurrent_sequences_is_what_the_plan_runs_at_once(raw):
    """At most the requests and max_batch per engine; the KV pool's capacity (more than
    the requests when it is large) is its own metric."""
    params = LESSON.parse({"mode": "tp", "ranks": "2", **raw}, "predict")
    program, indexes = layout(params)
    model = LESSON.prepare_model(params, PROFILES["cpu-default"])
    metrics = LESSON.metrics(params, simulate(program, model), None)
    for index in indexes:
        engines = index.plan.serving.replicas * index.plan.serving.pp
        most = find(metrics, "max_concurrent_sequences", index.series).value
        widest = max(
            len({p.request for p in it.pieces if not p.padding}) for it in index.plan.iterations
        )
        assert widest <= most <= min(params.requests, params.max_batch * engines)
    capacity = find(metrics, "kv_capacity_sequences", params.mode[0]).value
    if not raw:
        assert capacity == 25 > params.requests  # 128 blocks, 5 for the longest request


def test_timeline_labels_requests_apart_from_ranks():
    params = LESSON.parse({"mode": "tp", "ranks": "2"}, "run")
    labels = {a.label for a in LESSON.build(params).actions() if a.label}
    assert any("prefill req 0" in label for label in labels)
    assert not any(" r0" in label or label.startswith("r0") for label in labels)
