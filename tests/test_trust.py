"""Trust boundaries: nothing listens beyond loopback, bad input is refused before any rank
starts, run directories are private and pruned.

The listening-socket check reads the kernel's own tables (/proc/net/tcp and tcp6,
matched to the ranks' file descriptors) while a real 4-rank run goes.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from cli_server import run_cli

from playground import session
from runtime.engine import rundirs

LOOPBACK_V4 = "0100007F"  # 127.0.0.1, as /proc/net/tcp writes it
LOOPBACK_V6 = "00000000000000000000000001000000"  # ::1
LISTEN = "0A"


def listening_addresses(pids: list[int]) -> list[str]:
    """Local addresses of the LISTEN sockets these processes hold."""
    inodes = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.iterdir() if fd_dir.exists() else []:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                found.append(fields[1])
    return found


@pytest.mark.ranks
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net")
def test_every_listening_socket_of_a_run_is_loopback() -> None:
    pids: list[int] = []
    seen: list[list[str]] = []

    def on_message(message: tuple) -> None:
        if message[0] == "ready":
            pids.append(message[3])
        elif message[0] == "records" and len(pids) == 4 and len(seen) < 3:
            seen.append(listening_addresses(pids))  # while the ranks train

    session.run("zero", {"ranks": "4", "steps": "1"}, hardware="cpu-default", on_message=on_message)
    assert seen and all(seen), "the ranks' sockets were not seen during the run"
    for addresses in seen:
        for address in addresses:
            host = address.split(":")[0]
            assert host in (LOOPBACK_V4, LOOPBACK_V6), f"a rank listens on {address}"


def _playground(*args: str, **env: str) -> subprocess.CompletedProcess:
    # Its own process (tests/cli_server.py): these commands are refused before any rank.
    return run_cli(args, env={**os.environ, "PLAYGROUND_LANG": "en", **env}, timeout=120)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--export", "/proc/x.html"], "cannot write"),
        (["--export", "/"], "is a directory"),
        (["--export", ""], "give a file name"),
        (["--trace", "/no/such/dir/t.json"], "no directory"),
        (["--backend", "nccl"], "needs a CUDA GPU"),
        (["--fault", "kill:rank=1,after=1e400s"], "after must be"),
        (["--ranks", "2", "-p", "ranks=8"], "disagree"),
        (["-p", "size=4\nMiB"], "size"),
    ],
)
def test_bad_input_is_refused_before_any_rank_starts(
    extra: list[str], needle: str, tmp_path: Path
) -> None:
    if "nccl" in extra and session.cuda_devices():
        pytest.skip("this machine has a CUDA GPU: nccl is available")
    # A runs folder of this command's own: the session's gets other tests' runs meanwhile
    # (`pytest -n auto` runs rank tests side by side).
    root = tmp_path / "runs"
    out = _playground(
        "run", "ring-allreduce", "--ranks", "2", *extra, PLAYGROUND_RUNS_DIR=str(root)
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert "rank logs" not in out.stdout  # no rank started...
    made = [p for p in root.glob("*") if p.name != rundirs.ROOT_MARKER]
    assert made == []  # ...nor a run directory made for one


def test_run_pipeline_takes_ranks_as_its_stages() -> None:
    out = _playground("show", "pipeline", "--ranks", "3", "-p", "schedule=gpipe")
    assert out.returncode == 0, out.stderr
    assert "stages=3" in out.stdout


def test_run_directories_are_private_and_the_newest_are_kept(tmp_path, monkeypatch) -> None:
    root = tmp_path / "runs"
    monkeypatch.setenv("PLAYGROUND_RUNS_DIR", str(root))
    monkeypatch.setenv("PLAYGROUND_KEEP_RUNS", "20")
    made = []
    for n in range(30):
        path = rundirs.new_run_dir(f"lesson-{n}")
        (path / rundirs.CHECKPOINTS).mkdir()
        os.utime(path, (1000 + n, 1000 + n))  # distinct ages, newest last
        made.append(path)
    left = sorted(p for p in root.iterdir() if p.name != rundirs.ROOT_MARKER)
    assert len(left) <= 20
    assert set(made[-19:]) <= set(left)  # the newest survive the pruning
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in left)
    assert stat.S_IMODE((root / rundirs.ROOT_MARKER).stat().st_mode) == 0o600
    rundirs.drop_checkpoints(made[-1])
    assert not (made[-1] / rundirs.CHECKPOINTS).exists()


def test_the_default_run_root_is_private_user_state(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("PLAYGROUND_RUNS_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = rundirs.runs_root()
    assert root == tmp_path / "state" / "playground" / "runs"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
