"""`playground replay` of hostile saved runs (issue 11, "Trust boundaries").

Every entry of tests/data/hostile/ (written by make_hostile.py there: how to
regenerate is in its docstring) is replayed in-process as text, as `--json` and,
when accepted, with `--export` and `--trace`. Each ends one of two ways, never
in a traceback:

- exit 2, nothing on stdout, exactly one printable line on stderr naming the file
  and what is wrong (MANIFEST.json's `says`);
- exit 0 with a correct rendering: the params are the lesson's own parse of the
  file's, `--json` is strict JSON (no NaN or Infinity) that replays to itself,
  no control character is printed, and the HTML export holds no markup from the
  file unescaped.

A few cases need the file system rather than a committed file (a file over the
size limit, a run directory whose name holds escape sequences, a rank file that
is a symlink to a device); they are built in tmp_path below.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import re
import shutil
import unicodedata
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from playground.cli import main
from playground.formatting import plain
from playground.saved_profile import DetailsDoc
from playground.saved_schema import MAX_FILE_BYTES, ProfileDoc
from scenarios.metrics import relative_error
from scenarios.registry import LESSONS

HOSTILE = Path(__file__).parent / "data" / "hostile"
MANIFEST: dict[str, dict[str, Any]] = json.loads((HOSTILE / "MANIFEST.json").read_text())
NOT_CASES = {"make_hostile.py", "MANIFEST.json", "__pycache__"}
MARKER = "PWN"  # in every markup payload of the corpus

pytestmark = pytest.mark.usefixtures("english")


# -- helpers shared with tests/test_fuzz.py ----------------------------------------------
def cli(*args: str) -> tuple[int, str, str]:
    """`playground ARGS` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse's own errors
            status = exc.code if isinstance(exc.code, int) else 2
    return status, out.getvalue(), err.getvalue()


def control_characters(text: str) -> list[str]:
    """Characters a terminal could act on (C0 but newline, DEL, C1, other non-printables)."""
    return [ch for line in text.split("\n") for ch in line if not ch.isprintable()]


def one_line_error(status: int, out: str, err: str) -> str:
    """The refusal contract: exit 2, nothing on stdout, one printable line on stderr."""
    assert status == 2, f"exit {status}, expected 2; stderr: {err!r}"
    assert out == "", f"a refusal printed on stdout: {out[:200]!r}"
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("playground: error: "), err
    assert not control_characters(err), f"control characters on stderr: {err!r}"
    assert "Traceback" not in err
    return err


def reject_constant(name: str) -> Any:
    raise ValueError(f"not strict JSON: {name}")


def strict_json(text: str) -> Any:
    """`text` as JSON, refusing NaN, Infinity and -Infinity (Python's json allows them)."""
    return json.loads(text, parse_constant=reject_constant)


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *strings_in(v)]]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


def check_strict_doc(text: str) -> dict[str, Any]:
    """A `--json` document: strict JSON, every number finite, no control character in
    any string (escaped or not)."""
    assert not control_characters(text.rstrip("\n")), "raw control characters in --json"
    doc = strict_json(text)
    for s in strings_in(doc):
        bad = [ch for ch in s if unicodedata.category(ch) == "Cc"]
        assert not bad, f"a control character in a --json string: {s!r}"
    return doc


def unescape_json(html: str) -> str:
    """The page without the plotly.js bundle (a constant the input never reaches; 4.6 MB
    of it made every check slow), with JSON's \\uXXXX escapes undone: what plotly.js
    hands its renderer."""
    bundle = _plotlyjs()
    assert bundle in html, "plotly.js is not embedded (the export must work offline)"
    text = html.replace(bundle, "")
    return re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)


@functools.cache
def _plotlyjs() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


# The corpus's payloads (make_hostile.py) as they would read unescaped, after JSON's
# escapes are undone: a tag that opens, or a quote that closes an attribute.
RAW_MARKUP = (
    re.compile(r"<script>" + MARKER),  # SCRIPT, CLOSE
    re.compile(r"<img src=x onerror=" + MARKER),  # IMG
    re.compile(r"<svg onload=" + MARKER),  # ATTR, if its "'> were let through
    re.compile(r"(?<!\\)\"'(>|&gt;)"),  # ATTR's quotes raw in an attribute
)


