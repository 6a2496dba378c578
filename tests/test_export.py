"""The exports: offline Plotly HTML and Chrome trace-event JSON (no torch, no ranks).

Outcomes come from the simulator (`session.predict` with a fixed profile, so no
machine calibration is read); the "measured" Timeline is the predicted one
stretched by 10%, which is all an export needs: the real engine is tested elsewhere.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from playground import session
from playground.export import html as html_export
from playground.export.chrome_trace import trace_events, write_trace
from playground.export.html import write_html
from playground.outcome import Outcome
from runtime.sim.trace import Mark, Timeline
from scenarios.metrics import Metric

HOSTILE = "<script>alert(1)</script>"


def _stretched(timeline: Timeline, factor: float) -> Timeline:
    spans = [
        dataclasses.replace(s, start=s.start * factor, end=s.end * factor) for s in timeline.spans
    ]
    return Timeline(spans)


@pytest.fixture
def predicted() -> Outcome:
    return session.predict("ring-allreduce", {"ranks": "4"}, hardware="cpu-default")


@pytest.fixture
def measured(predicted: Outcome) -> Outcome:
    timeline = _stretched(predicted.predicted, 1.1)
    timeline.marks = [
        Mark(t=timeline.end / 2, kind="checkpoint", label="ckpt 1"),
        Mark(t=timeline.end / 3, kind="failure", label="rank 2 killed", rank=2),
    ]
    metrics = [
        dataclasses.replace(m, value=m.predicted * 1.1)
        if m.is_predicted and isinstance(m.predicted, float)
        else m
        for m in predicted.metrics
    ]
    metrics.append(Metric("ok", "flag", True))
    return dataclasses.replace(predicted, measured=timeline, backend="gloo", metrics=metrics)


def _figure_data(page: str) -> list[dict[str, Any]]:
    """The traces plotly.js is given: the JSON array after `Plotly.newPlot("id",`."""
    match = re.search(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*", page)
    assert match, "no Plotly.newPlot call in the page"
    data, _ = json.JSONDecoder().raw_decode(page, match.end())
    return data


# -- HTML -------------------------------------------------------------------------------


def test_html_is_one_offline_file(measured: Outcome, tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    write_html(measured, out)
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "plotly.js v" in page  # the library itself, inline
    assert not re.search(r"<script[^>]*\bsrc\s*=", page)  # nothing loaded from anywhere
    assert not re.search(r"<link[^>]*\bhref\s*=", page)
    assert [p.name for p in tmp_path.iterdir()] == ["run.html"]  # no temp file left behind


def test_html_one_bar_trace_per_row_and_kind(measured: Outcome, tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    write_html(measured, out)
    bars = [t for t in _figure_data(out.read_text(encoding="utf-8")) if t["type"] == "bar"]
    assert measured.measured is not None
    # Row 1 (axis "y") is measured, row 2 ("y2") predicted.
    expected = Counter(("y", s.kind) for s in measured.measured.spans)
    expected.update(("y2", s.kind) for s in measured.predicted.spans)
    got = Counter()
    for trace in bars:
        assert trace["orientation"] == "h"
        got[(trace.get("yaxis", "y"), trace["legendgroup"])] += len(trace["x"])
    assert got == expected
    assert len(bars) == len(expected)  # one trace per (row, kind), not one per span
    # One legend entry per kind, shared by both rows through its legendgroup.
    shown = [t["legendgroup"] for t in bars if t.get("showlegend", True)]
    assert sorted(shown) == sorted({kind for _, kind in expected})
    assert {y for trace in bars for y in trace["y"]} == {f"rank {r}" for r in range(4)}


def test_html_hover_has_the_prediction_error(measured: Outcome) -> None:
    data = _figure_data(html_export.render_html(measured))
    measured_bars = [t for t in data if t["type"] == "bar" and t.get("yaxis", "y") == "y"]
    hover = measured_bars[0]["hovertext"][0]
    # Measured = 1.1 x predicted, so |pred - meas| / meas = 0.1 / 1.1.
    assert "prediction error: 9.1%" in hover
    assert "action: " in hover and "duration: " in hover


def test_html_has_header_and_metrics(measured: Outcome) -> None:
    page = html_export.render_html(measured)
    assert measured.lesson.title["en"] in page
    assert measured.lesson.title["es"] in page
    assert measured.profile.name in page
    assert "gloo" in page
    for metric in measured.metrics:
        assert f"<th>{metric.name}</th>" in page
    assert "9.1%" in page  # the error of a measured/predicted pair, as a percentage
    assert "4MiB" in page  # the size param, as the learner typed it


def test_html_holds_the_headline_to_the_error_budget(measured: Outcome) -> None:
    """After a run, the lesson's headline time measured, predicted before the run and
    after it, each error marked against its budget; nothing before a run."""
    metrics = [
        dataclasses.replace(m, before=m.value * 2) if m.name == "time_s" else m
        for m in measured.metrics
    ]
    page = html_export.render_html(dataclasses.replace(measured, metrics=metrics))
    caption = "prediction error (budget: 25% before the run, 10% after it)"
    assert caption in page
    table = page[page.index(caption) :]
    table = table[: table.index("</table>")]
    assert "<th>time_s</th>" in table
    assert "100.0% ✗" in table and "9.1% ✓" in table  # before: 2× measured; after: 1/1.1
    assert caption not in html_export.render_html(dataclasses.replace(measured, measured=None))


def test_html_escapes_every_hostile_string(measured: Outcome, tmp_path: Path) -> None:
    assert measured.measured is not None
    spans = list(measured.measured.spans)
    spans[0] = dataclasses.replace(spans[0], label=HOSTILE, kind="<b>kind</b>")
    hostile = dataclasses.replace(
        measured,
        measured=Timeline(spans, marks=[Mark(t=0.0, kind="failure", label=HOSTILE)]),
        params=dataclasses.replace(measured.params, algorithm=HOSTILE),
        metrics=[
            *measured.metrics,
            Metric(HOSTILE, "text", HOSTILE, series=HOSTILE),
            Metric("time_s", "s", 1.0, 1.05, series=HOSTILE, before=2.0),  # a budget row
        ],
        backend=HOSTILE,
    )
    out = tmp_path / "hostile.html"
    write_html(hostile, out)
    page = out.read_text(encoding="utf-8")
    assert HOSTILE not in page
    assert "<b>kind</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # Inside the figure too: escaped before plotly sees it, since hover text renders HTML.
    texts = [text for trace in _figure_data(page) for text in trace.get("hovertext", [])]
    texts += [text for trace in _figure_data(page) for text in trace.get("text", [])]
    texts += [trace["name"] for trace in _figure_data(page)]
    assert any("&lt;script&gt;" in t for t in texts)
    assert not any("<script" in t for t in texts)


def test_html_predict_only_has_one_row(predicted: Outcome, tmp_path: Path) -> None:
    out = tmp_path / "predict.html"
    write_html(predicted, out)
    page = out.read_text(encoding="utf-8")
    data = _figure_data(page)
    assert {t.get("yaxis", "y") for t in data} == {"y"}
    assert sum(len(t["x"]) for t in data if t["type"] == "bar") == len(predicted.predicted.spans)
    assert "measured (" not in page


# -- Chrome trace -----------------------------------------------------------------------


def test_trace_structure_and_counts(measured: Outcome, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    write_trace(measured, out)
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["displayTimeUnit"] == "ms"
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert measured.measured is not None
    assert len(complete) == len(measured.measured.spans) + len(measured.predicted.spans)
    for e in complete:
        assert e["pid"] in (1, 2)
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0
        assert e["dur"] >= 0
        assert isinstance(e["tid"], int) and e["name"] and e["cat"]
    assert Counter(e["pid"] for e in complete) == {
        1: len(measured.measured.spans),
        2: len(measured.predicted.spans),
    }
    meta = {(e["pid"], e["tid"], e["name"]): e["args"] for e in events if e["ph"] == "M"}
    assert meta[(1, 0, "process_name")] == {"name": "measured"}
    assert meta[(2, 0, "process_name")] == {"name": "predicted"}
    for pid in (1, 2):
        for rank in range(4):
            assert meta[(pid, rank, "thread_name")] == {"name": f"rank {rank}"}
    instants = [e for e in events if e["ph"] == "i"]
    assert sorted(e["name"] for e in instants) == ["ckpt 1", "rank 2 killed"]
    assert {e["s"] for e in instants} == {"p", "t"}


def test_trace_span_fields_in_microseconds(measured: Outcome) -> None:
    span = measured.predicted.spans[-1]
    (event,) = [
        e
        for e in trace_events(measured)["traceEvents"]
        if e["ph"] == "X" and e["pid"] == 2 and e["args"].get("action_id") == span.action_id
    ]
    assert event["name"] == span.label and event["cat"] == span.kind and event["tid"] == span.rank
    assert event["ts"] == pytest.approx(span.start * 1e6, abs=1e-3)
    assert event["dur"] == pytest.approx(span.duration * 1e6, abs=1e-3)
    expected_args = {
        k: v
        for k, v in span.to_dict().items()
        if k not in ("rank", "kind", "label", "start", "end")
    }
    assert event["args"] == expected_args
    # A measured span carries its prediction and the error against it.
    measured_event = next(
        e
        for e in trace_events(measured)["traceEvents"]
        if e["ph"] == "X" and e["pid"] == 1 and e["dur"] > 0
    )
    assert measured_event["args"]["prediction_error"] == pytest.approx(0.1 / 1.1, rel=1e-4)


def test_trace_predict_only(predicted: Outcome) -> None:
    events = trace_events(predicted)["traceEvents"]
    assert {e["pid"] for e in events} == {2}
    assert sum(e["ph"] == "X" for e in events) == len(predicted.predicted.spans)


# -- both -------------------------------------------------------------------------------


@pytest.mark.parametrize("write", [write_html, write_trace], ids=["html", "trace"])
def test_writes_are_atomic(
    write: Any, measured: Outcome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure mid-write leaves no file, or the old one untouched, and no temp file."""
    fresh, existing = tmp_path / "fresh.out", tmp_path / "existing.out"
    existing.write_text("old")

    def fail(fd: int) -> None:  # runs after the data is written, before the rename
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    for target in (fresh, existing):
        with pytest.raises(OSError, match="disk full"):
            write(measured, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.out"]
    assert existing.read_text() == "old"


def test_exports_never_import_torch() -> None:
    code = (
        "import sys, playground.export.html, playground.export.chrome_trace; "
        "sys.exit('torch' in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


# -- issue 35 item 5: curves' points, lanes' legend, series dividers ------------------------


def test_curve_line_with_one_value_is_drawn_as_a_point() -> None:
    """A run's measurement beside a predicted curve (inference's goodput at the run's
    rate) is one value: drawn as a marker, since a line through one value shows nothing."""
    from playground.export.curves import build_curve_figure
    from scenarios.metrics import Curve

    curve = Curve(
        "goodput", "rate", "rps", [1.0, 2.0, 4.0],
        {"tp predicted": [1.0, 1.5, 1.2], "tp measured (this run)": [None, 1.4, None],
         "offered": [1.0, 2.0, 4.0]},
        {}, y_unit="number",
    )  # fmt: skip
    fig = build_curve_figure(curve)
    assert fig is not None
    modes = {trace.name: trace.mode for trace in fig.data}
    assert modes["tp measured (this run)"] == "markers"
    assert modes["offered"] == "lines" and "lines" in modes["tp predicted"]


def test_lanes_legend_sits_above_the_rows_apart_from_the_time_axis() -> None:
    from playground.export.lanes import build_lanes_figure
    from scenarios.metrics import Lane, Lanes

    rows = tuple(
        Lane(f"req {i}", source, (("TTFT", 0.1 * i, 0.1 * i + 0.05), ("decode", 0.1 * i + 0.05, 1)))
        for i in range(16)
        for source in ("measured", "predicted")
    )
    fig = build_lanes_figure(Lanes("tp: each request", rows))
    assert fig is not None
    legend = fig.layout.legend
    assert legend.y >= 1.0 and legend.yanchor == "bottom"  # never on "time (s)" below
    assert fig.layout.xaxis.title.text == "time (s)"


def test_series_run_one_after_the_other_are_parted_and_named() -> None:
    """GPipe then 1F1B: a solid line where the first ends, each named over its part of
    each row (measured and predicted); one series alone has neither."""
    from playground.export.timeline import build_figure, series_windows

    both = session.predict("pipeline", {"schedule": "gpipe,1f1b"}, hardware="cpu-default")
    measured = dataclasses.replace(both, measured=_stretched(both.predicted, 1.1))
    windows = series_windows(both.predicted)
    assert [name for name, _, _ in windows] == ["gpipe", "1f1b"]
    assert windows[0][2] <= windows[1][2]
    fig = build_figure(measured)
    names = [a.text for a in fig.layout.annotations]
    assert names.count("<b>gpipe</b>") == 2 and names.count("<b>1f1b</b>") == 2
    lines = [s for s in fig.layout.shapes if s.type == "line" and s.line.dash is None]
    assert len(lines) == 2  # one divider per row
    one = session.predict("pipeline", {"schedule": "1f1b"}, hardware="cpu-default")
    assert series_windows(one.predicted) == []
    assert not [a for a in build_figure(one).layout.annotations if a.text.startswith("<b>")]


# -- issue 39 item 7: one trace per rank, readable by the field's tools and read back ---------


@pytest.fixture
def pipeline_run() -> Outcome:
    predicted = session.predict("pipeline", {}, hardware="cpu-default")
    return dataclasses.replace(
        predicted, measured=_stretched(predicted.predicted, 1.1), backend="gloo"
    )


def test_rank_folder_carries_distributed_info_and_flows(
    pipeline_run: Outcome, tmp_path: Path
) -> None:
    folder = tmp_path / "trace"
    write_trace(pipeline_run, f"{folder}/")
    world = pipeline_run.params.world_size
    assert sorted(p.name for p in folder.iterdir()) == [f"rank-{r}.json" for r in range(world)]
    docs = {r: json.loads((folder / f"rank-{r}.json").read_text()) for r in range(world)}
    for rank, doc in docs.items():
        info = doc["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, world, "gloo")
        assert info["pg_config"][0]["ranks"] == list(range(world))
        assert f'"rank": {rank}' in (folder / f"rank-{rank}.json").read_text()  # HTA's probe
    # Every send has a flow to its receive: the same id starts in the sender's file and
    # finishes in the receiver's, and the two spans it joins are a send and a recv.
    starts = {e["id"]: (r, e) for r, d in docs.items() for e in d["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: (r, e) for r, d in docs.items() for e in d["traceEvents"] if e["ph"] == "f"}
    sends = [s for s in pipeline_run.measured.spans if s.kind == "send"]
    assert len(starts) == len(ends) == len(sends) > 0
    for flow_id, (src, start) in starts.items():
        dst, end = ends[flow_id]
        assert src != dst and end["ts"] >= start["ts"]
    spans = [e for d in docs.values() for e in d["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(pipeline_run.measured.spans)
    assert Counter(e["name"] for e in spans)["gloo:send"] == len(sends)
    # An earlier export of ours is replaced, file by file: the same ranks, read again.
    (folder / "rank-0.json").write_text("{}")
    write_trace(pipeline_run, f"{folder}/")
    assert sorted(p.name for p in folder.iterdir()) == [f"rank-{r}.json" for r in range(world)]
    assert json.loads((folder / "rank-0.json").read_text())["distributedInfo"]["rank"] == 0


def test_rank_folder_reads_back_through_playground_trace(
    pipeline_run: Outcome, tmp_path: Path
) -> None:
    from playground.kineto.reader import read_traces
    from playground.kineto.report import build

    write_trace(pipeline_run, f"{tmp_path / 'trace'}/")
    report = build(read_traces([str(tmp_path / "trace")]), "cpu-default")
    assert [t.rank for t in report.traces] == list(range(pipeline_run.params.world_size))
    spans = Counter(s.kind for s in pipeline_run.measured.spans if s.kind in ("send", "recv"))
    read = Counter(c.kind for c in report.collectives if c.kind in ("send", "recv"))
    assert read == spans
    sends = [c for c in report.collectives if c.kind == "send"]
    assert {c.mechanism for c in sends} == {"pipeline_send_recv"}
    assert {c.lesson for c in sends} == {"pipeline"}
    assert all(c.nbytes and c.nbytes > 0 for c in sends)
    # The same seconds as the spans, after the µs round trip.
    total = sum(s.duration for s in pipeline_run.measured.spans if s.kind == "send")
    assert sum(c.seconds for c in sends) == pytest.approx(total, rel=1e-3)


@pytest.mark.skipif(
    any(
        __import__("importlib").util.find_spec(m) is None
        for m in ("hta", "pandas", "networkx", "pydot")
    ),
    reason="HTA (with pandas, networkx, pydot) not installed",
)
def test_rank_folder_loads_in_holistic_trace_analysis(
    pipeline_run: Outcome, tmp_path: Path
) -> None:
    from hta.trace_analysis import TraceAnalysis

    write_trace(pipeline_run, f"{tmp_path / 'trace'}/")
    analysis = TraceAnalysis(trace_dir=str(tmp_path / "trace"))
    assert sorted(analysis.t.traces) == list(range(pipeline_run.params.world_size))
    assert all(len(df) > 0 for df in analysis.t.traces.values())
