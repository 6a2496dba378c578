"""The app's Open action for a learner's own traces (issue 39, items 1 and 6), driven by keys.

`o` on the home screen, a folder of two ranks' traces (HTA's real NCCL job,
tests/data/traces/SOURCE.md), Enter: the Gantt has each rank measured with the
prediction under it, kinds as span kinds, the metrics panel HTA's figures; `e` writes
the page; a hostile path is one line in the status, and the screen stays usable.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Input, Static

from playground.app import PlaygroundApp
from playground.screens.trace import TraceScreen
from playground.widgets.gantt import GanttView
from playground.widgets.metrics_panel import MetricsPanel

SIZE = (120, 40)
DATA = Path(__file__).parent / "data" / "traces"


async def _open(pilot, app: PlaygroundApp, path: str) -> TraceScreen:
    await pilot.press("o")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    screen.query_one("#trace-path", Input).value = path
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()
    return screen


async def test_o_opens_a_trace_folder_and_e_exports_it(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in (0, 1):
        shutil.copy(DATA / f"trace_filter_sampled_rank-{rank}.json.gz", folder)
    monkeypatch.setenv("PLAYGROUND_EXPORT_DIR", str(tmp_path))
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app, str(folder))
        gantt = screen.query_one("#trace-gantt", GanttView)
        measured = {row.rank for row in gantt.rows if not row.predicted}
        predicted = {row.rank for row in gantt.rows if row.predicted}
        assert measured == {0, 1} and predicted == {0, 1}
        kinds = {s.kind for row in gantt.rows for s in row.spans}
        assert {"compute", "all_reduce", "all_to_all"} <= kinds
        status = str(screen.query_one("#trace-status", Static).content)
        assert "ranks 0, 1" in status
        panel = str(screen.query_one("#trace-metrics", MetricsPanel).content)
        assert "idle_fraction" in panel or "idle" in panel
        await pilot.press("e")
        await pilot.pause()
        assert screen.last_export is not None and screen.last_export.exists()
        assert screen.last_export.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TraceScreen)


async def test_a_refused_trace_is_one_line_in_the_status(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": "soon"}]}')
    app = PlaygroundApp(language="es")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app, str(bad))
        status = str(screen.query_one("#trace-status", Static).content)
        assert "$.traceEvents[0].ts" in status and "\n" not in status
        assert screen.report is None