def check_html(html: str) -> None:
    """No markup from the file unescaped: not in the page, not in the figures' JSON
    (plotly.js renders a subset of HTML in names, hover text and titles)."""
    seen = unescape_json(html)
    for pattern in RAW_MARKUP:
        found = pattern.search(seen)
        assert found is None, (
            f"unescaped markup in the export: {seen[found.start() - 80 : found.end() + 20]!r}"
        )


# -- the corpus ----------------------------------------------------------------------
def test_the_corpus_is_complete_and_large_enough() -> None:
    on_disk = {p.name for p in HOSTILE.iterdir() if p.name not in NOT_CASES}
    assert on_disk == set(MANIFEST), "run tests/data/hostile/make_hostile.py and commit"
    hostile = [name for name in MANIFEST if not name.startswith("valid.")]
    assert len(hostile) >= 61
    assert sum(1 for name in hostile if name.startswith("torchrun.")) >= 10


def _expected_params(raw: dict[str, Any], scenario: str) -> dict[str, Any]:
    return LESSONS[scenario].parse(raw, "predict").to_dict()


def _typed_line(raw: dict[str, Any], scenario: str) -> str:
    typed = LESSONS[scenario].parse(raw, "predict").typed()
    return "params: " + ", ".join(f"{k}={plain(v)}" for k, v in typed.items())


def _source(path: Path) -> dict[str, Any]:
    """What the file (or the run dir's run.json) says, read leniently: for accepted cases
    only, where it is known to be JSON."""
    if path.is_dir():
        return json.loads((path / "run.json").read_text(encoding="utf-8-sig"))
    return json.loads(path.read_text(encoding="utf-8-sig"))


def check_text(out: str, path: Path) -> None:
    assert not control_characters(out), f"control characters printed: {out!r}"
    source = _source(path)
    lines = out.splitlines()
    assert lines[0].startswith(f"{source['scenario']} · ranks "), lines[0]
    assert lines[1] == _typed_line(source["params"], source["scenario"])
    if not path.is_dir():
        for metric in source["metrics"]:
            assert plain(metric["name"]) in out, f"metric {metric['name']!r} not shown"


def check_json(out: str, path: Path, tmp_path: Path) -> None:
    doc = check_strict_doc(out)
    source = _source(path)
    assert doc["format"] == 2
    assert doc["scenario"] == source["scenario"]
    assert doc["params"] == _expected_params(source["params"], source["scenario"])
    for metric in doc["metrics"]:  # the error is recomputed, never copied from the file
        error = relative_error(metric.get("value"), metric.get("predicted"))
        if error is None or not math.isfinite(error):
            assert "error" not in metric, metric
        else:
            assert metric["error"] == pytest.approx(error), metric
    if path.is_dir():
        ranks = [json.loads((path / f"rank{r}.json").read_text()) for r in range(2)]
        assert len(doc["measured"]) == sum(len(r["spans"]) for r in ranks)
        assert doc["backend"] == source["backend"]
    else:
        assert len(doc["predicted"]) == len(source["predicted"])
        assert (doc.get("measured") is None) == (source.get("measured") is None)
        if source.get("measured") is not None:
            assert len(doc["measured"]) == len(source["measured"])
        names = [(m["name"], m.get("series"), m["unit"]) for m in source["metrics"]]
        assert [(m["name"], m.get("series"), m["unit"]) for m in doc["metrics"]] == names
    # What replay writes, replay reads back to the same document.
    again = tmp_path / "again.json"
    again.write_text(out)
    status, out2, err2 = cli("replay", str(again), "--json")
    assert status == 0, err2
    doc2 = strict_json(out2)
    # The profile keeps what the schema declares: of a calibration's details, only its
    # conditions and the run's verdict on them (DetailsDoc), the rest is not replayed.
    declared, kept = ProfileDoc.__struct_fields__, DetailsDoc.__struct_fields__
    for d in (doc, doc2):
        d["profile"] = {k: v for k, v in d["profile"].items() if k in declared}
        details = d["profile"].get("details") or {}
        d["profile"]["details"] = {k: v for k, v in details.items() if k in kept}
    assert doc2 == doc


