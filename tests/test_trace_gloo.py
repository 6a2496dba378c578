"""A real 2-rank gloo job, profiled with torch.profiler, read back by `playground trace`.

Issue 39, item 9 and "Done means": the gloo trace is made here, not shipped: two rank
processes on loopback train a small model under DistributedDataParallel (gloo) inside
`torch.profiler.profile(record_shapes=True)` and each exports its Chrome trace; the
command then reads the folder and must name the collectives as the lessons do (the
DDP bucket all-reduce, with its size from the recorded shapes), ranks in order.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_server import run_cli

JOB = textwrap.dedent(
    """
    import os, sys
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel as DDP

    def main(rank, world, port, out):
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                        torch.nn.Linear(256, 64)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(32, 64)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    record_shapes=True) as prof:
            for _ in range(3):
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
        prof.export_chrome_trace(os.path.join(out, f"rank-{rank}.json"))
        dist.destroy_process_group()

    if __name__ == "__main__":
        import socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        mp.spawn(main, args=(2, port, sys.argv[1]), nprocs=2)
    """
)


@pytest.mark.ranks
def test_a_profiled_gloo_ddp_job_reads_back_named_by_mechanism(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    out.mkdir()
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(script), str(out)], check=True, timeout=240, env=env)
    assert sorted(p.name for p in out.iterdir()) == ["rank-0.json", "rank-1.json"]

    result = run_cli(
        ["trace", str(out), "--json"], env={**env, "PLAYGROUND_LANG": "en"}, timeout=60
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert {r["backend"] for r in doc["ranks"]} == {"gloo"}
    by_kind = {k["kind"]: k for k in doc["collectives"]}
    assert "all_reduce" in by_kind
    # DDP's own annotations say whose all-reduce it is: the bucket all-reduce of lesson 6.
    assert by_kind["all_reduce"]["mechanisms"].get("ddp_bucket_all_reduce", 0) >= 3
    assert by_kind["all_reduce"]["lessons"] == ["mixed-precision"]
    sizes = next(
        m for m in doc["metrics"] if m["name"] == "collective_bytes" and m["series"] == "all_reduce"
    )
    # The model's gradients, 4 bytes each, all-reduced at least once per step.
    params = 64 * 256 + 256 + 256 * 64 + 64
    assert sizes["value"] >= 3 * 4 * params
    # A CPU job has no GPU kernels: HTA's GPU figures are null, never invented.
    idle = next(m for m in doc["metrics"] if m["name"] == "idle_fraction")
    assert idle["value"] == [None, None]
    # What a CPU job's trace can say: the share of each rank's span spent in collectives.
    comm = next(m for m in doc["metrics"] if m["name"] == "comm_fraction")
    assert all(0 < share <= 1 for share in comm["value"])
    # The Workers tab's report: each rank computes in its CPU operators and communicates
    # in its gloo ops; the job marked no profiler step (no schedule), so it is one step.
    workers = doc["workers"]
    assert [r["rank"] for r in workers["ranks"]] == [0, 1]
    assert [w["series"] for w in workers["windows"]] == ["trace"]
    for rank in workers["ranks"]:
        totals = rank["totals"]
        assert 0 < totals["compute_s"] < totals["step_s"]
        assert totals["comm_s"] + totals["wait_s"] > 0


@pytest.mark.ranks
def test_a_run_s_trace_folder_reads_back_and_loads_in_hta(tmp_path: Path) -> None:
    """`run --trace FOLDER/`: one file per rank, read back by `playground trace` with each
    message named by the lesson's mechanism; where HTA is installed, it loads the folder."""
    folder = tmp_path / "run-trace"
    env = {**os.environ, "PLAYGROUND_LANG": "en", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "playground.cli", "run", "pipeline", "--ranks", "2"]
    run = subprocess.run(
        [*cmd, "--hardware", "cpu-default", "--trace", f"{folder}/"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["rank-0.json", "rank-1.json"]
    result = run_cli(["trace", str(folder), "--json"], env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [r["backend"] for r in doc["ranks"]] == ["gloo", "gloo"]
    by_kind = {k["kind"]: k for k in doc["collectives"]}
    assert by_kind["send"]["mechanisms"] == {"pipeline_send_recv": by_kind["send"]["count"]}
    assert by_kind["send"]["count"] == by_kind["recv"]["count"] > 0
    if importlib.util.find_spec("hta") is not None:  # the dev extra's optional cross-check
        from hta.trace_analysis import TraceAnalysis

        assert sorted(TraceAnalysis(trace_dir=str(folder)).t.traces) == [0, 1]
