"""The lesson screen, driven like a learner would (Pilot), on real runs.

Covers issue 3's list: open a lesson, an invalid param refused inline, a real
2-rank ring run whose spans arrive while it runs, stepping the cursor through
the narrative, the measured/predicted toggle, the language switch, export,
cancelling a run (every rank gone), a failed run (a rank killed), and the
snapshots of a finished run and of the memory bars (replayed from saved runs,
so they are stable).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from test_cli import processes_with
from test_engine import _alive
from textual.widgets import Button, Static

from playground.app import PlaygroundApp
from playground.screens.lesson import LessonScreen
from playground.widgets.controls import LessonControls
from playground.widgets.gantt import GanttView
from playground.widgets.param_form import ParamForm
from runtime.engine import spawn

SIZE = (120, 36)
DATA = Path(__file__).parent / "data"


async def open_lesson(pilot, name: str = "ring-allreduce") -> LessonScreen:
    pilot.app.open_lesson(name)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, LessonScreen)
    return screen


async def wait_until(predicate, timeout: float = 90.0) -> None:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.05)


def text_of(screen: LessonScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).content)


async def test_invalid_param_is_refused_inline_and_nothing_runs() -> None:
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot)
        form = screen.query_one("#form", ParamForm)
        form.set_value("ranks", "0")
        await pilot.pause()
        error = screen.query_one("#error-ranks", Static)
        assert error.has_class("shown") and "ranks must be" in str(error.content)
        assert screen.query_one("#run", Button).disabled
        await pilot.press("r")
        await pilot.pause()
        assert not screen.running
        assert "Fix the parameter" in text_of(screen, "#status")
        # a rule between params lands beside the field it names
        form.set_value("ranks", "4")
        form.set_value("size", "6")
        await pilot.pause()
        assert "whole number of float32" in str(screen.query_one("#error-size", Static).content)
        form.set_value("size", "4MiB")
        await pilot.pause()
        assert not screen.query_one("#run", Button).disabled


@pytest.mark.ranks
async def test_a_real_run_streams_spans_then_steps_through_the_narrative(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("PLAYGROUND_EXPORT_DIR", str(tmp_path))
    arrivals: list[tuple[int, bool]] = []  # (spans in the batch, run still going?)
    app = PlaygroundApp(language="en")

    def hook(message) -> None:
        if isinstance(message, LessonControls.Records):
            screen = app.screen
            arrivals.append(
                (len(message.spans), isinstance(screen, LessonScreen) and screen.running)
            )

    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        screen = await open_lesson(pilot)
        form = screen.query_one("#form", ParamForm)
        form.set_value("ranks", "2")
        form.set_value("repeat", "20")  # long enough to stream several batches
        await pilot.pause()
        await pilot.press("r")
        # The controls mark the run done, then the screen shows its outcome: wait for both
        # (on a loaded machine the test could look in between).
        await wait_until(
            lambda: (
                not screen.running
                and screen.outcome is not None
                and screen.outcome.measured is not None
            )
        )
        assert "Done" in text_of(screen, "#status"), text_of(screen, "#status")
        # spans arrived in batches while the run was still going
        assert any(count > 0 and going for count, going in arrivals), arrivals
        gantt = screen.query_one("#gantt", GanttView)
        assert {row.label for row in gantt.rows} == {"r0", "r0 ·p", "r1", "r1 ·p"}

        titles = set()
        for _ in range(40):
            await pilot.press("right")
            titles.add(text_of(screen, "#narrative").splitlines()[0])
        assert len(titles) >= 3, titles  # barrier, reduce-scatter, all-gather...
        assert any("reduce-scatter" in title for title in titles)
        await pilot.press("home")
        assert gantt.cursor == pytest.approx(gantt.start)
        gantt.advance(frames=50)  # the animation's clock, without waiting on wall time
        assert gantt.cursor > gantt.start

        await pilot.press("m")
        assert gantt.mode == "measured" and all(not row.predicted for row in gantt.rows)
        await pilot.press("m")
        assert gantt.mode == "predicted" and all(row.predicted for row in gantt.rows)
        await pilot.press("m")

        await pilot.press("l")
        assert screen.query_one("#run", Button).label.plain == "Ejecutar"
        assert "Hecho" in text_of(screen, "#status")

        await pilot.press("e")
        await pilot.pause()
        exported = list(tmp_path.glob("playground-ring-allreduce-*.html"))
        assert len(exported) == 1 and "plotly" in exported[0].read_text()
        assert screen.last_export == exported[0]


@pytest.mark.ranks
async def test_escape_cancels_a_run_and_every_rank_is_gone(monkeypatch) -> None:
    marker = f"PLAYGROUND_TEST_MARKER_{uuid.uuid4().hex}"
    monkeypatch.setenv(marker, "1")
    spawn.fresh_server()  # its ranks' /proc/<pid>/environ is the fork server's
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot)
        form = screen.query_one("#form", ParamForm)
        form.set_value("ranks", "2")
        form.set_value("size", "64MiB")
        form.set_value("repeat", "50")
        await pilot.pause()
        await pilot.press("r")
        await wait_until(lambda: len(processes_with(marker, fork_server=False)) >= 2, timeout=30)
        await wait_until(lambda: "Running" in text_of(screen, "#status"), timeout=60)
        await pilot.press("escape")
        # Esc stops the ranks, not only the view: no rank left (within a bound that catches
        # a hang, not a measure of speed).
        await wait_until(lambda: not screen.running, timeout=30)
        await wait_until(lambda: not processes_with(marker, fork_server=False), timeout=30)
        assert "Cancelled" in text_of(screen, "#status")
        assert isinstance(app.screen, LessonScreen)  # Esc cancelled, it did not leave


@pytest.mark.ranks
async def test_a_second_run_is_warm_and_quitting_ends_the_warm_ranks(tmp_path, monkeypatch) -> None:
    """On a machine not calibrated yet, the first run calibrates on the ranks it then runs
    on: the status says the calibration came first (its time in the figure), not that the
    ranks were kept from a last run; the run after that is warm."""
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path))
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot)
        screen.query_one("#form", ParamForm).set_value("ranks", "2")
        await pilot.pause()
        await pilot.press("r")
        await wait_until(lambda: not screen.running, timeout=120)
        status = text_of(screen, "#status")
        assert status.startswith("Done: this machine was calibrated first"), status
        assert "calibration included" in status
        pids = app.pool.pids
        assert len(pids) == 2  # kept for the next run
        await pilot.press("r")
        await wait_until(lambda: not screen.running)
        status = text_of(screen, "#status")
        assert status.startswith("Done: warm ranks") and "to the first action" in status, status
        assert app.pool.pids == pids
        await pilot.press("l")
        assert "en caliente" in text_of(screen, "#status")
    assert _alive(pids) == []  # the app closed its pool on the way out


@pytest.mark.ranks
async def test_a_failed_run_is_shown_and_the_app_keeps_working(monkeypatch) -> None:
    marker = f"PLAYGROUND_TEST_MARKER_{uuid.uuid4().hex}"
    monkeypatch.setenv(marker, "1")
    spawn.fresh_server()  # its ranks' /proc/<pid>/environ is the fork server's
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_lesson(pilot)
        form = screen.query_one("#form", ParamForm)
        form.set_value("ranks", "2")
        form.set_value("size", "64MiB")
        form.set_value("repeat", "50")
        await pilot.pause()
        await pilot.press("r")
        await wait_until(lambda: "Running" in text_of(screen, "#status"), timeout=60)
        victims = processes_with(marker, fork_server=False)
        os.kill(max(victims), signal.SIGKILL)  # a rank dies, as in a real cluster
        await wait_until(lambda: not screen.running, timeout=15)
        status = text_of(screen, "#status")
        assert status.startswith("Failed: rank") and "killed" in status, status
        await wait_until(lambda: not processes_with(marker, fork_server=False), timeout=10)
        # still usable: predict works
        await pilot.press("p")
        await pilot.pause()
        assert "Predicted" in text_of(screen, "#status")


async def test_open_a_saved_run_and_the_help() -> None:
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot, "pipeline")
        screen.open_path(str(DATA / "pipeline-2stages.json"))
        await pilot.pause()
        assert "Opened" in text_of(screen, "#status")
        assert screen.query_one("#form", ParamForm).raw()["stages"] == "2"
        memory = screen.query_one("#memory")
        assert [(r.group, r.rank, r.predicted) for r in memory.rows][:2] == [
            ("gpipe", 0, False),
            ("gpipe", 0, True),
        ]
        screen.open_path(str(DATA / "ring-allreduce-2ranks.json"))
        assert "another lesson" in text_of(screen, "#status")
        await pilot.press("question_mark")
        await pilot.pause()
        assert "Export HTML" in str(app.screen.query_one("#help", Static).content)
        await pilot.press("escape")
        assert app.screen is screen


def _replay(path: Path, tab: str | None = None, steps: int = 3):
    async def run_before(pilot) -> None:
        screen = await open_lesson(
            pilot, "pipeline" if "pipeline" in path.name else "ring-allreduce"
        )
        screen.open_path(str(path.relative_to(Path.cwd())))
        if tab:
            screen.query_one("#panels").active = tab
        await pilot.pause()
        await pilot.press(*["right"] * steps)
        await pilot.pause()

    return run_before


def test_snapshot_finished_ring_run(snap_compare, monkeypatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.chdir(Path(__file__).parent.parent)
    assert snap_compare(
        PlaygroundApp(language="en"),
        terminal_size=SIZE,
        run_before=_replay(DATA / "ring-allreduce-2ranks.json", "tab-ring", steps=8),
    )


def test_snapshot_memory_bars(snap_compare, monkeypatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.chdir(Path(__file__).parent.parent)
    assert snap_compare(
        PlaygroundApp(language="en"),
        terminal_size=SIZE,
        run_before=_replay(DATA / "pipeline-2stages.json", "tab-memory"),
    )


async def test_the_command_palette_finds_a_lesson_by_name() -> None:
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"pipeline")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LessonScreen)
        assert app.screen.lesson.name == "pipeline"


async def test_zoom_and_pan_move_the_window() -> None:
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot)
        gantt = screen.query_one("#gantt", GanttView)
        lo, hi = gantt.window
        await pilot.press("plus")
        assert gantt.window[1] - gantt.window[0] == pytest.approx((hi - lo) / 2)
        before = gantt.window
        await pilot.press("shift+right")
        assert gantt.window[0] > before[0]
        await pilot.press("minus", "home")
        assert gantt.window == pytest.approx((lo, hi))


async def test_gantt_draws_a_failure_mark_in_the_failed_ranks_row() -> None:
    from textual.app import App

    from runtime.sim.trace import Mark, Span, Timeline

    class One(App[None]):
        def compose(self):
            yield GanttView(id="gantt")

    app = One()
    async with app.run_test(size=(80, 10)) as pilot:
        gantt = app.query_one(GanttView)
        spans = [Span(r, "compute", "c", 0.0, 1.0, action_id=f"a{r}") for r in (0, 1)]
        gantt.set_timelines(Timeline(spans, marks=[Mark(0.5, "failure", "killed", rank=1)]), None)
        await pilot.pause()
        rows = {row.label: y + 1 for y, row in enumerate(gantt.rows)}
        text = lambda y: "".join(seg.text for seg in gantt.render_line(y))  # noqa: E731
        assert "✕" in text(rows["r1"]) and "✕" not in text(rows["r0"])


async def test_curves_tab_draws_the_lessons_curves_or_says_there_are_none() -> None:
    from textual.widgets import TabbedContent
    from textual_plotext import PlotextPlot

    app = PlaygroundApp(language="es")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot, "failure-resume")
        await pilot.press("p")
        await wait_until(lambda: screen.outcome is not None, timeout=30)
        await pilot.press("c")
        await pilot.pause()
        assert screen.query_one("#panels", TabbedContent).active == "tab-curves"
        plots = list(screen.query("#curves CurvePlot").results(PlotextPlot))
        assert [p.curve.title for p in plots] == [c.title for c in screen.outcome.curves]
        assert plots and "Daly" in plots[0].curve.marks
        # In the learner's language: the app is in Spanish here.
        assert plots[0].language == "es"
        assert plots[0].curve.text(plots[0].curve.title, "es").startswith("Cada cuánto guardar")
        app.pop_screen()
        await pilot.pause()
        screen = await open_lesson(pilot, "ring-allreduce")
        await pilot.press("p")
        await wait_until(lambda: screen.outcome is not None, timeout=30)
        assert not screen.outcome.curves
        assert "no dibuja curvas" in str(screen.query_one("#curves Static", Static).content)