def check_exports(path: Path, tmp_path: Path) -> None:
    html, trace = tmp_path / "replay.html", tmp_path / "replay-trace.json"
    status, out, err = cli("replay", str(path), "--export", str(html), "--trace", str(trace))
    assert status == 0, err
    assert not control_characters(out)
    check_html(html.read_text(encoding="utf-8"))
    events = strict_json(trace.read_text(encoding="utf-8"))
    assert events["traceEvents"]


@pytest.mark.parametrize("case", sorted(MANIFEST))
def test_hostile_replay(case: str, tmp_path: Path) -> None:
    path = HOSTILE / case
    expect, says = MANIFEST[case]["expect"], MANIFEST[case]["says"]
    text = cli("replay", str(path))
    as_json = cli("replay", str(path), "--json")
    assert text[0] in (0, 2) and as_json[0] in (0, 2), (text, as_json)
    assert text[0] == as_json[0], "text and --json disagree on whether the file is valid"
    if expect == "refuse":
        assert text[0] == 2, f"{case} was accepted; stdout: {text[1][:300]!r}"
    if expect == "accept":
        assert text[0] == 0, f"{case} was refused: {text[2]!r}"
    if text[0] == 2:
        for status, out, err in (text, as_json):
            line = one_line_error(status, out, err)
            assert plain(path) in line, f"the message does not name the file: {line!r}"
            for word in says:
                assert word.lower() in line.lower(), f"the message lacks {word!r}: {line!r}"
        return
    check_text(text[1], path)
    check_json(as_json[1], path, tmp_path)
    check_exports(path, tmp_path)


# -- cases the file system builds ------------------------------------------------------
def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # sparse: nothing is written, nothing is read
        f.truncate(MAX_FILE_BYTES + 1)
    line = one_line_error(*cli("replay", str(big), "--json"))
    assert "larger than" in line


def test_a_rank_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(HOSTILE / "torchrun.valid", run)
    with (run / "rank1.json").open("r+b") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    line = one_line_error(*cli("replay", str(run)))
    assert "larger than" in line


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null", "/proc/self/environ"])
def test_a_rank_file_linked_to_a_device_is_refused(tmp_path: Path, target: str) -> None:
    if not os.path.exists(target):
        pytest.skip(f"no {target} here")
    run = tmp_path / "run"
    shutil.copytree(HOSTILE / "torchrun.valid", run)
    (run / "rank1.json").unlink()
    (run / "rank1.json").symlink_to(target)
    one_line_error(*cli("replay", str(run)))


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_saved_run_linked_to_a_device_is_refused_unread(tmp_path: Path, target: str) -> None:
    """Issue 37: `ln -s /dev/zero z.json; playground replay z.json` grew to a MemoryError
    (st_size is 0, so the size check passed and read_bytes read for ever)."""
    if not os.path.exists(target):
        pytest.skip(f"no {target} here")
    (tmp_path / "z.json").symlink_to(target)
    line = one_line_error(*cli("replay", str(tmp_path / "z.json")))
    assert "character device" in line


@pytest.mark.parametrize("where", ["file", "run.json", "rank0.json"])
def test_a_fifo_where_a_saved_run_is_is_refused_without_waiting(tmp_path: Path, where) -> None:
    """Issue 37: `mkfifo f.json; playground replay f.json` never returned. Opened with
    O_NONBLOCK after a stat: a regression fails on the stat, before any open."""
    if where == "file":
        path = fifo = tmp_path / "f.json"
    else:
        path = tmp_path / "run"
        shutil.copytree(HOSTILE / "torchrun.valid", path)
        fifo = path / where
        fifo.unlink()
    os.mkfifo(fifo)
    line = one_line_error(*cli("replay", str(path)))
    assert "FIFO" in line and fifo.name in line


def test_a_run_dir_over_the_size_limit_together_is_refused(tmp_path: Path, monkeypatch) -> None:
    """Every file of a torchrun dir counts against one cap (4096 ranks of 256 MiB each
    were a terabyte)."""
    from playground import saved_schema

    run = tmp_path / "run"
    shutil.copytree(HOSTILE / "torchrun.valid", run)
    first = (run / "rank0.json").stat().st_size
    monkeypatch.setattr(saved_schema, "MAX_FILE_BYTES", first + 10)
    line = one_line_error(*cli("replay", str(run)))
    assert "together" in line


def test_a_missing_path_is_refused() -> None:
    line = one_line_error(*cli("replay", str(HOSTILE / "no-such-run.json")))
    assert "cannot read" in line


