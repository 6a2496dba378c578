"""Lesson 3 end to end on real gloo ranks: a real rank is killed (or hung) at a step, in the
middle of a checkpoint write, or the newest checkpoint is corrupted; the launcher detects
it, every rank restarts from the newest valid checkpoint, and the run ends with
parameters and optimizer state bitwise equal to an uninterrupted run. Also 4 -> 2 ranks
(DDP and ZeRO-1), an exhausted restart budget, and bad input."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from test_cli import playground, processes_with

BASE = ["run", "failure-resume", "--ranks", "4", "--hardware", "cpu-default", "--json"]


def run(*args: str) -> tuple[dict, str]:
    """One CLI run with a marker in its environment; checks no process is left behind."""
    marker = uuid.uuid4().hex
    out = playground(*BASE, *args, env={"PLAYGROUND_TEST_MARK": marker})
    assert out.returncode == 0, out.stderr[-3000:]
    time.sleep(0.2)
    assert processes_with(marker) == []
    return json.loads(out.stdout), out.stderr


def kinds(doc: dict) -> list[str]:
    return [m["kind"] for m in doc["marks"]]


def labels(doc: dict, kind: str) -> list[str]:
    return [m["label"] for m in doc["marks"] if m["kind"] == kind]


def test_kill_at_a_step_resumes_bitwise() -> None:
    """The issue's first Done-means command (with a fixed profile, to skip calibration)."""
    doc, _ = run("-p", "steps=30", "-p", "checkpoint_every=5", "--fault", "kill:rank=1,step=12")
    m = doc["metrics"]
    assert m["restarts"] == 1
    assert m["resumed_from_steps"] == [10]
    assert m["lost_steps"] == 1  # step 11 was completed after checkpoint 10, then lost
    assert m["bitwise_equal_to_uninterrupted"] is True
    assert m["final_loss"] == m["final_loss_uninterrupted"]
    assert m["detection_s"] is not None and m["restart_s"] is not None  # timed in benchmarks/
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


def test_kill_during_a_checkpoint_write_falls_back_to_the_previous_one() -> None:
    doc, _ = run(
        "-p", "steps=15", "-p", "checkpoint_every=5", "--fault", "kill:rank=2,during=checkpoint"
    )
    m = doc["metrics"]
    assert (m["restarts"], m["resumed_from_steps"], m["lost_steps"]) == (1, [5], 5)
    assert m["bitwise_equal_to_uninterrupted"] is True
    assert "while writing checkpoint 10" in labels(doc, "failure")[0]
    assert any("never finished" in lbl for lbl in labels(doc, "checkpoint-invalid"))


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
    m = doc["metrics"]
    assert (m["restarts"], m["resumed_from_steps"], m["lost_steps"]) == (1, [5], 6)
    assert m["bitwise_equal_to_uninterrupted"] is True
    assert any("checkpoint step 10" in lbl for lbl in labels(doc, "fault"))
    invalid = labels(doc, "checkpoint-invalid")
    assert any("step-000010" in lbl and "SHA-256" in lbl for lbl in invalid)


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
    m = doc["metrics"]
    assert (m["restarts"], m["resumed_from_steps"], m["lost_steps"]) == (2, [3, 9], 1 + 1)
    assert m["bitwise_equal_to_uninterrupted"] is True
    detections = labels(doc, "detection")
    assert "killed by SIGKILL" in detections[0]  # the sentinel, at once
    assert "stopped answering" in detections[1]  # the heartbeat timeout
    assert kinds(doc).count("restart") == kinds(doc).count("resume") == 2


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
    m = doc["metrics"]
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
        assert plain["metrics"]["restarts"] == 0
        for key in ("parameters_sha256", "optimizer_sha256", "final_loss"):
            assert plain["metrics"][key] == m[key], key


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
        (["-p", "mtbf=1min", "-p", "save_cost=10s"], "a tenth of mtbf"),
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


def test_real_checkpoints_hold_every_piece_of_state() -> None:
    from pathlib import Path

    from playground import session
    from runtime import checkpoint as ckpt

    outcome = session.run(
        "failure-resume",
        {"ranks": "2", "steps": "6", "checkpoint_every": "3", "sharding": "zero1"},
        faults=["kill:rank=1,step=5"],
        hardware="cpu-default",
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
    assert shards[0][0] == 0 and shards[-1][1] == outcome.metrics["parameters"]
    assert outcome.metrics["bitwise_equal_to_uninterrupted"] is True
