"""Lesson 3 end to end on real gloo ranks: a real rank is killed (or hung) at a step, in the
middle of a checkpoint write, or the newest checkpoint is corrupted; the launcher detects
it, every rank restarts from the newest valid checkpoint, and the run ends with
parameters and optimizer state bitwise equal to an uninterrupted run. Also 4 -> 2 ranks
(DDP and ZeRO-1), an exhausted restart budget, and bad input. The lesson's typed contract
(params and their ParamError fields, the Program of any world size, the restart policy, the
rank result as JSON, metric names) is checked without ranks at the end."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from test_cli import playground, processes_with

BASE = ["run", "failure-resume", "--ranks", "4", "--hardware", "cpu-default", "--json"]


def run(*args: str) -> tuple[dict, str]:
    """One CLI run with a marker in its environment; checks no process is left behind.
    The document's typed metrics list is also given by name as `doc["m"]`."""
    marker = uuid.uuid4().hex
    out = playground(*BASE, *args, env={"PLAYGROUND_TEST_MARK": marker})
    assert out.returncode == 0, out.stderr[-3000:]
    time.sleep(0.2)
    assert processes_with(marker) == []
    doc = json.loads(out.stdout)
    doc["m"] = values(doc["metrics"])
    return doc, out.stderr


def values(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """name -> value of a typed metrics list (each name once in this lesson)."""
    names = [m["name"] for m in metrics]
    assert len(names) == len(set(names)), names
    return {m["name"]: m.get("value") for m in metrics}


def kinds(doc: dict) -> list[str]:
    return [m["kind"] for m in doc["marks"]]


def labels(doc: dict, kind: str) -> list[str]:
    return [m["label"] for m in doc["marks"] if m["kind"] == kind]


@pytest.mark.ranks
def test_kill_at_a_step_resumes_bitwise() -> None:
    """The issue's first Done-means command (with a fixed profile, to skip calibration)."""
    doc, _ = run("-p", "steps=30", "-p", "checkpoint_every=5", "--fault", "kill:rank=1,step=12")
    m = doc["m"]
    assert m["restarts"] == 1
    assert m["resumed_from_steps"] == [10]
    assert m["lost_steps"] == 1  # step 11 was completed after checkpoint 10, then lost
    assert m["bitwise_equal_to_uninterrupted"] is True
    assert m["final_loss"] == m["final_loss_uninterrupted"]
    assert m["detection_s"] is not None and m["restart_s"] is not None  # timed in benchmarks/
    # Measured beside predicted: the prediction assumes no failure (timed in benchmarks/).
    paired = {d["name"]: d for d in doc["metrics"] if "predicted" in d}
    assert set(paired) == {"time_s", "step_s", "checkpoint_write_s"}
    assert all(d["value"] > 0 and d["predicted"] > 0 for d in paired.values())
    order = kinds(doc)
    for kind in ("failure", "detection", "lost", "restart", "resume", "recomputed"):
        assert kind in order, kind
    assert order.index("failure") < order.index("detection") < order.index("restart")
    assert order.index("restart") < order.index("resume")
    assert "rank 1 killed (SIGKILL) in step 12" in labels(doc, "failure")[0]
    assert [int(lbl.split()[2]) for lbl in labels(doc, "checkpoint")] == [5, 10, 15, 20, 25, 30]
    # The lost work is on the timeline: step 11 twice, once marked lost.
    step11 = [s for s in doc["measured"] if s.get("step") == 11 and s["kind"] == "opt"]
    assert len(step11) == 8 and sum("(lost)" in s["label"] for s in step11) == 4
    # One clock: the second attempt starts after the first one failed.
    failed_at = doc["marks"][order.index("failure")]["t"]
    resumed = [s["start"] for s in step11 if "(lost)" not in s["label"]]
    assert min(resumed) > failed_at


@pytest.mark.ranks
def test_kill_during_a_checkpoint_write_falls_back_to_the_previous_one() -> None:
    doc, _ = run(
        "-p", "steps=15", "-p", "checkpoint_every=5", "--fault", "kill:rank=2,during=checkpoint"
    )
    m = doc["m"]
    assert (m["restarts"], m["resumed_from_steps"], m["lost_steps"]) == (1, [5], 5)
    assert m["bitwise_equal_to_uninterrupted"] is True
    assert "while writing checkpoint 10" in labels(doc, "failure")[0]
    assert any("never finished" in lbl for lbl in labels(doc, "checkpoint-invalid"))


@pytest.mark.ranks
def test_corrupted_newest_checkpoint_is_skipped_and_said_why() -> None:
    doc, _ = run(
        "-p",
        "steps=15",
        "-p",
        "checkpoint_every=5",
        "-p",
        "sharding=zero1",
        "--fault",
        "kill:rank=0,step=12",
        "--fault",
        "corrupt:checkpoint=latest",
    )
    m = doc["m"]
    assert (m["restarts"], m["resumed_from_steps"], m["lost_steps"]) == (1, [5], 6)
    assert m["bitwise_equal_to_uninterrupted"] is True
    assert any("checkpoint step 10" in lbl for lbl in labels(doc, "fault"))
    invalid = labels(doc, "checkpoint-invalid")
    assert any("step-000010" in lbl and "SHA-256" in lbl for lbl in invalid)


@pytest.mark.ranks
def test_a_kill_then_a_hang_two_restarts_still_bitwise() -> None:
    doc, _ = run(
        "-p",
        "steps=12",
        "-p",
        "checkpoint_every=3",
        "--fault",
        "kill:rank=1,step=5",
        "--fault",
        "hang:rank=3,step=11",
    )
    m = doc["m"]
    assert (m["restarts"], m["resumed_from_steps"], m["lost_steps"]) == (2, [3, 9], 1 + 1)
    assert m["bitwise_equal_to_uninterrupted"] is True
    detections = labels(doc, "detection")
    assert "killed by SIGKILL" in detections[0]  # the sentinel, at once
    assert "stopped answering" in detections[1]  # the heartbeat timeout
    assert kinds(doc).count("restart") == kinds(doc).count("resume") == 2


@pytest.mark.ranks
@pytest.mark.parametrize("sharding", ["ddp", "zero1"])
def test_resume_on_fewer_ranks_continues_the_same_curve(sharding: str) -> None:
    doc, _ = run(
        "-p",
        "steps=12",
        "-p",
        "checkpoint_every=4",
        "-p",
        "resume_ranks=2",
        "-p",
        f"sharding={sharding}",
        "--fault",
        "kill:rank=3,step=10",
    )
    m = doc["m"]
    assert m["world_sizes"] == [4, 2] and m["restarts"] == 1 and m["lost_steps"] == 1
    # Bitwise equal to an uninterrupted run, which gives the same bits on 4 or 2 ranks.
    assert m["bitwise_equal_to_uninterrupted"] is True
    losses = [c["value"] for c in doc["counters"] if c["category"] == "loss"]
    assert len(losses) == 9 + 12 - 8  # steps 1-9 on 4 ranks, 9-12 again on 2
    assert losses[8] == losses[9]  # step 9 on 4 ranks and recomputed on 2: the same loss
    assert losses[-1] == m["final_loss"]
    assert {s["rank"] for s in doc["measured"] if s.get("step") == 12} == {0, 1}
    if sharding == "ddp":
        # And equal to an uninterrupted 4-rank run launched on its own.
        plain, _ = run("-p", "steps=12", "-p", "checkpoint_every=4")
        assert plain["m"]["restarts"] == 0
        for key in ("parameters_sha256", "optimizer_sha256", "final_loss"):
            assert plain["m"][key] == m[key], key


@pytest.mark.ranks
def test_restart_budget_exhausted_fails_cleanly() -> None:
    marker = uuid.uuid4().hex
    out = playground(
        *BASE[:-1],
        "-p",
        "steps=8",
        "-p",
        "max_restarts=0",
        "--fault",
        "kill:rank=1,step=3",
        env={"PLAYGROUND_TEST_MARK": marker},
    )
    assert out.returncode == 1, out.stderr
    assert "rank 1" in out.stderr and "gave up after 0 restart" in out.stderr
    assert "Traceback" not in out.stderr
    time.sleep(0.2)
    assert processes_with(marker) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-p", "checkpoint_every=0"], "checkpoint_every"),
        (["-p", "steps=30", "--fault", "kill:rank=1,step=31"], "step must be in 1..30"),
        (["--fault", "kill:rank=4,step=3"], "rank must be in 0..3"),
        (["-p", "mtbf=-1"], "mtbf"),
        (["-p", "save_cost=abc"], "save_cost"),
        (["-p", "mtbf=1e400"], "mtbf must be a duration from 0.001s to 100000h"),
        (["--fault", "corrupt:checkpoint=latest"], "add a failure"),
        (["--fault", "kill:rank=1,during=checkpoint,step=7"], "no checkpoint at step 7"),
        (["--ranks", "3"], "power of two"),
        (["-p", "resume_ranks=3"], "resume_ranks"),
        (
            [
                "-p",
                "resume_ranks=2",
                "--fault",
                "kill:rank=0,step=3",
                "--fault",
                "kill:rank=3,step=9",
            ],
            "rank in 0..1",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str) -> None:
    out = playground(*BASE, *args)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_step_faults_are_refused_where_there_are_no_steps() -> None:
    out = playground("run", "ring-allreduce", "--ranks", "2", "--fault", "kill:rank=1,step=3")
    assert out.returncode == 2 and "failure-resume" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.ranks
def test_real_checkpoints_hold_every_piece_of_state() -> None:
    from pathlib import Path

    from playground import session
    from runtime.engine import checkpoint as ckpt

    outcome = session.run(
        "failure-resume",
        {"ranks": "2", "steps": "6", "checkpoint_every": "3", "sharding": "zero1"},
        faults=["kill:rank=1,step=5"],
        hardware="cpu-default",
        keep=True,  # a finished run's checkpoints are removed unless kept
    )
    root = Path(outcome.run_dir) / "checkpoints"
    assert [s for s, _ in ckpt.committed(root)] == [6, 3] and not ckpt.incomplete(root)
    path = ckpt.step_dir(root, 6)
    assert ckpt.validate(path) is None
    assert set(json.loads((path / ckpt.MANIFEST).read_text())["files"]) == {
        "meta.json",
        "model.safetensors",
        "optimizer.rank0.safetensors",
        "optimizer.rank1.safetensors",
        "rank0.json",
        "rank1.json",
    }
    meta = ckpt.read_meta(path)
    assert (meta["step"], meta["world_size"], meta["sharding"]) == (6, 2, "zero1")
    assert (meta["epoch"], meta["batches_consumed_in_epoch"]) == (1, 2)  # 4 batches an epoch
    assert meta["samples_consumed"] == 6 * 16 and len(meta["epoch_order"]) == 64
    assert meta["lr_scheduler"]["last_step"] == 6 and meta["optimizer"]["step"] == 6
    assert "loss_scaler" in meta and meta["model"]["hidden"] == 32
    rng = json.loads((path / "rank1.json").read_text())
    assert set(rng) == {"python", "numpy", "torch"}
    assert len(rng["python"]["internal"]) == 625 and len(rng["numpy"]["keys"]) == 624
    shards = meta["optimizer_shards"]
    m = values([metric.to_dict() for metric in outcome.metrics])
    assert shards[0][0] == 0 and shards[-1][1] == m["parameters"]
    assert m["bitwise_equal_to_uninterrupted"] is True


# -- the typed lesson contract, without ranks ------------------------------------------------
def test_params_are_typed_with_todays_defaults_and_round_trip() -> None:
    from scenarios.failure_resume.lesson import LESSON
    from scenarios.failure_resume.params import ResumeParams
    from scenarios.shape import GPTShape

    params = LESSON.parse({}, "run")
    assert isinstance(params, ResumeParams)
    shape = GPTShape(layers=2, hidden=32, heads=2, seq=16, vocab=32, run_limit=1_000_000)
    assert params.model == shape
    assert (params.ranks, params.resume_ranks, params.steps, params.checkpoint_every) == (
        4,
        0,
        30,
        5,
    )
    assert (params.max_restarts, params.sharding, params.batch, params.microbatches) == (
        3,
        "ddp",
        16,
        8,
    )
    assert (params.mtbf, params.save_cost, params.restart_cost) == (3 * 3600.0, 60.0, 0.0)
    typed = params.typed()
    assert (typed["mtbf"], typed["save_cost"], typed["restart_cost"]) == ("3h", "1min", "0s")
    assert LESSON.parse(params.to_dict(), "run") == params
    assert LESSON.parse({"mtbf": "90min", "hidden": "64"}, "predict").mtbf == 5400.0


@pytest.mark.parametrize(
    ("raw", "mode", "field", "needle"),
    [
        ({"microbatches": "6"}, "run", "microbatches", "power of two"),
        ({"ranks": "3"}, "run", "ranks", "power of two dividing microbatches=8"),
        ({"ranks": "16", "microbatches": "16"}, "run", "ranks", "predict allows more"),
        ({"resume_ranks": "3"}, "run", "resume_ranks", "power of two"),
        (
            {"ranks": "2", "resume_ranks": "4", "microbatches": "2"},
            "run",
            "resume_ranks",
            "microbatches=2",
        ),
        ({"batch": "12"}, "run", "batch", "multiple of microbatches=8"),
        ({"checkpoint_every": "0"}, "run", "checkpoint_every", "at least 1"),
        ({"steps": "401"}, "run", "steps", "steps"),
        ({"save_cost": "1e400"}, "predict", "save_cost", "from 1e-06s to 100000h"),
        ({"restart_cost": "100001h"}, "predict", "restart_cost", "from 0s to 100000h"),
        ({"mtbf": "-1"}, "predict", "mtbf", "mtbf"),
        ({"save_cost": "abc"}, "predict", "save_cost", "save_cost"),
        ({"hidden": "30", "heads": "4"}, "predict", "hidden", "multiple of heads=4"),
        ({"hidden": "256", "layers": "8"}, "run", "hidden", "parameters"),
    ],
)
def test_every_rule_names_its_field(raw: dict, mode: str, field: str, needle: str) -> None:
    from scenarios.failure_resume.lesson import LESSON
    from scenarios.params import ParamError

    with pytest.raises(ParamError) as caught:
        LESSON.parse(raw, mode)  # type: ignore[arg-type]
    assert caught.value.field == field and needle in str(caught.value), str(caught.value)


def test_a_larger_model_is_refused_only_on_a_real_run() -> None:
    from scenarios.failure_resume.lesson import LESSON

    params = LESSON.parse({"hidden": "256", "layers": "8"}, "predict")
    assert params.parameters > 1_000_000


def test_programs_of_any_world_and_the_restart_policy() -> None:
    from scenarios.failure_resume.lesson import LESSON
    from scenarios.failure_resume.program import build_for

    params = LESSON.parse({"steps": "6", "checkpoint_every": "3", "sharding": "zero1"}, "run")
    program = LESSON.build(params)
    assert program.world_size == 4 and program.ranks == build_for(params, 4).ranks
    ops = [a.id for a in program.ranks[1] if a.step == 3]
    assert ops == ["s3.fb@r1", "s3.grads@r1", "s3.opt@r1", "s3.params@r1", "s3.ckpt@r1"]
    phases = {a.step: a.phase for a in program.actions() if a.kind == "checkpoint"}
    assert phases == {3: "checkpoint", 6: "interval"}
    two = build_for(params, 2)
    assert two.world_size == 2
    assert {a.group for a in two.actions() if a.kind == "all_gather"} == {(0, 1)}
    fb = [a.work for a in two.actions() if a.id.startswith("s1.fb@")]
    assert fb == [4, 4]  # 8 microbatches, each of 2 ranks owns 4 leaves of the tree

    policy = LESSON.restart_policy(params)
    assert (policy.max_restarts, policy.resume_world_size) == (3, None)
    shrink = LESSON.parse({"resume_ranks": "2", "max_restarts": "1"}, "run")
    policy = LESSON.restart_policy(shrink)
    assert (policy.max_restarts, policy.resume_world_size) == (1, 2)
    assert policy.program_for(2).ranks == build_for(shrink, 2).ranks


def _fake_run(params, timeline):  # noqa: ANN001, ANN202 - test helper
    from runtime.engine.restart import FailureReport, RestartReport
    from scenarios.base import RunData
    from scenarios.failure_resume.params import ResumeResult

    result = ResumeResult(
        bitwise_equal=True,
        checks={"parameters": True},
        parameters_sha256="ab" * 32,
        optimizer_sha256="cd" * 32,
        resumed_from_step=10,
        losses=[2.5] * 20,
        final_loss=2.5,
        final_loss_uninterrupted=2.5,
        compute_costs={"fb": 0.001, "opt": 0.0005, "ckpt": 0.01},
    )
    failure = FailureReport(1, "killed by SIGKILL", 1.0, 1.01, 1.02, 1.52, 11, 10)
    return RunData(timeline, [result] * params.ranks, RestartReport([4, 4], [failure]))


def test_metrics_are_typed_and_name_what_the_narrative_quotes() -> None:
    from runtime.sim.profiles import PROFILES
    from runtime.sim.simulate import simulate
    from scenarios.failure_resume.lesson import LESSON
    from scenarios.metrics import UNITS

    params = LESSON.parse({}, "run")
    predicted = simulate(
        LESSON.build(params), LESSON.prepare_model(params, PROFILES["cpu-default"])
    )
    before = LESSON.metrics(params, predicted, None)
    after = LESSON.metrics(params, predicted, _fake_run(params, predicted))
    for metrics in (before, after):
        assert all(m.unit in UNITS for m in metrics)
    b, a = values([m.to_dict() for m in before]), values([m.to_dict() for m in after])
    assert "restarts" not in b and b["time_s"] is None
    assert {m.name for m in before if m.is_predicted} == {"time_s", "step_s", "checkpoint_write_s"}
    assert {step.metric for step in LESSON.narrative} <= set(a)
    assert (a["restarts"], a["lost_steps"], a["resumed_from_steps"], a["world_sizes"]) == (
        1,
        1,
        [10],
        [4, 4],
    )
    assert a["detection_s"] == pytest.approx(0.01) and a["restart_s"] == pytest.approx(0.51)
    assert a["bitwise_equal_to_uninterrupted"] is True and a["final_loss"] == 2.5
    assert a["daly_checkpoint_every_steps"] >= 1
    assert a["young_interval_s"] == pytest.approx(1138.42, rel=1e-4)


def test_the_rank_result_round_trips_through_json() -> None:
    import dataclasses

    from playground.session import decode_results
    from scenarios.failure_resume.lesson import LESSON

    params = LESSON.parse({}, "run")
    results = _fake_run(params, None).results
    wire = json.loads(json.dumps([dataclasses.asdict(r) for r in results]))
    assert decode_results(LESSON, wire) == results
    with pytest.raises(ValueError, match="ResumeResult"):
        decode_results(LESSON, [{**wire[0], "bitwise_equal": "yes"}])


def test_the_lesson_module_imports_neither_numpy_nor_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from scenarios.failure_resume.lesson import LESSON\n"
        "params = LESSON.parse({'resume_ranks': '2'}, 'run')\n"
        "LESSON.restart_policy(params).program_for(2)\n"
        "heavy = {'numpy', 'safetensors', 'torch'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_step_lasts_from_one_steps_last_rank_out_to_the_next():
    """The ranks start a step unevenly: the period between steps is what one costs, not
    first rank in to last rank out (that counts the skew in two steps); a pair around a
    checkpoint write is left out."""
    from runtime.sim.trace import Span, Timeline
    from scenarios.failure_resume.recovery import step_period

    spans = []
    for k in range(3):
        after_save = 0.040 if k == 2 else 0.0  # step 1 ends with a 40 ms checkpoint
        for rank, skew in ((0, 0.0), (1, 0.004)):  # rank 1 always 4 ms behind
            start = 0.010 * k + skew + after_save
            spans.append(Span(rank, "compute", "", start, start + 0.010, step=k))
    spans.append(Span(0, "checkpoint", "", 0.024, 0.064, step=1))
    assert step_period(Timeline(spans)) == pytest.approx(0.010)
    one = [s for s in spans if s.step == 0]
    assert step_period(Timeline(one)) == pytest.approx(0.014)  # one step: first in, last out
    # A slow step weighs as a run pays it: the mean of the periods 10, 10 and 40 ms.
    ends = (0.010, 0.020, 0.030, 0.070)
    slow = [Span(0, "compute", "", end - 0.005, end, step=k) for k, end in enumerate(ends)]
    assert step_period(Timeline(slow)) == pytest.approx(0.020)


def test_a_checkpoint_before_a_run_costs_the_calibrated_protocol_and_its_bytes() -> None:
    """Before a run, a checkpoint costs what calibrate timed of one written as this lesson
    writes one (scenarios.failure_resume.probes): its fixed part, then its bytes."""
    from dataclasses import replace

    from runtime.sim.compute import TYPICAL_CPU
    from runtime.sim.profiles import PROFILES
    from scenarios.failure_resume.lesson import LESSON, estimate

    params = LESSON.parse({}, "run")
    from scenarios.failure_resume.rates import ResumeRates  # the lesson's own rates

    rates = TYPICAL_CPU.with_lesson(ResumeRates(disk_bytes_per_s=2e8, checkpoint_s=0.012))
    model = estimate(params, replace(PROFILES["cpu-default"], rates=rates, compute={}))
    assert model.compute["ckpt"] == pytest.approx(0.012 + params.checkpoint_bytes / 2e8)
