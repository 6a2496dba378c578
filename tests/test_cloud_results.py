"""Results without a shared disk (issue 41, item 3): under torchrun on several hosts rank 0
gathers every rank's results over the process group and writes the whole run, each rank's
timeline aligned to rank 0's clock by a min-RTT/2 estimate of its offset; `cloud results`
shows that run. Two torchrun nodes on this machine stand in for two hosts: each in its own
working directory (no folder shared), the second with its clock put 5 s ahead."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from cli_server import run_cli
from conftest import tool

from runtime.engine.torchrun_rank import aligned

TORCHRUN = tool("torchrun")
SKEW_S = 5.0


def test_aligned_moves_spans_and_counters_onto_rank_0s_clock():
    envelope = {
        "spans": [{"rank": 1, "kind": "comm", "label": "x", "start": 5.25, "end": 5.5}],
        "counters": [{"rank": 1, "category": "mem", "t": 5.75, "value": 1.0}],
        "t0_ns": 100,
        "result": {},
    }
    moved = aligned(envelope, 5_000_000_000)
    assert moved["spans"][0]["start"] == pytest.approx(0.25)
    assert moved["spans"][0]["end"] == pytest.approx(0.5)
    assert moved["counters"][0]["t"] == pytest.approx(0.75)
    assert moved["t0_ns"] == 5_000_000_100 and aligned(envelope, 0) is envelope


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node(cwd: Path, node_rank: int, port: int, env: dict[str, str]) -> subprocess.Popen:
    args = [TORCHRUN, "--nnodes", "2", "--node-rank", str(node_rank),
            "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port),
            "-m", "scenarios.torchrun", "ring-allreduce", "-p", "size=1MiB", "--out", "out"]  # fmt: skip
    return subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)  # fmt: skip


@pytest.mark.ranks
def test_rank_0_writes_the_whole_run_aligned_to_its_clock(tmp_path):
    hosts = [tmp_path / "host0", tmp_path / "host1"]
    for host in hosts:
        host.mkdir()
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    nodes = [
        _node(hosts[0], 0, port, env),
        _node(hosts[1], 1, port, {**env, "PLAYGROUND_CLOCK_SKEW_S": str(SKEW_S)}),
    ]
    for node in nodes:
        output, _ = node.communicate(timeout=180)
        assert node.returncode == 0, output
    assert list(hosts[1].iterdir()) == []  # the second host wrote nothing of its own
    out = hosts[0] / "out"
    assert sorted(p.name for p in out.iterdir()) == ["rank0.json", "rank1.json", "run.json"]
    docs = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    offset, rtt = docs[1]["clock_offset_ns"], docs[1]["clock_rtt_ns"]
    # One machine, one CLOCK_MONOTONIC: the true offset is the skew, found within RTT/2.
    assert abs(offset - SKEW_S * 1e9) <= rtt / 2 + 1e5, (offset, rtt)
    assert docs[0]["clock_offset_ns"] == 0
    starts = [min(s["start"] for s in d["spans"]) for d in docs]
    ends = [max(s["end"] for s in d["spans"]) for d in docs]
    assert 0 <= starts[1] < 1.0, starts  # not 5 s late: aligned
    assert abs(ends[1] - ends[0]) < 0.5, ends  # the last collective ends together
    # `cloud results` shows it once it is in a lab folder (as launch brings it back).
    lab = tmp_path / "lab"
    planned = run_cli(["cloud", "plan", "ring-allreduce", "--gpu", "rtx4090", "--count", "2",
                       "--price", "0.3", "--out", str(lab)],
                      env={**env, "PLAYGROUND_LEDGER": str(tmp_path / "l.jsonl")}, timeout=60)  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    shutil.copytree(out, lab / "run")
    shown = run_cli(["cloud", "results", str(lab)], env={**env, "PLAYGROUND_LANG": "en"},
                    timeout=120)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "ring-allreduce · ranks 2" in shown.stdout and "busbw_gbps" in shown.stdout
