"""`playground cloud plan` (issue 41, item 1): the lab folder, its SkyPilot task, the estimate
in both languages, refusals that write nothing; SkyPilot's own schema when it is installed."""

from __future__ import annotations

import importlib.util
import os
from datetime import date
from pathlib import Path

import msgspec
import pytest
from cli_server import run_cli

from playground.cloud_plan import CloudSchemaError, Plan, task_yaml, validate
from scenarios.why_distribute.prices import price_table

LAB = ["ring-allreduce", "--gpu", "rtx4090", "--count", "2", "--spot", "--hours", "1"]
HAS_SKY = importlib.util.find_spec("sky") is not None
NO_SKY = "SkyPilot (the [cloud] extra) is not installed: pip install -e '.[cloud]' to run it"


def plan(tmp_path: Path, *args: str, lang: str = "en"):
    env = {**os.environ, "PLAYGROUND_LEDGER": str(tmp_path / "ledger.jsonl"),
           "PLAYGROUND_LANG": lang}  # fmt: skip
    return run_cli(["cloud", "plan", *args], env=env, timeout=60, cwd=tmp_path)


def test_plan_writes_the_lab_folder(tmp_path):
    out = plan(tmp_path, *LAB, "--budget", "3", "-p", "size=1MiB")
    assert out.returncode == 0, out.stderr
    lab = tmp_path / "lab-ring-allreduce-rtx4090x2"
    assert sorted(p.name for p in lab.iterdir()) == [
        "README.md", "estimate.txt", "plan.json", "task.yaml"
    ]  # fmt: skip
    assert out.stdout.startswith("This starts 2× RTX 4090 spot at ~$0.22/h each")
    assert "Budget: $3.00. Accepted" in out.stdout and "cloud launch" in out.stdout
    task = (lab / "task.yaml").read_text()
    for needle in ("num_nodes: 2", 'accelerators: "RTX4090:1"', "use_spot: true",
                   "down: true", "$SKYPILOT_NODE_IPS", "$SKYPILOT_NUM_NODES",
                   "$SKYPILOT_NODE_RANK", "torch==2.13.0",
                   "-m scenarios.torchrun ring-allreduce -p size=1MiB"):  # fmt: skip
        assert needle in task, needle
    saved = msgspec.json.decode((lab / "plan.json").read_bytes(), type=Plan)
    assert (saved.count, saved.per_node, saved.spot, saved.budget) == (2, 1, True, 3.0)
    assert saved.estimate_usd == pytest.approx(0.44 * 1.25)  # an hour and the setup
    estimate = (lab / "estimate.txt").read_text().splitlines()
    assert estimate[0].startswith("Esto arranca 2× RTX 4090") and estimate[1].startswith(
        "This starts"
    )
    readme = (lab / "README.md").read_text()
    assert "playground cloud launch" in readme and "Una lección en GPUs alquiladas" in readme
    assert lab.stat().st_mode & 0o077 == 0


def test_plan_states_an_old_tables_date_and_age():
    table = price_table()
    if not table.stale(date.today()):
        pytest.skip("the price table is fresh today: no warning to state")
    out = plan(Path(os.environ.get("TMPDIR", "/tmp")), *LAB, "--out", "/nonexistent/x", "--budget",
               "0.1")  # fmt: skip
    assert out.returncode == 3  # refused before any folder: the sentence says why
    assert f"dated {table.as_of.isoformat()}, {table.age_days(date.today())} days old" in out.stdout


def test_over_budget_is_refused_with_exit_3_and_nothing_written(tmp_path):
    out = plan(tmp_path, *LAB, "--budget", "0.2")
    assert out.returncode == 3 and "Refused: $0.35 over." in out.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([*LAB, "--budget", "300"], "ceiling of $5.00"),
        ([*LAB[:2], "h800", *LAB[3:]], "--gpu h800"),
        ([*LAB, "--per-node", "3"], "--per-node 3"),
        ([*LAB, "-p", "ranks=3"], "ranks=3"),
        ([*LAB, "-p", "size=1MiB", "-p", "size=2MiB"], "size"),
        ([*LAB, "-p", "colour=blue"], "colour"),
        (["no-such-lesson", *LAB[1:]], "no-such-lesson"),
        ([*LAB, "--hours", "soon"], "--hours"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, needle):
    out = plan(tmp_path, *args)
    assert out.returncode == 2 and out.stdout == "", out.stdout
    assert out.stderr.count("\n") == 1 and needle in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_plan_never_writes_over_a_folder(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    out = plan(tmp_path, *LAB, "--out", "mine", lang="es")
    assert out.returncode == 2 and "ya existe" in out.stderr and out.stderr.count("\n") == 1
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_the_plan_speaks_spanish(tmp_path):
    out = plan(tmp_path, *LAB, "--price", "0.3", "--out", "lab", lang="es")
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.startswith("Esto arranca 2× RTX 4090 spot a ~$0.30/h")
        and "Escrito" in out.stdout
    )


def test_the_task_is_yaml():
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(task_yaml("zero", ["steps=4"], "h100-80gb", 4, 2, False, "pg-zero-1"))
    assert doc["num_nodes"] == 2 and doc["resources"]["accelerators"] == "H100:2"
    assert doc["resources"]["autostop"] == {"idle_minutes": 5, "down": True}
    assert '--nproc-per-node="$SKYPILOT_NUM_GPUS_PER_NODE"' in doc["run"]


@pytest.mark.skipif(not HAS_SKY, reason=NO_SKY)
def test_skypilots_schema_accepts_the_task_and_catches_a_typo():
    text = task_yaml("ring-allreduce", [], "rtx4090", 2, 1, True, "pg-ring-allreduce-1")
    assert validate(text).startswith("SkyPilot ")
    for good, typo in (("use_spot", "use_spott"), ("num_nodes", "num_nodez"),
                       ("idle_minutes", "idle_minute")):  # fmt: skip
        with pytest.raises(CloudSchemaError):
            validate(text.replace(good, typo))


@pytest.mark.skipif(HAS_SKY, reason="SkyPilot is installed: the plan is checked by it")
def test_without_skypilot_the_plan_says_it_was_not_checked(tmp_path):
    out = plan(tmp_path, *LAB, "--price", "0.3")
    assert out.returncode == 0 and "not checked by SkyPilot" in out.stdout
    assert validate("name: x\n") is None
