"""Lesson 3's pure parts: the checkpoint format (manifest, atomicity, no pickle), the fault
specs, and the checkpoint-interval formulas against their Monte-Carlo."""

from __future__ import annotations

import json
import math
import pickle
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from runtime.engine import checkpoint as ckpt
from runtime.engine.faults import parse_fault, require_timed
from scenarios.failure_resume import interval as ci

ROOT = Path(__file__).parents[1]


def write_checkpoint(root: Path, step: int, fill: float = 1.0) -> Path:
    tmp = ckpt.tmp_dir(root, step)
    tmp.mkdir(parents=True)
    ckpt.write_tensors(tmp, "model.safetensors", {"w": np.full((4, 3), fill, np.float32)})
    ckpt.write_tensors(tmp, "optimizer.safetensors", {"m": np.arange(12, dtype=np.float32)})
    ckpt.write_json(tmp, ckpt.META, {"step": step, "world_size": 2})
    ckpt.write_json(tmp, "rank0.json", {"python": ckpt.python_rng_state(random.getstate())})
    return ckpt.commit(root, step)


def test_commit_writes_a_manifest_of_every_file(tmp_path: Path) -> None:
    path = write_checkpoint(tmp_path, 5)
    assert path == tmp_path / "step-000005" and not ckpt.tmp_dir(tmp_path, 5).exists()
    manifest = json.loads((path / ckpt.MANIFEST).read_text())
    assert set(manifest["files"]) == {
        "model.safetensors",
        "optimizer.safetensors",
        "meta.json",
        "rank0.json",
    }
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == ckpt.sha256_of(path / name)
        assert entry["bytes"] == (path / name).stat().st_size
    assert ckpt.validate(path) is None
    assert np.array_equal(ckpt.read_tensors(path, "model.safetensors")["w"], np.ones((4, 3)))
    assert ckpt.read_meta(path)["step"] == 5


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (
            lambda p: (p / "model.safetensors").write_bytes(
                (p / "model.safetensors").read_bytes()[:-7]
            ),
            "truncated",
        ),
        (lambda p: ckpt.corrupt(p), "SHA-256"),
        (lambda p: (p / ckpt.MANIFEST).unlink(), "no manifest"),
        (lambda p: (p / "rank0.json").unlink(), "rank0.json missing"),
        (lambda p: (p / "stray.bin").write_bytes(b"x"), "not in the manifest"),
        (lambda p: (p / ckpt.MANIFEST).write_text("{not json"), "manifest unreadable"),
    ],
)
def test_a_damaged_checkpoint_is_never_loaded_the_previous_one_is(
    tmp_path: Path, damage, reason: str
) -> None:
    older = write_checkpoint(tmp_path, 5, fill=1.0)
    newest = write_checkpoint(tmp_path, 10, fill=2.0)
    damage(newest)
    assert reason in (ckpt.validate(newest) or "")
    chosen, skipped = ckpt.newest_valid(tmp_path)
    assert chosen == older
    assert [p for p, _ in skipped] == [newest] and reason in skipped[0][1]


def test_reading_a_tensor_file_checks_it_against_the_manifest(tmp_path: Path) -> None:
    path = write_checkpoint(tmp_path, 5)
    data = bytearray((path / "model.safetensors").read_bytes())
    data[-1] ^= 0x01  # one bit of one weight
    (path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="manifest"):
        ckpt.read_tensors(path, "model.safetensors")


