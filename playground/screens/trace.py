"""The trace screen: a learner's own job, opened from profiler traces, drawn as a run is.

Part of `playground/` in docs/design.md (one file per screen; issue 39 item 1). The
app pushes it on `o`: the learner types one or more trace files or a folder of them
(PyTorch profiler / Kineto JSON, plain or gzipped) and presses Enter. Reading runs in
a worker thread (a trace can be hundreds of MB) that only computes; the screen then
shows the ranks in the Gantt (computation, memory copies, each collective in its
kind's colour, idle dotted, the cost model's prediction under each rank), the metrics
panel (HTA's figures per rank, each kind's count, time and bus bandwidth beside the
prediction) and the collectives named by mechanism. `e` writes the page
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
from textual.widgets import Footer, Header, Input, Static

from playground.formatting import plain
from playground.i18n import t
from playground.screens import BilingualBindings, bilingual
from playground.widgets.gantt import GanttView
from playground.widgets.metrics_panel import MetricsPanel


class TraceScreen(BilingualBindings, Screen[None]):
    """Paths in, the job's ranks and their collectives out."""

    BINDINGS = [
        *bilingual("escape", "app.pop_screen", "app.back"),
        *bilingual("e", "export", "app.key_export"),
    ]
    DEFAULT_CSS = """
    TraceScreen #trace-bar { height: auto; }
    TraceScreen #trace-path { width: 1fr; }
    TraceScreen #trace-status { height: auto; padding: 0 1; }
    TraceScreen #trace-mechanisms { height: auto; padding: 0 1; }
    """

    language: reactive[str] = reactive("en")

    def __init__(self, language: str = "en") -> None:
        super().__init__()
        self.set_reactive(TraceScreen.language, language)
        self.report: Any = None
        self.last_export: Path | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="trace-bar"):
            yield Input(id="trace-path", placeholder=t("trace.open_hint", self.language))
        yield Static(id="trace-status")
        with VerticalScroll():
            yield GanttView(id="trace-gantt")
            yield Static(id="trace-mechanisms")
            yield MetricsPanel(id="trace-metrics")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#trace-path", Input).focus()

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
        from playground.kineto.report import mechanism_lines

        self.report = report
        ranks = ", ".join(str(tr.rank) for tr in report.traces)
        profile = report.profile.name + (" ?" if report.assumed else "")
        status = t("trace.opened", self.language, ranks=ranks, profile=profile)
        self.query_one("#trace-status", Static).update(Content(plain(status)))
        self.query_one("#trace-gantt", GanttView).set_timelines(view.measured, view.predicted)
        lines = [t("trace.mechanisms", self.language), *mechanism_lines(report, self.language)]
        # Content, not markup: a name from the trace may hold "[" (never read as a style).
        text = Content("\n".join(plain(x) for x in lines))
        self.query_one("#trace-mechanisms", Static).update(text)
        self.query_one("#trace-metrics", MetricsPanel).show(report.metrics, self.language)
        # Keys to the screen now (`e`, escape), not to the path box.
        self.set_focus(None)

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
