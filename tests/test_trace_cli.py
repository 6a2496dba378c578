"""`playground trace` from the command line: the issue's figures, and hostile traces refused.

Issue 39's "Done means": the JSON document of a real NCCL job's trace (HTA's test data,
tests/data/traces/SOURCE.md) carries HTA's figures per rank in rank order and the
collectives per kind as series; a hostile trace (truncated, huge, deep, NaN, wrong
types, escape sequences) ends with exit 2 and one line, in bounded time and memory,
never a traceback. Each command runs as its own process (tests/cli_server.py).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from cli_server import run_cli

from playground.kineto import reader

DATA = Path(__file__).parent / "data" / "traces"
NCCL = str(DATA / "nccl_parser_config_nccl_data.json.gz")
SAMPLED = [str(DATA / f"trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
ENV = {**os.environ, "PLAYGROUND_LANG": "en"}


def _metric(doc: dict, name: str, series: str | None = None) -> dict:
    return next(m for m in doc["metrics"] if m["name"] == name and m.get("series") == series)


def test_a_ddp_job_s_trace_reads_as_hta_measures_it() -> None:
    out = run_cli(["trace", NCCL, "--json"], env=ENV, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["format"] == 2
    assert [r["rank"] for r in doc["ranks"]] == [0]
    assert _metric(doc, "idle_fraction")["value"][0] == pytest.approx(0.7778, abs=0.01)
    assert _metric(doc, "comm_comp_overlap_fraction")["value"][0] == pytest.approx(0.1431, abs=0.01)
    assert _metric(doc, "idle_fraction")["per"] == "rank"
    # Communication kernels' union over HTA's span: 24,278 µs of 435,586 µs.
    assert _metric(doc, "comm_fraction")["value"][0] == pytest.approx(24278 / 435586, rel=1e-3)
    series = {m["series"] for m in doc["metrics"] if m["name"] == "collective_count"}
    assert "all_reduce" in series
    assert _metric(doc, "collective_count", "all_reduce")["value"] == 15
    # Sizes are known (record_param_comms): bus bandwidth measured, and predicted on the
    # profile of the trace's GPU (an A100), not assumed.
    busbw = _metric(doc, "busbw_gbps", "all_reduce")
    assert busbw["value"] > 0 and busbw["predicted"] > 0
    assert doc["profile"] == {"name": "a100-nvlink", "assumed": False}
    by_kind = {k["kind"]: k for k in doc["collectives"]}
    assert by_kind["all_reduce"]["mechanisms"] == {"ddp_bucket_all_reduce": 15}
    assert by_kind["broadcast"]["mechanisms"] == {"cannot_tell": 6}


def test_two_ranks_of_a_128_rank_job() -> None:
    out = run_cli(["trace", *SAMPLED, "--json", "--compact"], env=ENV, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    idle = _metric(doc, "idle_fraction")["value"]
    overlap = _metric(doc, "comm_comp_overlap_fraction")["value"]
    assert idle == pytest.approx([0.5356, 0.5472], abs=0.01)
    assert overlap == pytest.approx([0.1181, 0.2005], abs=0.01)
    kinds = {m["series"] for m in doc["metrics"] if m["name"] == "collective_count"}
    assert {"all_reduce", "all_to_all"} <= kinds
    # No GPU name in these traces: the profile is assumed, and the document says so.
    assert doc["profile"]["assumed"] is True


def test_a_folder_of_traces_and_the_text_view(tmp_path: Path) -> None:
    for path in SAMPLED:
        shutil.copy(path, tmp_path)
    out = run_cli(["trace", str(tmp_path), "--hardware", "h100-nvlink"], env=ENV, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "rank 0/128" in out.stdout and "rank 1/128" in out.stdout
    assert "h100-nvlink" in out.stdout
    assert "DDP bucket all-reduce" in out.stdout
    assert "cannot tell" in out.stdout
    es = run_cli(["trace", str(tmp_path)], env={**ENV, "PLAYGROUND_LANG": "es"}, timeout=60)
    assert "no permite saber el mecanismo" in es.stdout


def _refused(args: list[str], *, lang: str = "en", memory: int | None = None) -> str:
    out = run_cli(
        ["trace", *args], env={**ENV, "PLAYGROUND_LANG": lang}, timeout=60, memory_limit=memory
    )
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr and "\x1b" not in out.stderr
    return lines[0]


def _write(path: Path, doc: object, zipped: bool = False) -> Path:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if zipped else data)
    return path


EVENT = {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"stream": 7}}


def test_a_truncated_gzip_and_truncated_json(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(Path(NCCL).read_bytes()[:20_000])
    assert "not a readable gzip" in _refused([str(cut)])
    half = _write(tmp_path / "half.json", b'{"traceEvents": [{"ph": "X", "ts": 1')
    assert "not valid JSON" in _refused([str(half)])


def test_wrong_types_name_the_first_bad_field(tmp_path: Path) -> None:
    bad = _write(tmp_path / "t.json", {"traceEvents": [EVENT, {**EVENT, "ts": "soon"}]})
    line = _refused([str(bad)])
    assert "$.traceEvents[1].ts" in line and "t.json" in line
    line = _refused([str(bad)], lang="es")
    assert "el campo $.traceEvents[1].ts no es válido" in line
    rank = _write(tmp_path / "r.json", {"traceEvents": [], "distributedInfo": {"rank": -3}})
    assert "distributedInfo.rank" in _refused([str(rank)])


def test_nan_and_infinities_are_refused(tmp_path: Path) -> None:
    nan = _write(tmp_path / "nan.json", b'{"traceEvents": [{"ph": "X", "ts": NaN, "dur": 1}]}')
    assert "not valid JSON" in _refused([str(nan)])
    inf = _write(tmp_path / "inf.json", b'{"traceEvents": [{"ph": "X", "ts": 1e400, "dur": 1}]}')
    assert "$.traceEvents[0].ts" in _refused([str(inf)])


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    deep = b'{"traceEvents": [{"ph": "X", "args": {"grid": ' + b"[" * 200_000 + b"]" * 200_000
    deep = _write(tmp_path / "deep.json.gz", deep + b"}}]}", zipped=True)
    assert "too deeply" in _refused([str(deep)])


def test_ten_million_events_are_refused_in_bounded_memory(tmp_path: Path) -> None:
    """A 10⁷-event trace (about 250 MB of JSON, a few hundred kB gzipped) is refused after
    reading a fifth of it: the events are counted as the bytes arrive."""
    path = tmp_path / "huge.json.gz"
    block = b'{"ph":"X","cat":"k","ts":1,"dur":1},' * 10_000
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b'{"traceEvents":[')
        for _ in range(1_000):
            out.write(block)
        out.write(b'{"ph":"X"}]}')
    line = _refused([str(path)], memory=1536 << 20)
    assert "more than 2,000,000 events" in line


def test_a_file_larger_than_the_cap_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(reader, "MAX_FILE_BYTES", 1 << 20)
    big = _write(
        tmp_path / "big.json.gz",
        b'{"traceEvents": [], "x": "' + b"a" * (3 << 20) + b'"}',
        zipped=True,
    )
    with pytest.raises(reader.UsageError, match="larger than"):
        reader.read_trace(big)


def test_escape_sequences_never_reach_the_terminal(tmp_path: Path) -> None:
    name = "nccl:all_reduce\x1b[2J\x1b]0;owned\x07"
    doc = {
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": name, "ts": 1, "dur": 5, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "kernel", "name": "gemm\x1b[31m", "ts": 2, "dur": 2,
             "args": {"stream": 7, "correlation": 1}},
        ],
        "distributedInfo": {"rank": 0, "world_size": 2, "backend": "gloo\x1b[5m"},
    }  # fmt: skip
    path = _write(tmp_path / "esc\x1b[1m.json", doc)
    for extra in ([], ["--json"]):
        out = run_cli(["trace", str(path), *extra], env=ENV, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    bad = _write(tmp_path / "bad\x1b[2J.json", {"traceEvents": [{"ph": 3}]})
    assert "bad?[2J.json" in _refused([str(bad)])


def test_other_bad_paths(tmp_path: Path) -> None:
    assert "cannot read the trace" in _refused([str(tmp_path / "missing.json")])
    assert "holds no trace" in _refused([str(tmp_path)])
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "not a regular file" in _refused([str(fifo)])
    one = _write(tmp_path / "a.json", {"traceEvents": [EVENT], "distributedInfo": {"rank": 1}})
    two = _write(tmp_path / "b.json", {"traceEvents": [EVENT], "distributedInfo": {"rank": 1}})
    assert "both say they are rank 1" in _refused([str(one), str(two)])
    assert "unknown hardware profile" in _refused([NCCL, "--hardware", "tpu"])


def test_deeply_nested_ops_cost_bounded_time(tmp_path: Path) -> None:
    """20,000 collectives each nested in the one before: finding what encloses each is
    capped, so the command answers within its limit (a walk over every op above each
    collective took minutes)."""
    n = 20_000
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "ts": i, "dur": 2 * n - 2 * i,
         "pid": 1, "tid": 1}
        for i in range(n)
    ]  # fmt: skip
    doc = {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 2}}
    path = _write(tmp_path / "nested.json.gz", doc, zipped=True)
    out = run_cli(["trace", str(path), "--json", "--compact"], env=ENV, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert _metric(doc, "collective_count", "all_reduce")["value"] == n


def test_all_files_together_are_capped_too(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(reader, "MAX_TOTAL_EVENTS", 3)
    paths = [
        str(
            _write(
                tmp_path / f"r{r}.json",
                {"traceEvents": [EVENT, EVENT], "distributedInfo": {"rank": r}},
            )
        )
        for r in (0, 1)
    ]
    with pytest.raises(reader.UsageError, match="more than 3 events in all"):
        reader.read_traces(paths)
