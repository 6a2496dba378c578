"""The trace screen: a learner's own job, opened from profiler traces, drawn as a run is.

Part of `playground/` in docs/design.md (one file per screen; issue 39 item 1). The
app pushes it on `o` (the home screen's, or a lesson screen's when its Open box names
traces, which it hands over to read at once): the learner types one or more trace
files or a folder of them (PyTorch profiler / Kineto JSON, plain or gzipped) and
presses Enter. Reading runs in
a worker thread (a trace can be hundreds of MB) that only computes; the screen then
shows the ranks in the Gantt (computation, memory copies, each collective in its
kind's colour, idle dotted, the cost model's prediction under each rank) and under it
two tabs: Metrics (HTA's figures per rank, each kind's count, time and bus bandwidth
beside the prediction, the collectives named by mechanism) and Workers, a run's own
Workers view (playground.widgets.workers) of the job's per-rank report
(playground.kineto.workers: each profiler step's time, busy share and waiting per
rank, and the straggler by lesson 1's rule); `w` shows it. `e` writes the page
(playground.kineto.export) as a run's `e` does; a refused trace says its one line in
the status, never a traceback.

Imports: textual and the pure kineto modules, at first use; never torch.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static, TabbedContent, TabPane

from playground.formatting import plain
from playground.i18n import t
from playground.screens import BilingualBindings, bilingual
from playground.widgets.gantt import GanttView
from playground.widgets.metrics_panel import MetricsPanel
from playground.widgets.workers import WorkersView

# (pane, its label's catalog entry), as the lesson screen's panels are labelled.
PANELS = (("trace-tab-metrics", "app.metrics"), ("trace-tab-workers", "app.workers"))


class TraceScreen(BilingualBindings, Screen[None]):
    """Paths in, the job's ranks and their collectives out."""

    BINDINGS = [
        *bilingual("escape", "app.pop_screen", "app.back"),
        *bilingual("e", "export", "app.key_export"),
        *bilingual("w", "show_tab('trace-tab-workers')", "app.show_workers", show=False),
    ]
    DEFAULT_CSS = """
    TraceScreen #trace-bar { height: auto; }
    TraceScreen #trace-path { width: 1fr; }
    TraceScreen #trace-status { height: auto; padding: 0 1; }
    TraceScreen #trace-mechanisms { height: auto; padding: 0 1; }
    TraceScreen #trace-panels { height: auto; }
    """

    language: reactive[str] = reactive("en")

    def __init__(self, language: str = "en", paths: list[str] | None = None) -> None:
        """`paths`: traces to read as soon as the screen is up (typed elsewhere)."""
        super().__init__()
        self.set_reactive(TraceScreen.language, language)
        self.report: Any = None
        self.last_export: Path | None = None
        self.paths = paths

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="trace-bar"):
            yield Input(id="trace-path", placeholder=t("trace.open_hint", self.language))
        yield Static(id="trace-status")
        with VerticalScroll():
            yield GanttView(id="trace-gantt")
            with TabbedContent(id="trace-panels"):
                with TabPane("Metrics", id="trace-tab-metrics"):
                    yield Static(id="trace-mechanisms")
                    yield MetricsPanel(id="trace-metrics")
                with TabPane("Workers", id="trace-tab-workers"):
                    yield WorkersView(id="trace-workers")
        yield Footer()

    def on_mount(self) -> None:
        path_box = self.query_one("#trace-path", Input)
        path_box.focus()
        self.relabel(self.language)
        if self.paths:
            path_box.value = shlex.join(self.paths)
            self.query_one("#trace-status", Static).update(t("trace.reading", self.language))
            self._read(self.paths)

    def watch_language(self, language: str) -> None:
        if self.is_mounted:
            self.relabel(language)

    def relabel(self, language: str) -> None:
        """The tabs' labels, and what is shown, in `language`."""
        panels = self.query_one("#trace-panels", TabbedContent)
        for pane, key in PANELS:
            panels.get_tab(pane).label = t(key, language)
        if self.report is not None:
            self._show_panels()

    def action_show_tab(self, pane: str) -> None:
        """`w`: the Workers tab (Metrics is a click away)."""
        self.query_one("#trace-panels", TabbedContent).active = pane

    @on(Input.Submitted, "#trace-path")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        try:
            paths = shlex.split(text)
        except ValueError:
            paths = [text]
        self.query_one("#trace-status", Static).update(t("trace.reading", self.language))
        self._read(paths)

    @work(thread=True, exclusive=True, exit_on_error=False, group="trace")
    def _read(self, paths: list[str]) -> None:
        """Read and measure in a thread (it only computes), then show on the app's loop."""
        from playground.kineto.reader import read_traces
        from playground.kineto.report import build
        from playground.kineto.timeline import trace_view
        from playground.usage import UsageError

        try:
            report = build(read_traces(paths))
            view = trace_view(report)
        except UsageError as exc:
            self.app.call_from_thread(self._refused, exc.text(self.language))
            return
        self.app.call_from_thread(self._show, report, view)

    def _refused(self, line: str) -> None:
        self.query_one("#trace-status", Static).update(Content(plain(line)))

    def _show(self, report: Any, view: Any) -> None:
        self.report = report
        self.query_one("#trace-gantt", GanttView).set_timelines(view.measured, view.predicted)
        self._show_panels()
        # Keys to the screen now (`e`, `w`, escape), not to the path box.
        self.set_focus(None)

    def _show_panels(self) -> None:
        """The status line, the Metrics and Workers tabs of the report, in the learner's
        language."""
        from playground.kineto.report import mechanism_lines

        report, language = self.report, self.language
        ranks = ", ".join(str(tr.rank) for tr in report.traces)
        profile = report.profile.name + (" ?" if report.assumed else "")
        status = t("trace.opened", language, ranks=ranks, profile=profile)
        self.query_one("#trace-status", Static).update(Content(plain(status)))
        lines = [t("trace.mechanisms", language), *mechanism_lines(report, language)]
        # Content, not markup: a name from the trace may hold "[" (never read as a style).
        text = Content("\n".join(plain(x) for x in lines))
        self.query_one("#trace-mechanisms", Static).update(text)
        self.query_one("#trace-metrics", MetricsPanel).show(report.metrics, language)
        workers = report.workers
        steps = sum(1 for w in workers.windows if w.step is not None) if workers else 0
        note = (
            t("trace.workers_steps", language, steps=steps)
            if steps
            else t("trace.workers_whole", language)
        )
        self.query_one("#trace-workers", WorkersView).show(workers, language, note)

    def action_export(self) -> None:
        if self.report is None:
            self.notify(t("app.nothing_to_export", self.language))
            return
        from playground.kineto.export import write_trace_html

        folder = Path(os.environ.get("PLAYGROUND_EXPORT_DIR") or Path.cwd())
        path = folder / f"playground-trace-{time.strftime('%Y%m%d-%H%M%S')}.html"
        try:
            write_trace_html(self.report, path)
        except OSError as exc:
            self.notify(plain(exc), severity="error")
            return
        self.last_export = path
        self.notify(
            t("app.exported", self.language, path=path), title=t("app.export", self.language)
        )
