"""The CLI contract, end to end, as a user types it (subprocesses, real ranks on gloo)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from cli_server import run_cli
from conftest import metric_of, tool

PY = sys.executable


def playground(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess:
    """`python -m playground.cli ARGS` as its own process: forked from one that has the CLI
    imported (tests/cli_server.py: the same process contract, without 0.3 s of imports
    each). What needs a fresh interpreter (which modules it imports, a closed pipe) runs
    one itself."""
    environment = {**os.environ, "PLAYGROUND_LANG": "en", **(env or {})}
    return run_cli(args, env=environment, timeout=timeout)


def is_fork_server(entry: Path) -> bool:
    """The fork server itself; its ranks carry its command line too, but it is their parent."""

    def forked(proc: Path) -> bool:
        return b"multiprocessing.forkserver" in (proc / "cmdline").read_bytes()

    parent = Path("/proc") / (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
    return forked(entry) and not forked(parent)


def processes_with(marker: str, *, fork_server: bool = True) -> list[int]:
    """PIDs of live processes whose environment carries `marker` (the run's ranks inherit
    it). `fork_server=False` leaves out the launcher's fork server (runtime.engine.spawn), which
    lives as long as the process that started it, as its resource tracker does."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().split()[2]
                if state != "Z" and (fork_server or not is_fork_server(entry)):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_list() -> None:
    out = playground("list", "--json")
    assert out.returncode == 0
    lessons = json.loads(out.stdout)
    assert [entry["lesson"] for entry in lessons] == list(range(8))
    ring = next(e for e in lessons if e["scenario"] == "ring-allreduce")
    assert ring["available"] and ring["title"]["es"] and ring["title"]["en"]
    assert "ring-allreduce" in playground("list").stdout


def predict_without_torch(*args: str) -> dict:
    """`playground predict ARGS --json` in a fresh interpreter, which must never import
    torch: its JSON document."""
    code = (
        "import sys, io, contextlib\n"
        "from playground.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        f"    rc = main(['predict', *{list(args)!r}, '--json'])\n"
        "assert rc == 0, rc\n"
        "assert 'torch' not in sys.modules, 'predict imported torch'\n"
        "print(buf.getvalue())\n"
    )
    result = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_json_is_indented_and_compact_on_request() -> None:
    """Issue 35, item 6: `predict … --json | head` reads a document, not one 120 KB line;
    `--compact` keeps the one line, for every command that has --json."""
    args = ("predict", "why-distribute", "--hardware", "cpu-default", "--json")
    pretty, compact = playground(*args), playground(*args, "--compact")
    assert pretty.returncode == compact.returncode == 0, pretty.stderr + compact.stderr
    assert json.loads(pretty.stdout) == json.loads(compact.stdout)
    lines = pretty.stdout.splitlines()
    assert lines[0] == "{" and lines[1] == '  "format": 2,' and max(map(len, lines)) < 1000
    assert len(compact.stdout.splitlines()) == 1
    for command in (("list",), ("show", "ring-allreduce")):
        assert len(playground(*command, "--json").stdout.splitlines()) > 1
        assert len(playground(*command, "--json", "--compact").stdout.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "english", "spanish"),
    [
        (
            ["predict", "zero", "-p", "ranks=0"],
            "ranks must be an integer from",
            "ranks debe ser un entero de",
        ),
        (["predict", "nope"], "unknown scenario 'nope'", "escenario desconocido 'nope'"),
        (
            ["predict", "zero", "--hardware", "tpu"],
            "unknown hardware profile",
            "perfil de hardware",
        ),
        (["predict", "zero", "-p", "x"], "malformed -p x", "-p x mal formado"),
        (["predict", "zero", "--bogus"], "unrecognized arguments", "argumentos no reconocidos"),
    ],
)
def test_usage_errors_in_the_learners_language(args, english: str, spanish: str) -> None:
    """Exit 2 and one line, in English or in Spanish as PLAYGROUND_LANG says."""
    for lang, needle in (("en", english), ("es", spanish)):
        out = playground(*args, env={"PLAYGROUND_LANG": lang})
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert needle in out.stderr, out.stderr


