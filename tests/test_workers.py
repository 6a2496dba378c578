"""Issue 13, the pure part: per-rank figures, the straggler, the slow fault and its prediction.

No rank process here: the slow fault's parsing, the simulator's slowed rank
(exact numbers on tiny Programs), each rank's compute, transfers, waits, idle
time, bytes and memory from hand-made timelines, the verdicts (per step, and a
run's majority), the live view's closed steps, the prediction of the slowed
zero run, the replay schema of `workers`, the HTML panel, the Workers tab's
snapshot (from a saved slowed run) and the Prometheus endpoint (fed by hand).
The real runs are in tests/test_workers_ranks.py.
"""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest
from cli_server import run_cli

from playground import session
from playground.saved import replay
from playground.worker_figures import workers_of
from runtime.engine.faults import parse_fault, slow_factors
from runtime.engine.live_workers import LiveWorkers, workers_report
from runtime.engine.stragglers import Verdict, run_verdict
from runtime.sim.costmodel import CostModel, slowed
from runtime.sim.program import Action, Program
from runtime.sim.simulate import simulate, simulate_lockstep
from runtime.sim.trace import Counter, Mark, Span, Timeline

DATA = Path(__file__).parent / "data"
SLOW_RUN = DATA / "zero-slow-4ranks.json"
FREE = CostModel("free", alpha=0.0, beta=0.0, gamma=0.0, compute={"c": 1.0})


# -- the slow fault ------------------------------------------------------------------------
def test_slow_fault_parses_and_says_itself() -> None:
    fault = parse_fault("slow:rank=2,factor=3", 4)
    assert (fault.kind, fault.rank, fault.factor) == ("slow", 2, 3.0)
    assert fault.describe() == "slow:rank=2,factor=3"
    assert slow_factors([fault, parse_fault("slow:rank=2,factor=1.5", 4)]) == {2: 4.5}


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("slow:rank=2,factor=0", "factor must be a number from 1 to 100"),
        ("slow:rank=2,factor=-1", "factor must be a number from 1 to 100"),
        ("slow:rank=2,factor=nan", "factor must be a number from 1 to 100"),
        ("slow:rank=2,factor=inf", "factor must be a number from 1 to 100"),
        ("slow:rank=2,factor=1e400", "factor must be a number from 1 to 100"),
        ("slow:rank=2,factor=fast", "factor must be a number"),
        ("slow:rank=4,factor=3", "rank must be in 0..3"),
        ("slow:rank=2", "slow takes factor,rank"),
    ],
)
def test_bad_slow_faults_are_refused(spec: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        parse_fault(spec, 4)


def _playground(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    # Its own process (tests/cli_server.py): these commands are refused before any rank.
    return run_cli(args, env={**os.environ, "PLAYGROUND_LANG": "en", **(env or {})}, timeout=120)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--fault", "slow:rank=2,factor=0"], "factor must be"),
        (["--fault", "slow:rank=2,factor=-1"], "factor must be"),
        (["--fault", "slow:rank=9,factor=3"], "rank must be in 0..3"),
        (["--metrics-port", "70000"], "a TCP port is a number from 1 to 65535"),
        (["--metrics-port", "0"], "a TCP port is a number from 1 to 65535"),
    ],
)
def test_bad_input_exits_2_in_one_line(extra: list[str], needle: str) -> None:
    out = _playground("run", "zero", "--ranks", "4", *extra)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr
    assert "rank logs" not in out.stdout


def test_a_port_in_use_exits_2_before_any_rank_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _playground("run", "zero", "--ranks", "4", "--metrics-port", str(port))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in lines[0]
    assert "rank logs" not in out.stdout  # no run directory: no rank ever started


def test_bad_settings_of_the_environment_exit_2() -> None:
    out = _playground("predict", "zero", env={"PLAYGROUND_STRAGGLER_RATIO": "0.5"})
    assert out.returncode == 2 and "PLAYGROUND_STRAGGLER_RATIO" in out.stderr
    out = _playground(env={"PLAYGROUND_METRICS_PORT": "http"})
    assert out.returncode == 2 and "PLAYGROUND_METRICS_PORT=http" in out.stderr


