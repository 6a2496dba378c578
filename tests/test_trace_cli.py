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


# -- `--trace DIR/` into a folder that is already there (issue 39) -------------------------
def _predicted(ranks: int):
    from playground import session

    return session.predict("pipeline", {"stages": str(ranks)}, hardware="cpu-default")


def test_an_empty_folder_of_yours_takes_the_export_and_reads_back(tmp_path: Path) -> None:
    from playground.export.chrome_trace import write_trace
    from playground.export.trace_folder import check_trace_folder

    folder = tmp_path / "empty"
    folder.mkdir(mode=0o700)
    check_trace_folder(folder)
    write_trace(_predicted(2), f"{folder}/")
    assert sorted(p.name for p in folder.iterdir()) == ["rank-0.json", "rank-1.json"]
    assert (folder / "rank-0.json").stat().st_mode & 0o777 == 0o644
    assert folder.stat().st_mode & 0o777 == 0o700  # the user's folder, left as it was
    assert [tr.rank for tr in reader.read_traces([str(folder)])] == [0, 1]


def test_a_run_s_export_reads_back_with_the_run_s_own_workers(tmp_path: Path) -> None:
    """The Workers tab of a run's --trace folder, read back as a CPU job (its operators
    are its compute), says what the run's own Workers tab says, to the microsecond."""
    from playground.export.chrome_trace import write_trace
    from playground.kineto.report import build
    from playground.worker_figures import workers_of

    outcome = _predicted(2)
    write_trace(outcome, f"{tmp_path / 'trace'}/")
    report = build(reader.read_traces([str(tmp_path / "trace")]))
    own = workers_of(outcome, outcome.predicted)
    assert report.workers is not None and report.workers.ranks == own.ranks == [0, 1]
    for rank in own.ranks:
        read, ran = report.workers.totals[rank], own.totals[rank]
        assert read.compute_s > 0 and read.comm_s > 0
        for name in ("compute_s", "comm_s", "wait_s", "step_s"):
            assert getattr(read, name) == pytest.approx(getattr(ran, name), abs=1e-6), name
    assert report.workers.overall.slowest == own.overall.slowest


def test_an_earlier_export_is_replaced_ranks_it_had_more_of_too(tmp_path: Path) -> None:
    from playground.export.chrome_trace import write_trace

    folder = tmp_path / "trace"
    write_trace(_predicted(4), f"{folder}/")  # a new folder
    before = (folder / "rank-0.json").read_text()
    write_trace(_predicted(2), f"{folder}/")
    assert sorted(p.name for p in folder.iterdir()) == ["rank-0.json", "rank-1.json"]
    assert (folder / "rank-0.json").read_text() != before
    traces = reader.read_traces([str(folder)])
    assert [(tr.rank, tr.world_size) for tr in traces] == [(0, 2), (1, 2)]


def _refusal(folder: Path | str) -> str:
    """The one line both the early check and the write say (and that nothing was written)."""
    from playground.export.chrome_trace import write_trace
    from playground.export.trace_folder import check_trace_folder
    from playground.usage import UsageError

    with pytest.raises(UsageError) as early:
        check_trace_folder(folder)
    with pytest.raises(UsageError) as late:
        write_trace(_predicted(2), f"{folder}/")
    assert str(early.value) == str(late.value) and "\n" not in str(early.value)
    assert late.value.text("es") != str(late.value)  # said in Spanish too
    return str(late.value)


def test_a_folder_with_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "rank-0.json").write_text("{}")
    (folder / "notes.txt").write_text("keep me")
    line = _refusal(folder)
    assert line.startswith(f"--trace {folder}/:") and "notes.txt" in line
    assert (folder / "notes.txt").read_text() == "keep me"
    assert (folder / "rank-0.json").read_text() == "{}"
    (folder / "notes.txt").unlink()
    (folder / "sub").mkdir()  # a folder named like nothing of ours
    assert "sub" in _refusal(folder)
    (folder / "sub").rmdir()
    (folder / "rank-1.json").mkdir()  # named like ours, but not a file
    assert "rank-1.json" in _refusal(folder)


def test_links_are_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    assert "symbolic link" in _refusal(link)
    assert list(target.iterdir()) == []
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert "symbolic link" in _refusal(dangling)
    assert not (tmp_path / "nowhere").exists()
    # A link named like one of our files, inside an earlier export: refused, not followed.
    folder = tmp_path / "export"
    folder.mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    (folder / "rank-0.json").symlink_to(outside)
    assert "rank-0.json" in _refusal(folder)
    assert outside.read_text() == "precious"


def test_a_file_or_another_user_s_folder_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert "not a folder" in _refusal(afile)
    assert afile.read_text() == "x"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    if os.geteuid() == 0:  # root can give a folder away; anyone else has / for one
        os.chown(theirs, 65534, 65534)
    else:
        theirs = Path("/")
    assert "another user" in _refusal(theirs)
    assert list(theirs.iterdir()) == [] or theirs == Path("/")


def test_the_cli_s_trace_folder_takes_an_empty_folder_and_refuses_others(
    tmp_path: Path,
) -> None:
    """`predict … --trace DIR/` through the CLI's own early check (report.check_outputs)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    base = ["predict", "pipeline", "--hardware", "cpu-default", "--trace"]
    done = run_cli([*base, f"{empty}/"], env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in empty.iterdir()) == [f"rank-{r}.json" for r in range(4)]
    again = run_cli([*base, f"{empty}/"], env=ENV, timeout=60)  # an earlier export: replaced
    assert again.returncode == 0, again.stderr[-2000:]
    (empty / "notes.txt").write_text("keep me")
    for where in (empty, tmp_path / "link"):
        if where.name == "link":
            where.symlink_to(tmp_path / "empty")
        out = run_cli([*base, f"{where}/"], env=ENV, timeout=60)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr
        assert f"--trace {where}/" in lines[0]
    assert (empty / "notes.txt").read_text() == "keep me"
