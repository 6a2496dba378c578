"""The lesson's Open button, clicked with the mouse, opens traces as `o` and Enter do.

Beside tests/test_trace_workers.py (the keys): a click reaches the controls' own
`open_path` (playground.widgets.controls), never the lesson screen's key handling, so
it must tell profiler traces (the trace screen) from a saved run (this lesson) itself.
Real traces from tests/data/traces/ (HTA's test traces, tests/data/traces/SOURCE.md).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Input, Static

from playground.app import PlaygroundApp
from playground.screens.lesson import LessonScreen
from playground.screens.trace import TraceScreen

SIZE = (120, 40)
DATA = Path(__file__).parent / "data"
SAMPLED = [DATA / "traces" / f"trace_filter_sampled_rank-{r}.json.gz" for r in (0, 1)]
SAVED = DATA / "ring-allreduce-2ranks.json"


async def test_clicking_open_with_a_trace_folder_opens_the_trace_screen(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    for path in SAMPLED:
        shutil.copy(path, folder)
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        app.open_lesson("ring-allreduce")
        await pilot.pause()
        lesson = app.screen
        assert isinstance(lesson, LessonScreen)
        status_before = str(lesson.query_one("#status", Static).content)
        lesson.query_one("#open-path", Input).value = str(folder)
        assert await pilot.click("#open")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.report is not None
        assert [tr.rank for tr in screen.report.traces] == [0, 1]
        assert screen.query_one("#trace-path", Input).value == str(folder)
        # The lesson never tried the folder as a saved run: no error in its status.
        assert str(lesson.query_one("#status", Static).content) == status_before
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is lesson


async def test_clicking_open_with_a_trace_file_or_a_saved_run() -> None:
    app = PlaygroundApp(language="es")
    async with app.run_test(size=SIZE) as pilot:
        app.open_lesson("ring-allreduce")
        await pilot.pause()
        lesson = app.screen
        assert isinstance(lesson, LessonScreen)
        box = lesson.query_one("#open-path", Input)
        box.value = str(SAMPLED[1])  # one gzipped trace file
        assert await pilot.click("#open")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        assert screen.language == "es"
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.report is not None
        assert [tr.rank for tr in screen.report.traces] == [1]
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is lesson

        # A saved run of this lesson still opens in the lesson, as before.
        lesson.outcome = None
        box.value = str(SAVED)
        assert await pilot.click("#open")
        await pilot.pause()
        assert app.screen is lesson
        assert lesson.outcome is not None and lesson.outcome.measured is not None
        assert "Abierto" in str(lesson.query_one("#status", Static).content)