def test_predict_never_imports_torch() -> None:
    doc = predict_without_torch("ring-allreduce", "-p", "ranks=64")
    assert "measured" not in doc and doc["predicted"]


def test_predict_json_shape_and_profiles() -> None:
    out = playground(
        "predict", "ring-allreduce", "--ranks", "8", "--hardware", "h100-nvlink", "--json"
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) >= {"scenario", "params", "metrics", "predicted", "profile"}
    assert doc["profile"]["name"] == "h100-nvlink"
    assert doc["params"]["ranks"] == 8
    span = doc["predicted"][0]
    assert {"rank", "kind", "label", "start", "end", "action_id"} <= set(span)
    out = playground("predict", "ring-allreduce", "-p", "ranks=4096", "-p", "size=1GiB", "--json")
    assert out.returncode == 0 and metric_of(json.loads(out.stdout), "time_s")["predicted"] > 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["predict", "ring-allreduce", "-p", "ranks=0"], "ranks"),
        (["run", "ring-allreduce", "-p", "ranks=1000"], "ranks"),
        (["predict", "ring-allreduce", "-p", "ranks=5000"], "ranks"),
        (["predict", "ring-allreduce", "-p", "size=-1"], "size"),
        (["predict", "ring-allreduce", "-p", "size=abc"], "size"),
        (["predict", "ring-allreduce", "-p", "size=6"], "float32"),
        (["predict", "ring-allreduce", "-p", "colour=red"], "unknown parameter"),
        (["predict", "ring-allreduce", "-p", "algorithm=magic"], "algorithm"),
        (["predict", "ring-allreduce", "-p", "nonsense"], "key=value"),
        (["predict", "no-such-lesson"], "unknown scenario"),
        (["show", "no-such-lesson"], "unknown scenario"),
        (["show", "ring-allreduce", "-p", "ranks=0"], "ranks"),
        (["predict", "ring-allreduce", "--ranks", "4", "-p", "ranks=8"], "disagree"),
        (["predict", "ring-allreduce", "-p", "size=1e400"], "size"),
        (["run", "ring-allreduce", "--fault", "kill:rank"], "--fault"),
        (["run", "ring-allreduce", "--fault", "kill:rank=7,after=1s"], "rank must be in 0..3"),
        (["run", "ring-allreduce", "--backend", "mpi"], "backend"),
        (["predict", "ring-allreduce", "--hardware", "tpu"], "hardware profile"),
        (["replay", "/no/such/file.json"], "cannot read"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str) -> None:
    out = playground(*args)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert needle in lines[0]
    assert "Traceback" not in out.stderr


