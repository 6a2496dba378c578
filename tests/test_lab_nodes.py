"""`playground lab nodes` (issue 41, item 4): two network-namespace nodes joined by a veth pair
limited with `tc tbf`, torchrun across them; one line and exit 2 where it cannot be built;
nothing left behind (namespace, veth, process) after a run or a signal."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from cli_server import CliProcess, run_cli
from conftest import LAB

from playground.lab_args import link_bits
from playground.usage import UsageError

# The lab's network namespaces are the machine's: under `pytest -n N` the lab's tests run
# one at a time, in one worker (tests/conftest.py).
pytestmark = pytest.mark.xdist_group(LAB)

RUN = ["--", "run", "ring-allreduce"]
OURS = re.compile(r"^pgl[0-9]+[nv][01]\b")


def lab(*args: str, lang: str = "en") -> subprocess.CompletedProcess[str]:
    return run_cli(["lab", "nodes", *args], env={**os.environ, "PLAYGROUND_LANG": lang},
                   timeout=300)  # fmt: skip


def test_link_rates():
    assert link_bits("500Mbit") == 5e8 and link_bits("1gbit") == 1e9
    assert link_bits("2.5Gbit") == 2.5e9
    for bad in ("fast", "500", "0.5Mbit", "200Gbit", "1Gbps"):
        with pytest.raises(UsageError):
            link_bits(bad)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--nodes", "3", *RUN], "--nodes 3"),
        (["--ranks-per-node", "0", *RUN], "--ranks-per-node 0"),
        (["--link", "fast", *RUN], "--link fast"),
        ([], "give the command after --"),
        (["--", "calibrate", "--fast"], "calibrate --fast"),
        (["--link", "50Mbit", "--", "calibrate"], "at least 100Mbit"),
        ([*RUN, "--fault", "kill:rank=0,after=1s"], "--fault"),
        ([*RUN, "-p", "ranks=3"], "ranks=3"),
        (["--", "run", "no-such-lesson"], "no-such-lesson"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle):
    out = lab(*args)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and needle in out.stderr, out.stderr


UNSHARE = shutil.which("unshare")


def _in_user_namespace(*flags: str, lang: str) -> subprocess.CompletedProcess[str]:
    """The command in a new user namespace: not root there (`--user`), or root without the
    host's network privileges (`--map-root-user`), as a container's user may be."""
    return subprocess.run(
        [UNSHARE or "unshare", "--user", *flags, sys.executable, "-m", "playground.cli", "lab",
         "nodes", *RUN],
        env={**os.environ, "PLAYGROUND_LANG": lang}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def _user_namespaces() -> bool:
    if UNSHARE is None:
        return False
    done = subprocess.run([UNSHARE, "--user", "true"], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(not _user_namespaces(), reason="cannot make a user namespace here")
def test_not_root_is_said_in_one_line():
    out = _in_user_namespace(lang="es")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "necesita root" in out.stderr and out.stdout == ""


@pytest.mark.skipif(not _user_namespaces(), reason="cannot make a user namespace here")
@pytest.mark.skipif(shutil.which("ip") is None, reason="iproute2 is not installed")
def test_a_step_the_kernel_refuses_is_named_in_one_line_and_nothing_is_left():
    before = _ours()
    out = _in_user_namespace("--map-root-user", lang="en")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "the kernel refused `ip netns add" in out.stderr
    assert _ours() == before


def _can_build() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return "needs root on Linux"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2"
    probe = f"pgprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"the kernel refused `ip netns add`: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


WHY_NOT = _can_build()
needs_namespaces = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


def _ours() -> list[str]:
    """Namespaces and links of a lab left on this machine, and processes of its ranks."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    # `ip netns list` says "NAME (id: N)" once a namespace has an id: the name alone.
    left = [n.split()[0] for n in names.splitlines() if OURS.match(n)]
    left += [ln.split(": ")[1] for ln in links.splitlines() if OURS.match(ln.split(": ")[1])]
    return left


@pytest.mark.ranks
@needs_namespaces
def test_two_nodes_across_a_200mbit_link_and_nothing_left(tmp_path):
    # 200 Mbit/s: slow enough that the link, not this shared machine's cores, sets the pace
    # (at 500 Mbit/s the same ring measured 83-90% of the link here, CPU-bound at times).
    out = lab("--ranks-per-node", "2", "--link", "200Mbit", *RUN, "-p", "size=16MiB")
    assert out.returncode == 0, out.stderr[-3000:]
    # The two-level prediction's table, after the run's own: name, measured, predicted
    # (then, where the lab was calibrated, the calibrated prediction: not read here).
    table = out.stdout.split("two-level prediction", 1)[1].splitlines()[1:]
    rows = {line.split()[0]: [float(x) for x in line.split()[1:3]]
            for line in table if line.startswith("  ")}  # fmt: skip
    busbw, predicted = rows["busbw_gbps"]
    link = 200e6 / 8 / 1e9  # GB/s: the ring crosses the link once each way
    # Behaviour, not speed (how close the measure comes is the cloud-lab doc's table): the
    # ring crossed the rate-limited link, and the prediction is costed on that link.
    assert 0 < busbw <= 1.05 * link, busbw
    assert 0.5 * link <= predicted <= 1.05 * link, predicted
    assert _ours() == []


@pytest.mark.ranks
@needs_namespaces
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_removes_everything(sig):
    proc = CliProcess(["lab", "nodes", "--link", "100Mbit", *RUN, "-p", "size=64MiB",
                       "-p", "repeat=50"], env={**os.environ, "PLAYGROUND_LANG": "en"})  # fmt: skip
    deadline = time.monotonic() + 60
    while not any(n.endswith("n1") for n in _ours()):
        assert time.monotonic() < deadline, "the nodes were never built"
        time.sleep(0.1)
    time.sleep(3)  # the ranks are started and rendezvousing
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert f"stopped by {signal.Signals(sig).name}" in err
    assert _ours() == []
    ranks = subprocess.run(["pgrep", "-f", "scenarios.torchrun ring-allreduce -p size=64MiB"],
                           capture_output=True, text=True).stdout  # fmt: skip
    assert ranks.strip() == ""
