"""Issue 37's process and input defects, each as its reproducer: --host, SIGTERM, input
given twice or a fault that cannot fire, the torchrun entry's --out, rank logs and the
rendezvous store left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from test_cli import playground, processes_with

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent


def one_line_refusal(out: subprocess.CompletedProcess, *words: str) -> None:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    for word in words:
        assert word in out.stderr


# -- --host ---------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["10.255.255.1", ""])
def test_a_host_not_of_this_machine_is_refused_at_once(host: str) -> None:
    # Refused before calibration or any rank: a hang is the timeout, not a clock assert.
    out = playground("run", "ring-allreduce", "--ranks", "2", "--host", host, timeout=60)
    one_line_refusal(out, "--host", "not an address of this machine")


def listeners_of(pids: list[int]) -> set[str]:
    """`address:port` of every TCP socket in LISTEN that one of `pids` holds."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                address, port = cols[1].split(":")
                found.add(f"{address}:{int(port, 16)}")
    return found


@pytest.mark.ranks
def test_host_loopback_listens_on_loopback_only() -> None:
    """`--host 127.0.0.1`: rank 0's TCPStore, like the ranks' gloo sockets, listens on
    127.0.0.1 (0100007F), never on every interface."""
    mark = uuid.uuid4().hex
    env = {**os.environ, "PLAYGROUND_LANG": "en", "PLAYGROUND_TEST_MARK": mark}
    args = ["run", "ring-allreduce", "--ranks", "2", "-p", "size=16MiB", "-p", "repeat=10"]
    proc = subprocess.Popen(
        [PY, "-m", "playground.cli", *args, "--hardware", "cpu-default", "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: set[str] = set()
    while proc.poll() is None:
        seen |= listeners_of(processes_with(mark, fork_server=False))
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert seen, "no listener seen while the run went"
    assert all(a.startswith("0100007F:") for a in seen), seen


# -- SIGTERM ----------------------------------------------------------------------------
@pytest.mark.ranks
def test_sigterm_ends_the_run_its_ranks_and_helpers() -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, "PLAYGROUND_LANG": "en", "PLAYGROUND_TEST_MARK": mark}
    args = ["run", "pipeline", "--ranks", "4", "-p", "microbatches=256"]
    proc = subprocess.Popen(
        [PY, "-m", "playground.cli", *args, "--hardware", "cpu-default"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(processes_with(mark)) < 1 + 1 + 4 and time.monotonic() < deadline:
        time.sleep(0.1)  # the command, its fork server and its four ranks
    assert proc.poll() is None, "the run ended before it could be signalled"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == [
        "playground: terminated (SIGTERM): every rank of the run was stopped"
    ]
    deadline = time.monotonic() + 3  # every process of the run gone within 3 s
    while processes_with(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(mark) == []


# -- input given twice, or a fault that cannot fire ------------------------------------
@pytest.mark.parametrize("scenario", ["ring-allreduce", "zero", "pipeline"])
def test_a_parameter_given_twice_is_refused(scenario: str) -> None:
    out = playground("predict", scenario, "-p", "ranks=2", "-p", "ranks=3")
    one_line_refusal(out, "ranks is given more than once")


def test_a_fault_field_given_twice_is_refused() -> None:
    fault = "kill:rank=0,rank=1,after=1s"
    out = playground("run", "ring-allreduce", "--ranks", "2", "--fault", fault, timeout=60)
    one_line_refusal(out, "rank is given twice")


def test_a_timed_fault_after_the_run_is_refused() -> None:
    fault = "kill:rank=1,after=3600s"
    args = ["run", "zero", "--ranks", "2", "--hardware", "cpu-default", "--fault", fault]
    out = playground(*args, timeout=60)
    one_line_refusal(out, "would never fire", "predicted to take")


def test_slow_where_it_cannot_slow_is_refused() -> None:
    fault = "slow:rank=1,factor=10"
    args = ["run", "ring-allreduce", "--ranks", "2", "-p", "algorithm=builtin"]
    out = playground(*args, "--fault", fault, timeout=60)
    one_line_refusal(out, "algorithm=builtin", "use algorithm=ring or tree")


# -- the torchrun entry -----------------------------------------------------------------
def torchrun_entry(*args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [PY, "-m", "scenarios.torchrun", *args],
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_torchrun_out_onto_a_file_and_a_parameter_twice_are_refused(tmp_path: Path) -> None:
    """Before any rendezvous: alone, with no MASTER_ADDR, it would fail there."""
    taken = tmp_path / "taken"
    taken.write_text("mine")
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    for args, says in (
        (["--out", str(taken)], "give a directory"),
        (["--out", str(tmp_path / "o"), "-p", "size=1KiB", "-p", "size=2KiB"], "more than once"),
    ):
        proc = torchrun_entry("ring-allreduce", *args, env=env)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        assert len(err.strip().splitlines()) == 1 and says in err, err
    assert taken.read_text() == "mine"


@pytest.mark.ranks  # a real rank: it imports torch and waits in the rendezvous
def test_torchrun_rank_ends_on_sigterm_with_one_line(tmp_path: Path) -> None:
    """A rank waiting in the rendezvous (its peer never comes) ends on SIGTERM at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    env["MASTER_PORT"] = str(port)
    proc = torchrun_entry("ring-allreduce", "--out", str(tmp_path / "o"), env=env)
    deadline = time.monotonic() + 60
    while not any(a.endswith(f":{port}") for a in listeners_of([proc.pid])):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)  # rank 0's store is up: it waits for rank 1
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)  # a rank that ignores SIGTERM times out here
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == ["error: terminated (SIGTERM): rank 0 stopped"]


# -- files a run leaves -----------------------------------------------------------------
def test_a_rank_log_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text("keep")
    (tmp_path / "rank0.log").symlink_to(target)
    code = (
        "import sys; from runtime.engine.bootstrap import log_to\n"
        "try:\n    log_to(sys.argv[1], 0)\nexcept OSError:\n    sys.exit(7)\n"
    )
    out = subprocess.run([PY, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True)
    assert out.returncode == 7
    assert target.read_text() == "keep"


def test_a_rank_log_is_private(tmp_path: Path) -> None:
    code = "import sys; from runtime.engine.bootstrap import log_to; log_to(sys.argv[1], 3)"
    subprocess.run([PY, "-c", code, str(tmp_path)], cwd=ROOT, check=True)
    assert (tmp_path / "rank3.log").stat().st_mode & 0o077 == 0


@pytest.mark.ranks
def test_a_failed_run_leaves_no_rendezvous_store() -> None:
    args = ["run", "ring-allreduce", "--ranks", "2", "-p", "size=64MiB", "-p", "repeat=50"]
    out = playground(*args, "--hardware", "cpu-default", "--fault", "kill:rank=1,after=0.3s")
    assert out.returncode == 1, out.stderr
    log = Path(out.stderr.rsplit("(log: ", 1)[1].split(")")[0])
    assert log.parent.is_dir()
    assert not (log.parent / "rendezvous.store").exists()
    assert all(p.stat().st_mode & 0o077 == 0 for p in log.parent.glob("rank*.log"))