@pytest.mark.ranks
def test_run_four_ranks_pairs_with_prediction_and_equals_builtin(tmp_path: Path) -> None:
    html, trace = tmp_path / "ring.html", tmp_path / "ring.trace.json"
    out = playground(
        "run",
        "ring-allreduce",
        "--ranks",
        "4",
        "-p",
        "size=4MiB",
        "--json",
        "--export",
        str(html),
        "--trace",
        str(trace),
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    measured = {s["action_id"] for s in doc["measured"]}
    predicted = {s["action_id"] for s in doc["predicted"]}
    assert measured == predicted and len(doc["measured"]) == len(doc["predicted"])
    assert doc["format"] == 2
    assert metric_of(doc, "equals_builtin")["value"] is True
    sent = metric_of(doc, "bytes_sent_per_rank")
    assert sent["value"] == [sent["predicted"]] * 4 and sent["per"] == "rank"
    for name in ("time_s", "busbw_gbps", "builtin_busbw_gbps"):
        pair = metric_of(doc, name)
        assert pair["value"] > 0 and pair["predicted"] > 0 and pair["error"] >= 0
    assert metric_of(doc, "algbw_gbps")["value"] > 0
    assert doc["profile"]["name"].startswith("calibrated:")  # calibrated on first use
    steps = [s for s in doc["measured"] if s["kind"] == "sendrecv"]
    assert steps and all("bytes" in s and "peer" in s for s in steps)
    assert html.stat().st_size > 0 and json.loads(trace.read_text())["traceEvents"]

    # The saved run replays like a normal one.
    saved = tmp_path / "run.json"
    saved.write_text(out.stdout)
    again = playground("replay", str(saved), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["metrics"] == doc["metrics"]

    # `predict` now uses this machine's calibration and says so.
    predicted_doc = json.loads(
        playground("predict", "ring-allreduce", "--ranks", "4", "--json").stdout
    )
    assert predicted_doc["profile"]["name"] == doc["profile"]["name"]
    # The run's headline, held to the error budget: before the run it was what `predict`
    # says on the same calibration; after it, the prediction with the run's own figures.
    rows = doc["prediction_error"]["metrics"]
    [row] = [r for r in rows if r["headline"]]
    assert row["name"] == "time_s" and row["measured"] == metric_of(doc, "time_s")["value"]
    # Every paired metric is there with its errors; only the headline gets verdicts.
    sent = next(r for r in rows if r["name"] == "bytes_sent_per_rank")
    assert sent["after_run"]["error"] == 0.0 and sent["after_run"]["within"] is None
    said = metric_of(predicted_doc, "time_s")["predicted"]
    assert row["before_run"]["predicted"] == pytest.approx(said, rel=1e-9)
    assert metric_of(doc, "time_s")["before"] == row["before_run"]["predicted"]
    assert row["after_run"]["predicted"] == metric_of(doc, "time_s")["predicted"]
    assert row["before_run"]["budget"] == 0.25 and row["after_run"]["budget"] == 0.10
    assert json.loads(again.stdout)["prediction_error"] == doc["prediction_error"]


@pytest.mark.ranks
@pytest.mark.parametrize("algorithm", ["tree", "builtin"])
@pytest.mark.parametrize("dtype", ["int64"])
def test_other_algorithms_and_integer_data(algorithm: str, dtype: str) -> None:
    out = playground(
        "run",
        "ring-allreduce",
        "--ranks",
        "3",
        "-p",
        f"algorithm={algorithm}",
        "-p",
        f"dtype={dtype}",
        "-p",
        "size=1000008",
        "--hardware",
        "cpu-default",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert metric_of(doc, "equals_builtin")["value"] is True
    assert metric_of(doc, "max_abs_diff_vs_builtin")["value"] == 0


@pytest.mark.ranks
@pytest.mark.parametrize("kind", ["kill", "hang"])
def test_failed_rank_is_named_and_nothing_is_left(kind: str) -> None:
    marker = f"PLAYGROUND_TEST_MARK={uuid.uuid4().hex}"
    out = playground(
        "run",
        "ring-allreduce",
        "--ranks",
        "4",
        "-p",
        "size=64MiB",
        "--hardware",
        "cpu-default",
        "--fault",
        f"{kind}:rank=2,after=0.3s",
        env={"PLAYGROUND_TEST_MARK": marker.split("=", 1)[1]},
        timeout=240,  # a detection that never comes ends here, not in an assert on the clock
    )
    assert out.returncode == 1, out.stderr
    assert "rank 2" in out.stderr
    assert ("SIGKILL" if kind == "kill" else "stopped answering") in out.stderr
    assert "Traceback" not in out.stderr
    time.sleep(0.2)
    assert processes_with(marker) == []


@pytest.mark.ranks
def test_torchrun_path(tmp_path: Path) -> None:
    out_dir = tmp_path / "torchrun-out"
    result = subprocess.run(
        [
            tool("torchrun"),  # torch's, next to this interpreter (not looked up on PATH)
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "scenarios.torchrun",
            "ring-allreduce",
            "-p",
            "size=64KiB",
            "--out",
            str(out_dir),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    replay = playground("replay", str(out_dir), "--json")
    assert replay.returncode == 0, replay.stderr
    doc = json.loads(replay.stdout)
    assert doc["params"]["ranks"] == 2
    assert {s["action_id"] for s in doc["measured"]} == {s["action_id"] for s in doc["predicted"]}
    assert metric_of(doc, "equals_builtin")["value"] is True


def test_layer_rules_hold() -> None:
    """docs/design.md's import rules, checked by import-linter's contracts in pyproject.toml."""
    result = subprocess.run(
        [tool("lint-imports")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[1],
    )
    assert result.returncode == 0, result.stdout[-3000:]


def test_show_prints_each_ranks_program_and_json() -> None:
    out = playground("show", "ring-allreduce", "--ranks", "3", "-p", "repeat=1")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    rank0 = next(line for line in lines if line.strip().startswith("rank 0:"))
    # A barrier, then 2(n-1) ring steps: send right while receiving from the left.
    assert rank0.split(":", 1)[1].split() == ["|"] + ["→1←2"] * 4
    assert any(line.strip() == "reference:" for line in lines)
    doc = json.loads(playground("show", "ring-allreduce", "--ranks", "3", "--json").stdout)
    assert doc["world_size"] == 3 and len(doc["ranks"]) == 3
    first = doc["ranks"][0][0]
    assert first["kind"] == "barrier" and first["token"] == "|" and "action_id" in first


def test_a_closed_pipe_ends_quietly() -> None:
    """`playground predict … | head -1`: no traceback when the reader goes away."""
    for command in ("predict ring-allreduce", "show ring-allreduce", "list"):
        result = subprocess.run(
            f"{PY} -m playground.cli {command} | head -1",
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PLAYGROUND_LANG": "en"},
        )
        assert result.returncode == 0
        assert len(result.stdout.splitlines()) == 1
        assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr


@pytest.mark.ranks
def test_calibrate_one_rank_times_compute_and_no_link(tmp_path) -> None:
    """One rank alone (tp=1, NCCL on one GPU) calibrates its compute; it has no link to
    time, so alpha and beta stay at their floors and no collective is scaled."""
    out = playground(
        "calibrate", "--ranks", "1", "--json", env={"PLAYGROUND_CACHE_DIR": str(tmp_path)}
    )
    assert out.returncode == 0, out.stderr
    model = json.loads(out.stdout)
    assert (model["alpha"], model["beta"]) == (1e-7, 1e-13)
    assert set(model["collective_scale"].values()) == {1.0}
    lessons = model["rates"]["lessons"]  # each lesson's own rates, by name (their probes)
    assert model["rates"]["forward_flops_per_s"] > 0 and lessons["zero"]["sharded_adam_s"] >= 0
    assert model["rates"]["forward_s_per_element"] >= 0
    assert model["rates"]["adam_s_per_tensor"] > 0  # torch's Adam loops over tensors on a CPU
    # fp16 and bf16 blocks timed beside fp32's (mixed precision's compute before a run).
    assert lessons["mixed-precision"]["fp16_slowdown"] > 0
    assert lessons["mixed-precision"]["bf16_slowdown"] > 0


@pytest.mark.ranks
def test_calibrate_three_ranks_times_each_collective_between_computes(tmp_path) -> None:
    """Three ranks (the busy buffer does not split in three: torch's all-gather gets
    equal parts of it) scale the hand-made ring's kinds, torch's all-reduce and torch's
    all-gather, each from its own timing."""
    runs = tmp_path / "runs"
    out = playground(
        "calibrate",
        "--ranks",
        "3",
        "--json",
        env={"PLAYGROUND_CACHE_DIR": str(tmp_path), "PLAYGROUND_RUNS_DIR": str(runs)},
    )
    assert out.returncode == 0, out.stderr
    # A checkpoint timed as lesson 3 writes one, every rank at once: its fixed cost and
    # the bandwidth its bytes see (the lesson's own rates); the folders it wrote are gone.
    rates = json.loads(out.stdout)["rates"]["lessons"]["failure-resume"]
    # (measured, so only their sign and finiteness are asserted: no bound on the clock)
    assert math.isfinite(rates["checkpoint_s"]) and rates["checkpoint_s"] > 0
    assert math.isfinite(rates["disk_bytes_per_s"]) and rates["disk_bytes_per_s"] > 0
    assert not list(runs.glob("calibrate-checkpoint-*"))
    scales = json.loads(out.stdout)["collective_scale"]
    kinds = ("all_reduce", "reduce_scatter", "all_gather")
    assert set(scales) == {*kinds, *(f"builtin.{kind}" for kind in kinds)}
    assert all(math.isfinite(v) and v > 0 for v in scales.values()), scales
    assert scales["builtin.reduce_scatter"] == scales["builtin.all_reduce"]
    assert scales["builtin.all_gather"] != scales["builtin.all_reduce"]  # timed apart
