"""`python -m scenarios.torchrun … --metrics-port`: each node's local rank 0 serves its node's ranks.

The fast tests check the refusals before any rendezvous and the node stream on
its own (runtime.engine.node_stream, no torch); the `ranks` ones start torchrun with
two ranks, scrape the endpoint while the run goes and take a port in use.
Timings are never asserted.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import tool
from test_trust import LISTEN, LOOPBACK_V4

from runtime.engine.live_workers import LiveWorkers
from runtime.engine.node_stream import Hub, Link, NodeStreamError, decode
from runtime.sim.trace import Span
from scenarios import torchrun

TORCHRUN = tool("torchrun")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _torchrun(out: Path, port: int, *params: str) -> subprocess.Popen:
    args = [TORCHRUN, "--standalone", "--nproc-per-node", "2"]
    args += ["-m", "scenarios.torchrun", "zero", *params, "--out", str(out)]
    return subprocess.Popen(
        [*args, "--metrics-port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _listeners_on(port: int) -> list[str]:
    """Local addresses of every LISTEN socket of this machine on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[1].endswith(f":{port:04X}"):
                found.append(fields[1])
    return found


def _processes_naming(text: str) -> list[int]:
    """Live processes whose command line holds `text` (a test's own output directory)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            pids.append(int(proc.name))
    return pids


# -- refused before any rendezvous -----------------------------------------------------------
@pytest.mark.parametrize(
    ("port", "needle"),
    [
        ("0", "a TCP port is a number from 1 to 65535"),
        ("70000", "a TCP port is a number from 1 to 65535"),
        ("-1", "a TCP port is a number from 1 to 65535"),
        ("http", "invalid int value"),
    ],
)
def test_a_bad_port_exits_2_in_one_line_before_anything(
    port: str, needle: str, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    out = tmp_path / "out"
    try:
        status = torchrun.main(["zero", "--out", str(out), "--metrics-port", port])
    except SystemExit as exc:  # argparse's refusal
        status = exc.code
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and needle in lines[0], lines
    assert lines[0].startswith("error: ")
    assert not out.exists()


def test_the_entry_refuses_a_bad_port_in_a_fresh_process_without_torch(tmp_path) -> None:
    code = (
        "import sys; from scenarios.torchrun import main; status = main(sys.argv[1:]); "
        "assert 'torch' not in sys.modules; sys.exit(status)"
    )
    args = ["zero", "--out", str(tmp_path / "out"), "--metrics-port", "65536"]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, env=env
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "--metrics-port 65536: a TCP port is a number from 1 to 65535" in lines[0]


# -- the node stream, on its own --------------------------------------------------------------
def _span(rank: int) -> dict:
    return Span(rank, "compute", "F", 0.0, 0.01, step=0, action_id=f"s0/F@r{rank}").to_dict()


def test_a_hub_listens_on_loopback_and_feeds_its_peers_records_only() -> None:
    got: list[tuple] = []
    arrived = threading.Event()

    def feed(message: tuple) -> None:
        got.append(message)
        arrived.set()

    hub = Hub()
    assert hub.address[0] == "127.0.0.1"
    hub.start(feed, [1])
    link = Link(hub.address, hub.authkey)
    try:
        link.send(("records", 3, [_span(3)], []))  # not a peer of this node: dropped
        link.send(("records", 1, [_span(1)], []))
        assert arrived.wait(10)
    finally:
        link.close()
        hub.close(5.0)
    assert got == [("records", 1, [_span(1)], [])]
    live = LiveWorkers(4, ranks=[0, 1])
    live.add_message(got[0])
    assert live.report().ranks == [0, 1]


def test_a_link_without_the_key_is_refused_and_the_hub_goes_on() -> None:
    hub = Hub()
    hub.start(lambda _m: None, [1])
    try:
        with pytest.raises(NodeStreamError, match="cannot reach local rank 0's metrics hub"):
            Link(hub.address, b"not the key")
    finally:
        hub.close(0.0)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"{}",
        b'["records", 1, [], {}]',
        b'["ready", 1, [], []]',
        b'["records", true, [], []]',
    ],
)
def test_the_hub_reads_only_records_messages(data: bytes) -> None:
    assert decode(data, frozenset({1})) is None
    assert decode(b'["records", 1, [], []]', frozenset({1})) == ("records", 1, [], [])


# -- real ranks under torchrun ----------------------------------------------------------------
@pytest.mark.ranks
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net")
def test_each_nodes_local_rank_0_serves_every_ranks_step_time_while_the_run_goes(tmp_path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    out, port = tmp_path / "out", _free_port()
    proc = _torchrun(out, port, "-p", "steps=5")
    url = f"http://127.0.0.1:{port}/metrics"
    ranks: set[str] = set()
    listeners: list[str] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and len(ranks) < 2:
            try:
                text = urllib.request.urlopen(url, timeout=5).read().decode()
            except OSError:
                time.sleep(0.1)
                continue
            listeners = _listeners_on(port)
            for family in text_string_to_metric_families(text):
                if family.name == "playground_step_seconds":
                    ranks |= {s.labels["rank"] for s in family.samples}
                    assert {s.labels["scenario"] for s in family.samples} <= {"zero"}
            time.sleep(0.1)
        assert ranks == {"0", "1"}, "no step time for every rank while it ran"
        assert listeners == [f"{LOOPBACK_V4}:{port:04X}"]  # on 127.0.0.1 only
    finally:
        _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    with pytest.raises(OSError):  # served for the run's lifetime, no longer
        urllib.request.urlopen(url, timeout=5)
    # Each rank's file is written as without the endpoint: every record, in one envelope.
    for rank in (0, 1):
        doc = json.loads((out / f"rank{rank}.json").read_text())
        assert set(doc) == {
            "rank",
            "result",
            "backend",
            "torch_version",
            "t0_ns",
            "spans",
            "counters",
            "clock_offset_ns",  # its clock to rank 0's (runtime.engine.torchrun_rank)
            "clock_rtt_ns",
        }
        assert doc["spans"] and {s["rank"] for s in doc["spans"]} == {rank}
    assert json.loads((out / "run.json").read_text())["launcher"] == "torchrun"


@pytest.mark.ranks
def test_a_port_in_use_stops_every_rank_with_one_line_each(tmp_path) -> None:
    out = tmp_path / "out"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _torchrun(out, port)
        _, err = proc.communicate(timeout=120)  # bounded: no rank waits for another
    assert proc.returncode != 0
    refusal = f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}"
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 2 and all(refusal in line for line in lines), err[-3000:]
    # torchrun's report: the ranks exited 2 (one slower to leave may have been SIGTERMed)
    codes = re.findall(r"exitcode\s*: (-?\d+)", err)
    assert "2" in codes and set(codes) <= {"2", "-15"}, codes
    assert not (out / "rank0.json").exists() and not (out / "rank1.json").exists()
    assert _processes_naming(str(out)) == []  # nothing left behind
