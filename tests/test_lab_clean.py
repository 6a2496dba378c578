"""What a SIGKILLed `playground lab nodes` leaves (issue 41): its namespaces, veth and ranks,
found by the owner's pid in their names and removed by `playground lab clean` and by the next
`lab nodes`; a live lab's, or a name not of that pattern, never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from cli_server import run_cli
from conftest import LAB
from test_lab_nodes import RUN, _ours, needs_namespaces

from playground import lab_netns

# The lab's network namespaces are the machine's: under `pytest -n N` the lab's tests run
# one at a time, in one worker (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(LAB)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "playground.cli", *args]


def _dead_pid() -> int:
    """A pid no process holds now: a child that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _ranks_left(marker: str) -> str:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.strip()


@needs_namespaces
def test_a_live_owner_or_another_name_is_never_swept():
    mine = f"pgl{os.getpid()}n0"  # this test's process started before it: a live lab
    other = f"pgx{os.getpid()}n0"  # not a lab's name
    for ns in (mine, other):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        assert mine not in lab_netns.sweep()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert mine in names and other in names
    finally:
        for ns in (mine, other):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@needs_namespaces
def test_a_pid_reused_after_the_lab_was_made_is_not_its_owner():
    ns = f"pgprobe{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        time.sleep(1.5)  # past the one second the check allows for rounding
        later = subprocess.Popen(["sleep", "30"])
        try:
            assert not lab_netns._alive(later.pid, [ns])  # started after: a reused pid
            assert lab_netns._alive(os.getpid(), [ns])  # started before: its maker
            assert not lab_netns._alive(_dead_pid(), [ns])
        finally:
            later.kill()
            later.wait()
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@needs_namespaces
def test_clean_removes_a_dead_labs_namespaces_veth_and_processes():
    owner = _dead_pid()
    lab = lab_netns.Lab(owner=owner)
    lab_netns.build(lab, 100e6)
    # A process left running in each node, as a SIGKILLed lab's ranks are.
    sleepers = [subprocess.Popen(["ip", "netns", "exec", lab.ns(i), "sleep", "300"])
                for i in range(2)]  # fmt: skip
    # And a veth end left in this namespace: made, then killed before it was moved.
    subprocess.run(["ip", "link", "add", f"pgl{owner}v2", "type", "veth", "peer", "name",
                    f"pgl{owner}v3"], check=True)  # fmt: skip
    out = run_cli(["lab", "clean"], env={**os.environ, "PLAYGROUND_LANG": "en"}, timeout=60)
    assert out.returncode == 0, out.stderr
    for name in (lab.ns(0), lab.ns(1), f"pgl{owner}v2"):
        assert name in out.stdout, out.stdout
    for sleeper in sleepers:
        assert sleeper.wait(timeout=10) != 0  # ended by the sweep, not by itself
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"pgl{owner}" not in links and not [n for n in _ours() if f"pgl{owner}" in n]
    again = run_cli(["lab", "clean"], env={**os.environ, "PLAYGROUND_LANG": "es"}, timeout=60)
    assert again.returncode == 0 and "No queda nada" in again.stdout, again.stdout


@pytest.mark.ranks
@needs_namespaces
def test_a_sigkilled_lab_is_swept_by_lab_clean():
    marker = "scenarios.torchrun ring-allreduce -p size=48MiB"
    proc = subprocess.Popen(
        _cli("lab", "nodes", "--link", "100Mbit", *RUN, "-p", "size=48MiB", "-p", "repeat=50"),
        env={**os.environ, "PLAYGROUND_LANG": "en"}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    owner = f"pgl{proc.pid}"
    deadline = time.monotonic() + 90
    while not _ranks_left(marker) or f"{owner}n1" not in _ours():
        assert time.monotonic() < deadline and proc.poll() is None, "the lab never started"
        time.sleep(0.2)
    time.sleep(2)  # the ranks are rendezvousing or running
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert f"{owner}n0" in _ours() and _ranks_left(marker)  # SIGKILL ran no cleanup
    out = run_cli(["lab", "clean"], env={**os.environ, "PLAYGROUND_LANG": "en"}, timeout=120)
    assert out.returncode == 0 and f"{owner}n0" in out.stdout, out.stdout + out.stderr
    assert [n for n in _ours() if n.startswith(owner)] == []
    deadline = time.monotonic() + 10
    while _ranks_left(marker):  # killed: gone as soon as reaped
        assert time.monotonic() < deadline, _ranks_left(marker)
        time.sleep(0.2)


@pytest.mark.ranks
@needs_namespaces
def test_lab_nodes_sweeps_a_dead_labs_leftovers_before_it_builds():
    owner = _dead_pid()
    subprocess.run(["ip", "netns", "add", f"pgl{owner}n0"], check=True)
    # The smallest real run: the sweep comes after the input and host checks, before the
    # lab is built, and is said on stderr's first line.
    out = run_cli(["lab", "nodes", "--ranks-per-node", "1", "--link", "1Gbit", *RUN,
                   "-p", "size=64KiB", "-p", "repeat=1"],
                  env={**os.environ, "PLAYGROUND_LANG": "en"}, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"pgl{owner}n0" in out.stderr.splitlines()[0], out.stderr
    assert [n for n in _ours() if n.startswith(f"pgl{owner}")] == []