def test_a_writer_killed_mid_write_leaves_nothing_loadable(tmp_path: Path) -> None:
    """A real SIGKILL half-way through a file of a checkpoint (the during=checkpoint hook)."""
    write_checkpoint(tmp_path, 5)
    code = textwrap.dedent(
        f"""
        import os, signal, numpy as np
        from runtime.engine import checkpoint as ckpt
        tmp = ckpt.tmp_dir({str(tmp_path)!r}, 10)
        tmp.mkdir()
        ckpt.write_tensors(tmp, "model.safetensors", {{"w": np.zeros(100000, np.float32)}},
                           on_half_written=lambda: os.kill(os.getpid(), signal.SIGKILL))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60)
    assert result.returncode == -9
    tmp = ckpt.tmp_dir(tmp_path, 10)
    assert [p.name for p in tmp.iterdir()] == [".model.safetensors.partial"]  # half a file
    assert [s for s, _ in ckpt.committed(tmp_path)] == [5]  # never renamed into place
    assert ckpt.newest_valid(tmp_path) == (tmp_path / "step-000005", [])
    assert ckpt.remove_incomplete(tmp_path) == [tmp] and not tmp.exists()


def test_checkpoints_hold_no_pickle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_checkpoint(tmp_path, 5)
    for f in path.iterdir():
        data = f.read_bytes()
        if f.suffix == ".safetensors":
            header = int.from_bytes(data[:8], "little")
            json.loads(data[8 : 8 + header])  # safetensors: a JSON header, then raw bytes
        else:
            json.loads(data)
        assert not data.startswith(b"\x80"), f"{f.name} looks like a pickle"

    def refuse(*_args, **_kwargs):
        raise AssertionError("something tried to unpickle")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    assert ckpt.validate(path) is None
    assert ckpt.read_tensors(path, "optimizer.safetensors")["m"][11] == 11
    for module in (
        "runtime/engine/checkpoint.py",
        "scenarios/failure_resume/rank.py",
        "scenarios/failure_resume/trainer.py",
    ):
        source = (ROOT / module).read_text()
        assert "torch.load(" not in source and "import pickle" not in source


def test_rng_states_round_trip_as_plain_json() -> None:
    random.seed(7)
    np.random.seed(7)
    saved_py = json.loads(json.dumps(ckpt.python_rng_state(random.getstate())))
    saved_np = json.loads(json.dumps(ckpt.numpy_rng_state(np.random.get_state())))
    expected = (random.random(), np.random.permutation(10).tolist())
    random.seed(99)
    np.random.seed(99)
    random.setstate(ckpt.python_rng_restore(saved_py))
    np.random.set_state(ckpt.numpy_rng_restore(saved_np))
    assert (random.random(), np.random.permutation(10).tolist()) == expected


# -- faults -------------------------------------------------------------------------
def test_new_fault_forms() -> None:
    f = parse_fault("kill:rank=1,step=12", 4)
    assert (f.kind, f.rank, f.step, f.after_s, f.timed) == ("kill", 1, 12, None, False)
    f = parse_fault("kill:rank=3,during=checkpoint", 4)
    assert (f.during, f.step) == ("checkpoint", None)
    assert parse_fault("kill:rank=0,during=checkpoint,step=10", 2).step == 10
    assert parse_fault("hang:rank=2,step=7", 4).kind == "hang"
    f = parse_fault("corrupt:checkpoint=latest", 4)
    assert (f.kind, f.rank, f.checkpoint) == ("corrupt", None, "latest")
    assert parse_fault("kill:rank=1,after=0.3s", 4).timed
    require_timed([parse_fault("hang:rank=1,after=1s", 2)])
    with pytest.raises(ValueError, match="failure-resume"):
        require_timed([parse_fault("kill:rank=1,step=3", 2)])


@pytest.mark.parametrize(
    "spec",
    [
        "kill:rank=4,step=3",
        "kill:rank=1,step=0",
        "kill:rank=1,step=x",
        "kill:rank=1,during=forward",
        "kill:rank=1,step=3,after=1s",
        "hang:rank=1,during=checkpoint",
        "corrupt:checkpoint=oldest",
        "corrupt:rank=1",
        "corrupt",
    ],
)
def test_bad_fault_forms_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="fault"):
        parse_fault(spec, 4)


# -- how often to checkpoint ------------------------------------------------------------
# Young √(2CM) and Daly √(2CM)·(1 + √x/3 + x/9) − C with x = C/(2M), worked out apart
# from the code (40-digit decimals) and written down: (C, M, Young, Daly), in seconds.
# C = 300 s, M = 1 day reads by hand: √(2·300·86400) = 7200, x = 1/576, √x = 1/24, so
# Daly = 7200·(1 + 1/72 + 1/5184) − 300 = 7000 + 25/18.
WRITTEN_OUT = [
    (60.0, 3 * 3600.0, 1138.41995766, 1098.77132185),  # docs/references.md's example
    (300.0, 86400.0, 7200.0, 7001.38888889),
    (10.0, 1800.0, 189.736659610, 183.128553641),
    (300.0, 900.0, 734.846922835, 548.455199184),
    (1740.0, 900.0, 1769.74574445, 799.829546632),  # C just under 2M
]


@pytest.mark.parametrize(("c", "m", "young", "daly"), WRITTEN_OUT)
def test_young_and_daly_exact_values(c: float, m: float, young: float, daly: float) -> None:
    """docs/references.md, "Fault tolerance"."""
    assert ci.young_interval(c, m) == pytest.approx(young, rel=1e-9)
    assert ci.daly_interval(c, m) == pytest.approx(daly, rel=1e-9)


def test_daly_is_the_mtbf_once_a_checkpoint_costs_two_of_them() -> None:
    c, m = 60.0, 3 * 3600.0
    assert ci.daly_interval(3 * m, m) == m  # C >= 2M: checkpoint once per MTBF
    assert ci.daly_interval(1860.0, 900.0) == 900.0
    assert ci.daly_interval(1800.0, 900.0) == 900.0  # C = 2M exactly
    # The exact expectation of the model at R = 0, M(e^{(τ+C)/M} - 1)/τ - 1, at τ = 1000 s:
    # 10800·(e^{1060/10800} - 1)/1000 - 1, worked out apart from the code.
    assert ci.expected_overhead(1000.0, c, m) == pytest.approx(0.113762950356, rel=1e-9)


@pytest.mark.parametrize("mtbf", [1800.0, 3 * 3600.0, 86400.0])
@pytest.mark.parametrize("save_cost", [10.0, 60.0, 300.0])
def test_simulated_optimum_agrees_with_daly_within_5_percent(mtbf: float, save_cost: float) -> None:
    study = ci.study(save_cost, mtbf, seed=int(mtbf + save_cost))
    assert study.simulated_optimal_interval == pytest.approx(study.daly, rel=0.05)
    # and the simulated curve is the model's expectation, point by point
    for sim, exact in zip(study.overhead_simulated, study.overhead_expected, strict=True):
        assert sim == pytest.approx(exact, rel=0.03, abs=0.002)


def test_simulation_is_seeded() -> None:
    fresh = ci.study.__wrapped__  # past the cache: two real simulations
    a, b = fresh(60, 10800, seed=3), fresh(60, 10800, seed=3)
    assert a == b and a is not b
    assert ci.study(60, 10800, seed=3) is ci.study(60, 10800, seed=3)  # metrics and curves share it


def test_predict_never_imports_torch() -> None:
    """How fast predict is, is measured by benchmarks/; a hang ends at the subprocess's
    timeout."""
    code = textwrap.dedent(
        """
        import sys, io, json, contextlib
        from playground.cli import main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["predict", "failure-resume", "-p", "mtbf=3h", "-p", "save_cost=60s", "--json"])
        assert rc == 0, rc
        assert "torch" not in sys.modules, "predict imported torch"
        m = {d["name"]: d.get("value") for d in json.loads(buf.getvalue())["metrics"]}
        print(json.dumps({k: m[k] for k in ("young_interval_s", "daly_interval_s",
              "simulated_optimal_interval_s")}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["young_interval_s"] == pytest.approx(1138.41995766, rel=1e-9)
    assert doc["daly_interval_s"] == pytest.approx(1098.77132185, rel=1e-9)
    assert doc["simulated_optimal_interval_s"] == pytest.approx(1098.77, rel=0.05)


def test_html_export_plots_the_interval_curve_with_the_three_intervals(tmp_path: Path) -> None:
    """The lesson's `curves` hook: the study its metrics quote, drawn by the generic export."""
    from playground import session
    from playground.export.curves import build_curve_figure
    from playground.export.html import write_html
    from scenarios.metrics import find

    outcome = session.predict("failure-resume", {"mtbf": "3h", "save_cost": "60s"})
    assert len(outcome.curves) == 1
    curve = outcome.curves[0]
    study = ci.study(60.0, 3 * 3600.0)
    assert curve.x == list(study.intervals) and curve.log_x and curve.y_unit == "fraction"
    assert list(curve.lines.values()) == [
        list(study.overhead_simulated),
        list(study.overhead_expected),
    ]
    figure = build_curve_figure(curve)
    assert figure is not None
    lines = [shape.x0 for shape in figure.layout.shapes]
    m = {
        name: find(outcome.metrics, name).value  # type: ignore[union-attr]
        for name in ("young_interval_s", "daly_interval_s", "simulated_optimal_interval_s")
    }
    assert lines == list(m.values())
    # Young's and Daly's lines where the formulas put them (C = 60 s, M = 3 h, worked out
    # apart from the code), the simulated optimum near Daly's.
    assert lines[:2] == pytest.approx([1138.41995766, 1098.77132185], rel=1e-9)
    assert lines[2] == pytest.approx(1098.77, rel=0.05)
    # The expected curve is the model's closed form, M·(e^{(τ+C)/M} − 1)/τ − 1, at each τ.
    expected = [10800 * math.expm1((tau + 60) / 10800) / tau - 1 for tau in curve.x]
    assert list(curve.lines.values())[1] == pytest.approx(expected, rel=1e-9)
    assert list(figure.data[0].x) == list(study.intervals)
    assert figure.layout.xaxis.type == "log"
    path = tmp_path / "interval.html"
    write_html(outcome, path)
    text = path.read_text()
    assert "simulated optimum" in text and "Young" in text and "Daly" in text
    assert session.predict("ring-allreduce", {}).curves == []  # other lessons: no figure