# -- the simulator slows the same rank ----------------------------------------------------------
def two_ranks(reduce_bytes: int = 0) -> Program:
    program = Program(2)
    group = (0, 1)
    for r in group:
        program.extend([Action(f"c@{r}", r, "compute", cost_key="c")])
        program.extend([Action(f"ar@{r}", r, "all_reduce", bytes=0, group=group)])
    if reduce_bytes:
        program.extend([Action("s@0", 0, "send", dst=1, bytes=reduce_bytes)])
        program.extend([Action("r@1", 1, "recv", src=0, bytes=reduce_bytes, reduce=True)])
    return program


def spans_of(timeline: Timeline) -> dict[str, tuple[float, float]]:
    return {s.action_id: (s.start, s.end) for s in timeline.spans}


def test_a_slowed_rank_computes_factor_times_longer_and_its_peer_waits() -> None:
    spans = spans_of(simulate(two_ranks(), slowed(FREE, {1: 3.0})))
    assert spans["c@0"] == (0.0, 1.0) and spans["c@1"] == (0.0, 3.0)
    assert spans["ar@0"] == (1.0, 3.0) and spans["ar@1"] == (3.0, 3.0)  # rank 0 waits 2 s


def test_a_slowed_rank_sleeps_off_its_share_without_holding_a_core() -> None:
    """Two ranks on one core: both compute at half speed (2 s), then rank 1 sleeps (3−1)×2 s;
    its sleep takes no core from rank 0."""
    model = slowed(CostModel("one core", 0.0, 0.0, 0.0, compute={"c": 1.0}, cores=1), {1: 3.0})
    program = Program(2)
    for r in (0, 1):
        program.extend([Action(f"c@{r}", r, "compute", cost_key="c")])
    program.extend([Action("d@0", 0, "compute", cost_key="c")])
    spans = spans_of(simulate(program, model))
    assert spans["c@0"] == pytest.approx((0.0, 2.0)) and spans["c@1"] == pytest.approx((0.0, 6.0))
    assert spans["d@0"] == pytest.approx((2.0, 3.0))  # alone on the core meanwhile


def test_a_slowed_rank_reduces_what_it_receives_factor_times_longer() -> None:
    model = slowed(CostModel("gamma", 0.0, 0.0, 1e-3, compute={"c": 1.0}), {1: 2.0})
    spans = spans_of(simulate(two_ranks(reduce_bytes=1000), model))
    start, end = spans["r@1"]
    assert end - max(start, spans["s@0"][1]) == pytest.approx(2 * 1000 * 1e-3)


def test_a_slowed_model_is_never_lumped() -> None:
    from scenarios.registry import get_lesson

    lesson = get_lesson("ring-allreduce")
    params = lesson.parse({"ranks": "1024", "repeat": "5"}, "predict")
    model = lesson.prepare_model(params, FREE)
    _, metrics = lesson.predict(params, model)
    assert any(m.name == "lumped" for m in metrics)
    _, metrics = lesson.predict(params, slowed(model, {5: 2.0}))
    assert not any(m.name == "lumped" for m in metrics)
    with pytest.raises(ValueError, match="simulate every rank"):
        simulate_lockstep([], slowed(model, {5: 2.0}), 4)


def test_the_prediction_of_the_slowed_zero_run_flags_rank_2() -> None:
    outcome = session.predict("zero", {"ranks": "4"}, hardware="cpu-default")
    model = slowed(outcome.profile, {2: 3.0})
    predicted = simulate(outcome.lesson.build(outcome.params), model)
    report = workers_of(outcome, predicted)
    assert (report.overall.straggler, report.overall.reason) == (2, "compute")
    waits = {r: report.totals[r].wait_s for r in report.ranks}
    assert all(waits[r] > waits[2] for r in (0, 1, 3))
    plain = workers_of(outcome, outcome.predicted)
    assert plain.overall.straggler is None
    assert all(waits[r] > plain.totals[r].wait_s for r in (0, 1, 3))  # the peers' wait rises


