"""A learner's own job in the Workers tab, and traces opened from a lesson screen (issue 39).

Item 6: the trace screen shows the Workers view a run has (playground.widgets.workers),
fed by playground.kineto.workers: each rank's profiler steps, its compute (HTA's
computation kernels, so the total agrees with HTA's figure to the microsecond), its
communication and waiting, and the straggler by lesson 1's rule, the same rank the
`straggler_rank` metric names. Item 1: the lesson screen's Open box takes traces too
and opens the trace screen; a saved run still opens in the lesson. The traces are HTA's
real NCCL job (tests/data/traces/SOURCE.md); the saved run is tests/data's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from textual.widgets import Input, Static, TabbedContent

from playground.app import PlaygroundApp
from playground.kineto.reader import read_traces, typed_traces
from playground.kineto.report import build
from playground.kineto.workers import trace_workers, workers_kind
from playground.screens.lesson import LessonScreen
from playground.screens.trace import TraceScreen
from playground.widgets.workers import WorkersView
from scenarios.metrics import find

SIZE = (120, 40)
DATA = Path(__file__).parent / "data" / "traces"
SAMPLED = [str(DATA / f"trace_filter_sampled_rank-{r}.json.gz") for r in (0, 1)]
SAVED = Path(__file__).parent / "data" / "ring-allreduce-2ranks.json"


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    for path in SAMPLED:
        shutil.copy(path, folder)
    return folder


def _lines(view: WorkersView) -> list[str]:
    return [view.render_line(y).text for y in range(view.size.height)]


# -- the per-rank report of a trace ----------------------------------------------------
def test_each_rank_s_compute_is_hta_s_and_its_steps_the_profiler_s() -> None:
    report = build(read_traces(SAMPLED))
    workers = report.workers
    assert workers is not None and workers.ranks == [0, 1]
    # ProfilerStep#551 and #552: the last one is left out, as HTA leaves it out.
    assert [w.step for w in workers.windows] == [551]
    for rank in (0, 1):
        totals = workers.totals[rank]
        figures = report.figures[rank]
        assert figures is not None
        assert totals.compute_s == pytest.approx(figures.compute_us / 1e6, abs=1e-6)
        assert totals.comm_s > 0 and totals.step_s > totals.compute_s
    # Two ranks whose work differs by under 1%: no straggler at the default 1.2.
    assert workers.overall.straggler is None
    assert workers.overall.slowest == 1
    metric = find(report.metrics, "straggler_rank")
    assert metric is not None and metric.value is None
    assert report.to_doc()["workers"]["ranks"][1]["rank"] == 1


def test_the_straggler_is_the_workers_view_s_and_the_metric_s(monkeypatch) -> None:
    # Rank 1 computes 28% more than rank 0 (136 ms against 106 ms of kernels) and
    # communicates less: over a threshold of 1.005 it straggles, for its compute.
    monkeypatch.setenv("PLAYGROUND_STRAGGLER_RATIO", "1.005")
    report = build(read_traces(SAMPLED))
    assert report.workers is not None
    overall = report.workers.overall
    assert (overall.straggler, overall.reason) == (1, "compute")
    metric = find(report.metrics, "straggler_rank")
    assert metric is not None and metric.value == 1


def test_a_trace_without_profiler_steps_is_one_window() -> None:
    traces = read_traces([str(DATA / "nccl_parser_config_nccl_data.json.gz")])
    report = build(traces)
    workers = trace_workers(traces, report.collectives, 1.2)
    assert [w.step for w in workers.windows] == [4, 5]  # #4, #5 and #6, the last left out
    for trace in traces:  # the same job with its step annotations taken away
        trace.events = [e for e in trace.events if not e.name.startswith("ProfilerStep")]
    whole = trace_workers(traces, build(traces).collectives, 1.2)
    assert [(w.series, w.step) for w in whole.windows] == [("trace", None)]
    assert whole.totals[0].compute_s >= workers.totals[0].compute_s


def test_kinds_the_accounting_does_not_pair_are_communication_without_a_peer() -> None:
    assert workers_kind("all_reduce") == "all_reduce"
    assert workers_kind("recv") == "recv"
    assert workers_kind("send_recv") == "sendrecv"
    assert workers_kind("gather") == "sendrecv"


# -- what the Open box takes -------------------------------------------------------------
def test_the_open_box_tells_traces_from_saved_runs(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert typed_traces(str(folder)) == [str(folder)]
    assert typed_traces(SAMPLED[0]) == [SAMPLED[0]]  # gzipped
    assert typed_traces(" ".join(SAMPLED)) == SAMPLED
    plain = tmp_path / "rank 0.json"  # a space in the name: one path, as typed
    plain.write_text('{"schemaVersion": 1, "traceEvents": []}')
    assert typed_traces(str(plain)) == [str(plain)]
    assert typed_traces(str(SAVED)) is None
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    (run_dir / "rank0.json").write_text("{}")
    assert typed_traces(str(run_dir)) is None  # a torchrun --out folder
    assert typed_traces(str(tmp_path / "nothing")) is None
    assert typed_traces("  ") is None
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert typed_traces(str(fifo)) is None  # never opened: it would block


# -- the app ---------------------------------------------------------------------------
async def test_w_shows_the_job_s_workers_in_the_learner_s_language(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PLAYGROUND_STRAGGLER_RATIO", "1.005")
    folder = _folder(tmp_path)
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        screen.query_one("#trace-path", Input).value = str(folder)
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("w")
        await pilot.pause()
        panels = screen.query_one("#trace-panels", TabbedContent)
        assert panels.active == "trace-tab-workers"
        view = screen.query_one("#trace-workers", WorkersView)
        assert view.report is screen.report.workers
        lines = _lines(view)
        assert "profiler steps: 1" in lines[0]
        assert any(line.startswith("r0 ") for line in lines)
        assert any(line.startswith("r1 ⚠") for line in lines)  # the straggler, marked
        assert any("rank 1" in line and "compute" in line for line in lines)
        app.language = "es"
        await pilot.pause()
        assert str(panels.get_tab("trace-tab-workers").label) == "Trabajadores"
        assert "predicho con" in str(screen.query_one("#trace-status", Static).content)
        assert "pasos del perfilador: 1" in _lines(view)[0]


async def test_a_lesson_s_open_box_opens_traces_and_still_opens_saved_runs(
    tmp_path: Path,
) -> None:
    folder = _folder(tmp_path)
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        app.open_lesson("ring-allreduce")
        await pilot.pause()
        lesson = app.screen
        assert isinstance(lesson, LessonScreen)
        status_before = str(lesson.query_one("#status", Static).content)
        await pilot.press("o")  # an empty box: the cursor goes there
        await pilot.pause()
        box = lesson.query_one("#open-path", Input)
        assert lesson.focused is box
        box.value = str(folder)
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.report is not None
        assert [tr.rank for tr in screen.report.traces] == [0, 1]
        kinds = {s.kind for s in screen.query_one("#trace-gantt").rows[0].spans}
        assert {"compute", "all_reduce"} <= kinds
        # The lesson never tried the traces as a saved run: its status is as it was.
        assert str(lesson.query_one("#status", Static).content) == status_before
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is lesson

        # `o` with the box filled opens what it names at once; a saved run, in the lesson.
        box.value = str(SAVED)
        await pilot.press("o")
        await pilot.pause()
        assert app.screen is lesson
        assert lesson.outcome is not None and lesson.outcome.measured is not None
        box.value = SAMPLED[0]
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, TraceScreen)
        await app.workers.wait_for_complete()
        await pilot.press("escape")
        await pilot.pause()

        # Enter on a saved run goes on to the box's own Enter: opened in the lesson.
        lesson.outcome = None
        box.value = str(SAVED)
        box.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is lesson
        assert lesson.outcome is not None and lesson.outcome.measured is not None
        assert "Opened" in str(lesson.query_one("#status", Static).content)
