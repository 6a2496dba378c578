"""Owned files only (issue 37, items 1, 2, 7 and 12): bounded reads, owned folders, private files.

- A path from a user is read only if it is a regular file, and at most a cap:
  `replay` of a device, a FIFO or a socket is one line and exit 2 at once.
- Metrics render in linear time, and a saved run past the schema's limits is
  refused before it is decoded whole.
- The runs folder is the playground's own (a marker file): a folder that is not
  ours is refused untouched, and pruning removes only run folders we made.
- Every file and folder written under the state dir is private (0600/0700),
  nothing is written through a planted symlink, and --export/--trace replace
  only a regular file.

Each reproducer runs in a subprocess with a time and memory limit where today's
code hung or grew without bound, so a regression fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_server import run_cli

from playground import saved_schema
from playground.saved_schema import MAX_OBJECTS, RunDoc, SavedRunError
from runtime.engine import checkpoint, rundirs
from runtime.engine.files import (
    NotRegularFile,
    TooLarge,
    make_private_dir,
    open_private,
    read_bounded,
    write_text_atomic,
)
from runtime.fit import calibration

HOSTILE = Path(__file__).parent / "data" / "hostile"
CLI = "import sys; from playground.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(autouse=True)
def _keep_umask():
    """new_run_dir makes the process's umask 077: the suite's other tests keep theirs."""
    before = os.umask(0o022)
    os.umask(before)
    yield
    os.umask(before)


MEMORY_LIMIT = 1 << 30  # today's reader grew to a MemoryError: stop it at 1 GiB


def playground(*args: str, timeout: float = 30, **env: str) -> subprocess.CompletedProcess:
    """`playground ARGS` in a process of its own (tests/cli_server.py: forked from one that
    has the CLI imported), bounded in time and memory."""
    env = {**os.environ, "PLAYGROUND_LANG": "en", **env}
    return run_cli(args, env=env, timeout=timeout, entry="main", memory_limit=MEMORY_LIMIT)


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr[-500:]
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


# -- item 1: replay reads regular files only, and at most a cap ------------------------
@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom"])
def test_replay_of_a_link_to_a_device_is_one_line_at_once(tmp_path: Path, target: str) -> None:
    (tmp_path / "z.json").symlink_to(target)
    # Reading the device until memory runs out would time out (or fail) here.
    line = one_line(playground("replay", str(tmp_path / "z.json"), timeout=20))
    assert "character device" in line


def test_replay_of_a_fifo_is_one_line_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.json")
    line = one_line(playground("replay", str(tmp_path / "f.json"), timeout=20))
    assert "FIFO" in line


def test_replay_of_a_socket_is_one_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "s.json"))
        line = one_line(playground("replay", str(tmp_path / "s.json"), timeout=20))
    assert "socket" in line


@pytest.mark.parametrize("name", ["run.json", "rank1.json"])
def test_replay_of_a_run_dir_with_a_fifo_inside_is_one_line(tmp_path: Path, name: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(HOSTILE / "torchrun.valid", run)
    (run / name).unlink()
    os.mkfifo(run / name)
    line = one_line(playground("replay", str(run), timeout=20))
    assert name in line


def test_read_bounded_refuses_before_opening_and_counts_what_comes(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFile):  # would block for ever if opened for reading
        read_bounded(tmp_path / "fifo", 10)
    with pytest.raises(NotRegularFile):
        read_bounded("/dev/zero", 10)
    with pytest.raises(TooLarge):  # st_size says 0: the bytes are counted
        read_bounded("/proc/self/status", 10)
    (tmp_path / "f").write_bytes(b"x" * 11)
    with pytest.raises(TooLarge):
        read_bounded(tmp_path / "f", 10)
    assert read_bounded(tmp_path / "f", 11) == b"x" * 11
    (tmp_path / "link").symlink_to(tmp_path / "f")
    assert read_bounded(tmp_path / "link", 11) == b"x" * 11  # a link to a file: fine
    with pytest.raises(OSError):
        read_bounded(tmp_path / "link", 11, follow=False)


# -- item 7: linear rendering, bounded decoding ------------------------------------------
def test_a_hundred_thousand_metrics_replay_in_seconds(tmp_path: Path) -> None:
    doc = json.loads((HOSTILE / "valid.ring.json").read_text())
    doc["metrics"] = [
        {"name": f"m{i}", "unit": "s", "value": i * 1e-3, "predicted": i * 2e-3}
        for i in range(100_000)
    ]
    path = tmp_path / "many.json"
    path.write_text(json.dumps(doc))
    done = playground("replay", str(path), timeout=60)  # quadratic rendering times out
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.count("\n") > 100_000


def test_a_document_past_the_schemas_limits_is_refused_before_it_is_decoded() -> None:
    span = b'{"rank":0,"kind":"x","label":"x","start":0,"end":0}'
    data = (
        b'{"format":2,"scenario":"ring-allreduce","params":{},"predicted":['
        + b",".join([span] * (MAX_OBJECTS + 1))
        + b"]}"
    )
    with pytest.raises(SavedRunError, match="objects"):
        saved_schema.decode(data, RunDoc)


def test_the_saved_timeline_docs_declare_the_timeline_fields_in_order() -> None:
    import dataclasses

    from runtime.sim.trace import Counter, Mark, Span

    for kind, doc in ((Span, saved_schema.SpanDoc), (Counter, saved_schema.CounterDoc)):
        assert [f.name for f in dataclasses.fields(kind)] == list(doc.__struct_fields__)
    assert [f.name for f in dataclasses.fields(Mark)] == list(
        saved_schema.MarkDoc.__struct_fields__
    )


# -- item 2: owned directories only --------------------------------------------------------
def _projects(folder: Path, n: int = 30) -> dict[str, float]:
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    for i in range(1, n + 1):
        (folder / f"project{i:02d}").mkdir()
        (folder / f"project{i:02d}" / "work.txt").write_text("mine")
    return {p.name: p.stat().st_mtime for p in folder.iterdir()}


def test_a_runs_dir_that_is_not_ours_is_refused_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    before = _projects(folder)
    line = one_line(
        playground("run", "ring-allreduce", "--ranks", "2", PLAYGROUND_RUNS_DIR=str(folder))
    )
    assert "not empty and was not made by the playground" in line
    assert {p.name: p.stat().st_mtime for p in folder.iterdir()} == before
    assert all((folder / name / "work.txt").read_text() == "mine" for name in before)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755  # not chmodded


def test_runs_root_refuses_a_folder_not_ours_and_a_file(tmp_path, monkeypatch) -> None:
    _projects(tmp_path / "work", 3)
    monkeypatch.setenv("PLAYGROUND_RUNS_DIR", str(tmp_path / "work"))
    with pytest.raises(rundirs.RunsDirError):
        rundirs.new_run_dir("lesson")
    assert len(list((tmp_path / "work").iterdir())) == 3
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("PLAYGROUND_RUNS_DIR", str(tmp_path / "file"))
    with pytest.raises(rundirs.RunsDirError):
        rundirs.runs_root()


def test_pruning_removes_only_marked_runs(tmp_path, monkeypatch) -> None:
    root = tmp_path / "runs"
    monkeypatch.setenv("PLAYGROUND_RUNS_DIR", str(root))
    monkeypatch.setenv("PLAYGROUND_KEEP_RUNS", "3")
    rundirs.runs_root()  # ours: marked
    assert (root / rundirs.ROOT_MARKER).is_file()
    # Folders put there later by hand: not runs (a name like a run's, without the marker;
    # a project), so never removed, however old.
    impostor = root / "20000101-000000-ring-allreduce-abcdefgh"
    impostor.mkdir()
    os.utime(impostor, (0, 0))
    for i in range(1, 31):
        (root / f"project{i:02d}").mkdir()
        os.utime(root / f"project{i:02d}", (0, 0))
    made = []
    for n in range(6):
        made.append(rundirs.new_run_dir(f"lesson-{n}"))
        os.utime(made[-1], (1000 + n, 1000 + n))
    left = {p.name for p in root.iterdir()}
    assert {p.name for p in made[-3:]} <= left
    assert not any(p.name in left for p in made[:3])
    assert impostor.name in left
    assert all(f"project{i:02d}" in left for i in range(1, 31))
    assert all((p / rundirs.RUN_MARKER).is_file() for p in made[-3:])


def test_an_empty_folder_or_an_older_runs_folder_is_taken(tmp_path, monkeypatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o755)
    monkeypatch.setenv("PLAYGROUND_RUNS_DIR", str(empty))
    assert rundirs.runs_root() == empty
    assert stat.S_IMODE(empty.stat().st_mode) == 0o700
    older = tmp_path / "older"  # an older version's: run folders, the pool's store
    (older / "20240101-120000-zero-abcd1234").mkdir(parents=True)
    (older / ".pool-abcd_123.store").write_text("")
    monkeypatch.setenv("PLAYGROUND_RUNS_DIR", str(older))
    assert rundirs.runs_root() == older
    assert (older / rundirs.ROOT_MARKER).is_file()


# -- item 12: private files, no write through a link, no replaced device -------------------
def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_write_text_atomic_is_private_and_replaces_only_regular_files(tmp_path: Path) -> None:
    write_text_atomic(tmp_path / "a.json", "{}")
    assert mode(tmp_path / "a.json") == 0o600
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFile):
        write_text_atomic(tmp_path / "fifo", "x")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    (tmp_path / "null").symlink_to("/dev/null")
    with pytest.raises(NotRegularFile):
        write_text_atomic(tmp_path / "null", "x")
    assert os.readlink(tmp_path / "null") == "/dev/null"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "fifo", "null"]  # no tmp


@pytest.mark.parametrize("flag", ["--export", "--trace"])
def test_an_export_onto_a_fifo_or_a_device_is_refused(tmp_path: Path, flag: str) -> None:
    os.mkfifo(tmp_path / "out")
    line = one_line(playground("predict", "ring-allreduce", flag, str(tmp_path / "out")))
    assert "FIFO" in line
    assert stat.S_ISFIFO(os.lstat(tmp_path / "out").st_mode)
    (tmp_path / "dev").symlink_to("/dev/null")
    line = one_line(playground("predict", "ring-allreduce", flag, str(tmp_path / "dev")))
    assert "character device" in line
    assert os.readlink(tmp_path / "dev") == "/dev/null"


def test_open_private_follows_no_link_and_waits_for_no_fifo(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (tmp_path / "rank0.log").symlink_to(target)
    with pytest.raises(OSError):
        open_private(tmp_path / "rank0.log")
    assert target.read_text() == "untouched"
    os.mkfifo(tmp_path / "rank1.log")
    with pytest.raises(OSError):  # no reader: refused at once, never blocked
        open_private(tmp_path / "rank1.log")
    fd = open_private(tmp_path / "rank2.log")
    os.close(fd)
    assert mode(tmp_path / "rank2.log") == 0o600


def test_make_private_dir_makes_every_new_folder_private(tmp_path: Path) -> None:
    os.umask(0o022)
    made = make_private_dir(tmp_path / "a" / "b" / "c")
    assert all(mode(p) == 0o700 for p in (made, made.parent, made.parent.parent))


def test_the_calibration_cache_is_private(tmp_path, monkeypatch) -> None:
    from runtime.sim.profiles import PROFILES

    os.umask(0o022)
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path / "cache"))
    calibration.save(PROFILES["cpu-default"], "gloo", 2)
    assert mode(tmp_path / "cache") == 0o700
    assert mode(calibration.cache_file()) == 0o600
    calibration.cache_file().unlink()
    os.mkfifo(calibration.cache_file())  # a FIFO there: read as no cache, at once
    assert calibration.lookup("gloo", 2) is None


def test_checkpoints_are_private_whatever_the_umask(tmp_path: Path) -> None:
    os.umask(0o022)
    tmp = checkpoint.tmp_dir(tmp_path, 10)
    tmp.mkdir()  # as a rank forked with the user's umask makes it
    checkpoint.write_json(tmp, checkpoint.META, {"step": 10})
    checkpoint.write_json(tmp, "rank0.json", {})
    final = checkpoint.commit(tmp_path, 10)
    assert mode(final) == 0o700
    assert all(mode(p) == 0o600 for p in final.iterdir())
    assert checkpoint.validate(final) is None
    # A link planted at the partial file's name is not written through.
    other = tmp_path / "other"
    other.write_text("untouched")
    (tmp_path / ".x.json.partial").symlink_to(other)
    checkpoint.write_file(tmp_path / "x.json", b"{}")
    assert other.read_text() == "untouched"
    # A file of a checkpoint replaced by a link: invalid, said, never followed.
    (final / "rank0.json").unlink()
    (final / "rank0.json").symlink_to(other)
    assert "rank0.json" in (checkpoint.validate(final) or "")


STATE_RUNS = [
    ["run", "ring-allreduce", "--ranks", "2"],
    ["run", "ring-allreduce", "--ranks", "2", "--fault", "kill:rank=1,after=0s"],  # fires at once
]


@pytest.mark.ranks
def test_nothing_under_the_state_dir_is_readable_by_others(tmp_path, monkeypatch) -> None:
    """A successful and a failed run, under a umask that would make everything 0644."""
    from runtime.sim.profiles import PROFILES

    state, cache = tmp_path / "state", tmp_path / "cache"
    env = {"XDG_STATE_HOME": str(state), "PLAYGROUND_CACHE_DIR": str(cache)}
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(cache))  # calibrated: no 20 s calibration
    calibration.save(PROFILES["cpu-default"], calibration.backend_hint("auto"), 2)
    env_clean = {k: v for k, v in os.environ.items() if k != "PLAYGROUND_RUNS_DIR"}
    statuses = []
    for args in STATE_RUNS:
        done = subprocess.run(
            [sys.executable, "-c", f"import os; os.umask(0o022); {CLI}", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env_clean, "PLAYGROUND_LANG": "en", **env},
        )
        statuses.append(done.returncode)
    assert statuses == [0, 1]
    runs = state / "playground" / "runs"
    assert len([p for p in runs.iterdir() if rundirs.is_run_dir(p)]) >= 2
    leaks = [
        f"{oct(mode(p))} {p}"
        for root in (state, cache)
        for p in [root, *root.rglob("*")]
        if mode(p) & 0o077 and not p.is_symlink()
    ]
    assert not leaks, leaks