# -- per-rank figures from hand-made timelines -----------------------------------------------------
def S(rank, kind, start, end, **kw) -> Span:  # noqa: N802
    return Span(
        rank, kind, kind, start, end, series=kw.pop("series", "a"), step=kw.pop("step", 0), **kw
    )


def test_compute_transfers_waits_idle_and_bytes_of_one_step() -> None:
    spans = [
        S(0, "F", 0.0, 1.0),
        S(0, "all_reduce", 1.0, 3.5, bytes=400),  # waits for rank 1 until 3.0
        S(1, "F", 0.0, 3.0),
        S(1, "all_reduce", 3.0, 3.5, bytes=400),
        S(0, "send", 3.5, 3.6, bytes=10, peer=1),
        S(1, "recv", 3.5, 3.7, bytes=10, peer=0),
        S(1, "opt", 4.0, 4.5),  # idle 3.7..4.0
    ]
    report = workers_report(Timeline(spans), 2, items=100.0, items_unit="tokens")
    r0, r1 = report.per_rank[0][0], report.per_rank[1][0]
    assert (r0.compute_s, r0.wait_s) == (1.0, 2.0) and r0.comm_s == pytest.approx(0.6)
    assert (r1.compute_s, r1.wait_s) == (3.5, 0.0) and r1.comm_s == pytest.approx(0.7)
    assert r1.idle_s == pytest.approx(0.3) and r1.step_s == 4.5
    assert r0.sent_bytes == 400 * 2 * 1 / 2 + 10 and r1.received_bytes == 400 + 10
    assert r1.throughput == pytest.approx(100 / 4.5)
    assert report.totals[0].device_memory_bytes is None  # CPU ranks: absent, not 0
    assert report.totals[0].device_utilization is None
    doc = report.to_dict()
    assert doc["items"] == "tokens" and doc["ranks"][0]["device"]["memory_bytes"] is None


def test_a_ring_steps_wait_is_until_the_left_neighbour_sends() -> None:
    spans = [
        S(0, "sendrecv", 0.0, 1.0, bytes=8, peer=1),  # receives from rank 1, which starts at 0.6
        S(1, "sendrecv", 0.6, 1.0, bytes=8, peer=0),
    ]
    report = workers_report(Timeline(spans), 2)
    assert report.per_rank[0][0].wait_s == pytest.approx(0.6)
    assert report.per_rank[1][0].wait_s == 0.0
    assert report.per_rank[0][0].received_bytes == 8


def test_spans_without_series_or_step_fall_into_one_second_steps() -> None:
    spans = [Span(0, "F", "F", 0.2, 0.4), Span(0, "F", "F", 1.1, 1.3), Span(0, "F", "F", 1.5, 1.6)]
    report = workers_report(Timeline(spans), 1)
    assert [w.label for w in report.windows] == ["0s", "1s"]
    assert report.per_rank[0][1].compute_s == pytest.approx(0.3)


def test_memory_now_peak_and_a_steps_peak_total() -> None:
    spans = [S(0, "F", 0.0, 1.0), S(0, "F", 1.0, 2.0, step=1)]
    counters = [
        Counter(0, "params", 0.1, 100.0, "a"),
        Counter(0, "grads", 0.5, 50.0, "a"),
        Counter(0, "grads", 1.5, 10.0, "a"),
        Counter(0, "inflight", 1.5, 3.0),  # not memory
    ]
    report = workers_report(Timeline(spans, counters), 1, memory_categories=("params", "grads"))
    assert [s.memory_peak_bytes for s in report.per_rank[0]] == [150.0, 110.0]
    assert report.totals[0].memory == {
        "params": {"now": 100.0, "peak": 100.0},
        "grads": {"now": 10.0, "peak": 50.0},
    }