NASTY_NAME = "run\x1b]0;pwned\x07\x1b[2J\u202e<script>PWN(5)"  # no "/": one path part


def test_a_run_dir_named_with_escapes_prints_no_control_characters(tmp_path: Path) -> None:
    run = tmp_path / NASTY_NAME
    shutil.copytree(HOSTILE / "torchrun.valid", run)
    status, out, err = cli("replay", str(run))
    assert status == 0, err
    assert not control_characters(out), f"control characters printed: {out!r}"
    check_json(cli("replay", str(run), "--json")[1], run, tmp_path)


def test_a_file_named_with_escapes_prints_no_control_characters(tmp_path: Path) -> None:
    good = tmp_path / f"{NASTY_NAME}.json"
    shutil.copy(HOSTILE / "valid.ring_run.json", good)
    status, out, err = cli("replay", str(good))
    assert status == 0 and not control_characters(out + err), (out, err)
    bad = tmp_path / f"{NASTY_NAME}-bad.json"
    shutil.copy(HOSTILE / "spans.rank-string.json", bad)
    one_line_error(*cli("replay", str(bad)))
    html = tmp_path / "x.html"
    status, out, err = cli("replay", str(good), "--export", str(html))
    assert status == 0 and not control_characters(out + err), (out, err)


def test_the_saved_profile_declares_every_field_of_the_cost_model_and_its_rates():
    """A field the schema leaves out is dropped on reading a saved run back: a replay of
    the replay would then differ from the first (a calibrated figure gone)."""
    from playground.saved_schema import ProfileDoc, RatesDoc
    from runtime.sim.compute import ComputeRates
    from runtime.sim.costmodel import CostModel

    assert set(ComputeRates.__dataclass_fields__) <= set(RatesDoc.__struct_fields__)
    kept_out = {"details"}  # a calibration's raw points: not replayed
    assert set(CostModel.__dataclass_fields__) - kept_out <= set(ProfileDoc.__struct_fields__)


# -- the rank bound (saved_types.Rank: below 2^20) -------------------------------------
def _with(doc: dict[str, Any], where: str, rank: int) -> dict[str, Any]:
    """`doc` (a 4-rank zero run) with `rank` written at `where`."""
    doc = json.loads(json.dumps(doc))
    if where == "measured[0].rank":
        doc["measured"][0]["rank"] = rank
    elif where == "measured[0].peer":
        doc["measured"][0]["peer"] = rank
    elif where == "marks[0].rank":
        doc["marks"] = [{"t": 0.001, "kind": "failure", "label": "rank killed", "rank": rank}]
    elif where == "counters[0].rank":
        doc["counters"][0]["rank"] = rank
    elif where == "profile.slow[0][0]":
        doc["profile"]["slow"][0][0] = rank
    return doc


RANK_FIELDS = (
    "measured[0].rank",
    "measured[0].peer",
    "marks[0].rank",
    "counters[0].rank",
    "profile.slow[0][0]",
)


@pytest.mark.parametrize("rank", [2**20, 2**40])
@pytest.mark.parametrize("where", RANK_FIELDS)
def test_a_rank_of_2_to_the_20_or_more_is_refused_where_it_is(
    tmp_path: Path, where: str, rank: int
) -> None:
    """Issue 43: a rank anywhere in a saved run is below 2^20, refused at the field that
    holds it before anything else reads the file (a mark or a counter of rank 2^30 outside
    the world replayed once the bound was raised)."""
    doc = json.loads((Path(__file__).parent / "data" / "zero-slow-4ranks.json").read_text())
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_with(doc, where, rank)))
    line = one_line_error(*cli("replay", str(path), "--json"))
    assert f"$.{where}" in line and "1048575" in line, line


def test_the_rank_bound_is_2_to_the_20() -> None:
    """Just under the bound the schema lets a rank through (what reads it next decides);
    at the bound it refuses."""
    import msgspec

    from playground.saved_schema import MarkDoc

    mark = {"t": 0.0, "kind": "failure", "label": "x"}
    assert msgspec.convert({**mark, "rank": 2**20 - 1}, MarkDoc).rank == 2**20 - 1
    for rank in (2**20, 2**40):
        with pytest.raises(msgspec.ValidationError, match="rank"):
            msgspec.convert({**mark, "rank": rank}, MarkDoc)