def test_failures_and_restarts_come_from_the_marks() -> None:
    marks = [Mark(1.0, "failure", "killed", rank=1), Mark(1.5, "restart", "restart 1/3")]
    report = workers_report(Timeline([S(0, "F", 0, 1), S(1, "F", 0, 1)], marks=marks), 2)
    assert (report.totals[1].failures, report.totals[1].restarts) == (1, 1)
    assert (report.totals[0].failures, report.totals[0].restarts) == (0, 1)


def lockstep(slow_rank: int | None, steps: int = 4, world: int = 4) -> list[Span]:
    spans = []
    for k in range(steps):
        t = 10.0 * k
        for r in range(world):
            compute = 3.0 if r == slow_rank else 1.0
            spans.append(S(r, "F", t, t + compute, step=k))
            spans.append(S(r, "all_reduce", t + compute, t + 4.0, step=k, bytes=8))
    return spans


def test_the_straggler_is_flagged_with_its_reason_in_every_step() -> None:
    report = workers_report(Timeline(lockstep(2)), 4)
    assert all(v.straggler == 2 and v.reason == "compute" for v in report.verdicts)
    assert (report.overall.straggler, report.overall.reason) == (2, "compute")
    # its work: 3 s of compute + 1 s of transfer, the median's 1 + 1
    assert report.overall.ratio == pytest.approx(2.0)
    assert report.totals[2].straggler_steps == 4
    assert workers_report(Timeline(lockstep(None)), 4).overall.straggler is None
    # a higher threshold lets the same run pass
    assert workers_report(Timeline(lockstep(2)), 4, threshold=3.5).overall.straggler is None


def test_a_run_flags_a_rank_slow_in_at_least_half_its_steps() -> None:
    once = [Verdict(0, 1.5, 0, "compute")] + [Verdict(1, 1.0)] * 3
    assert run_verdict(Verdict(0, 1.1), once).straggler is None
    twice = [Verdict(3, 2.0, 3, "communication")] * 2 + [Verdict(1, 1.0)] * 2
    assert run_verdict(Verdict(3, 1.4), twice) == Verdict(3, 2.0, 3, "communication")


def test_a_live_view_judges_only_closed_steps() -> None:
    live = LiveWorkers(2)
    spans = lockstep(1, steps=2, world=2)
    live.add([s for s in spans if s.step == 0])
    assert live.report().closed == [False]  # nobody has gone on yet
    live.add([s for s in spans if s.step == 1 and s.rank == 0])
    report = live.report()
    assert report.closed == [False, False] and report.overall.straggler is None
    live.add([s for s in spans if s.step == 1 and s.rank == 1])
    assert live.report().closed == [True, False]
    assert live.report(final=True).closed == [True, True]
    message = ("records", 0, [S(0, "F", 20.0, 21.0, step=2).to_dict()], [])
    live.add_message(message)
    assert len(live.report().windows) == 3


# -- saved runs, the HTML panel, the tab ------------------------------------------------------
def test_a_saved_slowed_run_replays_with_its_workers_recomputed() -> None:
    outcome = replay(SLOW_RUN)
    assert outcome.workers is not None and outcome.workers.overall.straggler == 2
    assert outcome.profile.slow == ((2, 3.0),)
    doc = json.loads(SLOW_RUN.read_text())
    assert doc["workers"]["straggler"] == 2 and len(doc["workers"]["ranks"]) == 4


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (("threshold",), 1e9, "$.workers.threshold"),
        (("ranks", 0, "rank"), "zero", "$.workers.ranks[0].rank"),
        (("reason",), "<script>", "$.workers.reason"),
        (("windows", 0, "series"), "\x1b[2J", "$.workers.windows[0].series"),
    ],
)
def test_a_hostile_workers_key_is_refused(tmp_path, path, value, needle) -> None:
    doc = json.loads(SLOW_RUN.read_text())
    node = doc["workers"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(session.UsageError, match=needle.replace("$", r"\$").replace("[", r"\[")):
        replay(bad)


def test_the_html_export_has_the_per_rank_panel(tmp_path) -> None:
    from playground.export.html import render_html

    page = render_html(replay(SLOW_RUN))
    assert '<section id="workers">' in page and "per-rank utilisation" in page
    assert '<tr class="straggler"><th>r2</th>' in page
    assert "straggler: rank 2, in compute" in page
    predicted_only = session.predict("zero", {"ranks": "2"}, hardware="cpu-default")
    assert '<section id="workers">' not in render_html(predicted_only)


def test_snapshot_workers_tab_of_a_slowed_run(snap_compare, monkeypatch) -> None:
    """The Workers tab of the saved slowed run: a row per rank with its sparklines, the
    median row, rank 2 marked; the cursor on rank 0 waiting in an all-reduce, so the
    narrative says everyone waits for the slowest."""
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.chdir(Path(__file__).parent.parent)
    from playground.app import PlaygroundApp

    async def run_before(pilot) -> None:
        pilot.app.open_lesson("zero")
        await pilot.pause()
        screen = pilot.app.screen
        screen.open_path(str(SLOW_RUN.relative_to(Path.cwd())))
        await pilot.pause()
        await pilot.press("w")
        await pilot.press("right")  # from the lesson's goal to the story, by the cursor
        waits = [
            s
            for s in screen.outcome.measured.spans
            if s.rank == 0 and s.kind == "all_reduce" and s.duration > 0
        ]
        wait = max(waits, key=lambda s: s.duration)
        screen.gantt.cursor = (wait.start + wait.end) / 2
        await pilot.pause()

    assert snap_compare(
        PlaygroundApp(language="en"), terminal_size=(120, 36), run_before=run_before
    )


# -- Prometheus ----------------------------------------------------------------------------------
def test_the_endpoint_serves_every_ranks_series_on_loopback_only() -> None:
    from prometheus_client.parser import text_string_to_metric_families
    from test_trust import LOOPBACK_V4, listening_addresses

    from playground.metrics_server import MetricsServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = MetricsServer(port)
    try:
        live = LiveWorkers(4, items=64.0, items_unit="tokens", memory_categories=("params",))
        server.watch("zero", "zero-test-1", live)
        live.add(lockstep(2), [Counter(r, "params", 0.5, 1000.0) for r in range(4)])
        import os

        addresses = listening_addresses([os.getpid()])
        mine = [a for a in addresses if a.endswith(f":{port:04X}")]
        assert mine and all(a.split(":")[0] == LOOPBACK_V4 for a in mine)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    finally:
        server.close()
    families = {f.name: f for f in text_string_to_metric_families(text.decode())}
    served = {sample.name for f in families.values() for sample in f.samples} | set(families)
    # docs/grafana-dashboard.json asks only for series the endpoint serves
    import re

    dashboard = (Path(__file__).parent.parent / "docs" / "grafana-dashboard.json").read_text()
    asked = set(re.findall(r"playground_[a-z_]+", dashboard)) - {"playground_workers"}
    absent_on_cpu = {"playground_device_memory_bytes", "playground_device_utilization_ratio"}
    assert asked - absent_on_cpu <= served, asked - served
    steps = families["playground_step_seconds"].samples
    assert sorted(s.labels["rank"] for s in steps) == ["0", "1", "2", "3"]
    assert {s.labels["scenario"] for s in steps} == {"zero"}
    assert {s.labels["run_id"] for s in steps} == {"zero-test-1"}
    straggler = {s.labels["rank"]: s.value for s in families["playground_straggler"].samples}
    assert straggler == {"0": 0.0, "1": 0.0, "2": 1.0, "3": 0.0}
    assert "playground_wait_seconds" in families  # counters: _total samples
    assert families["playground_memory_bytes"].samples[0].labels["category"] == "params"
    assert (
        not families.get("playground_device_memory_bytes")
        or not families["playground_device_memory_bytes"].samples
    )  # CPU ranks: absent, never 0
