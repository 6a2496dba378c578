"""A lesson's screen: set the knobs, run it for real or predict it, step through it.

Part of `playground/` in docs/design.md: a screen that composes widgets and handles
their messages; the widgets draw, format and run. Left, the lesson's controls
(playground.widgets.controls: typed parameter form, Run, Predict, Open, status);
right, the Gantt chart (measured, predicted or both, with its cursor), and
under it the narrative step the cursor is in beside a panel with the metrics,
the ring, the memory bars and the workers (a row per rank, updated while the
run streams its records; with PLAYGROUND_METRICS_PORT the app's Prometheus
endpoint serves the same live figures, playground.metrics_server).
An outcome put on those panels, and the narrative kept beside the cursor, are
playground.screens.lesson_panels's.

When it opens, and after each outcome, the narrative's place shows the lesson's goal
and challenges (met or not, your answer beside the model's and the measurement); `n`
tells the narrative step by step in its own order, `g` opens the challenges, `k` the
timeline's legend (playground.screens.lesson_goal holds those keys and the checks).

Messages up, attributes down: the controls post `Started` (clear the Gantt),
`Records` (spans and counters streamed while the run goes) and `Ready` (an Outcome
to show); the Gantt posts `CursorMoved`, which updates the narrative and the ring.
Where peers wait for a flagged straggler, the narrative shows the lesson's step of
the `straggler` phase ("everyone waits for the slowest").
Nothing here imports torch: the ranks are other processes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane

from playground import progress as progress_store
from playground.challenges import Verdict, goal_of
from playground.i18n import t
from playground.metrics_server import run_id
from playground.outcome import Outcome
from playground.prediction_error import staleness_line
from playground.progress import LessonProgress
from playground.screens import BilingualBindings, bilingual
from playground.screens.lesson_goal import GoalChallenges, StoryKeys
from playground.screens.lesson_panels import OutcomePanels
from playground.widgets.controls import LessonControls
from playground.widgets.curves import CurvesView
from playground.widgets.gantt import GanttView
from playground.widgets.legend import GanttLegend
from playground.widgets.memory import MemoryBars
from playground.widgets.metrics_panel import MetricsPanel
from playground.widgets.narrative import NarrativePanel
from playground.widgets.ring import RingView
from playground.widgets.workers import WorkersView
from runtime.engine.pool import RankPool
from runtime.fit.conditions import Staleness, staleness_now
from runtime.sim.program import Action
from scenarios.base import Lesson
from scenarios.workers import live_workers

if TYPE_CHECKING:
    from runtime.engine.live_workers import LiveWorkers
    from runtime.engine.prometheus import MetricsServer


PANELS = (
    ("tab-metrics", "app.metrics"),
    ("tab-ring", "app.ring"),
    ("tab-memory", "app.memory"),
    ("tab-workers", "app.workers"),
    ("tab-curves", "app.curves"),
)
# The Workers tab redraws a live run at most this often (records arrive every 50 ms
# from each rank).
WORKERS_REDRAW_S = 0.25


class LessonScreen(OutcomePanels, StoryKeys, GoalChallenges, BilingualBindings, Screen[None]):
    """Controls, Gantt, narrative and panels of one lesson."""

    # The keys go to the timeline from the start (on_mount focuses it too). Left to
    # Textual, the first focusable widget took the focus first: the parameter form,
    # whose whole subtree is restyled each time its focus changes.
    AUTO_FOCUS = "#gantt"

    BINDINGS = [
        # The footer's words are short (app.key_*) so that it fits 80 columns in either
        # language; the help screen (?) says each key in full.
        *bilingual("escape", "escape", "app.key_back"),
        *bilingual("r", "controls('run')", "app.run"),
        *bilingual("p", "controls('predict')", "app.predict"),
        *bilingual("o", "open", "app.open", show=False),
        *bilingual("space", "gantt('toggle_play')", "app.key_play"),
        *bilingual("left", "gantt('step', -1)", "app.prev", show=False),
        *bilingual("right", "gantt('step', 1)", "app.next", show=False),
        *bilingual("plus,equals_sign", "gantt('zoom', 2.0)", "app.zoom_in", show=False),
        *bilingual("minus", "gantt('zoom', 0.5)", "app.zoom_out", show=False),
        *bilingual("shift+left", "gantt('pan', -0.25)", "app.pan_left", show=False),
        *bilingual("shift+right", "gantt('pan', 0.25)", "app.pan_right", show=False),
        *bilingual("n,pagedown", "story(1)", "app.next_step", show=False),
        *bilingual("N,pageup", "story(-1)", "app.prev_step", show=False),
        *bilingual("home", "story_edge(False)", "app.home", show=False),
        *bilingual("end", "story_edge(True)", "app.end", show=False),
        *bilingual("m", "gantt('next_mode')", "app.key_view"),
        *bilingual("e", "export", "app.key_export"),
        *bilingual("w", "show_tab('tab-workers')", "app.show_workers", show=False),
        *bilingual("c", "show_tab('tab-curves')", "app.show_curves", show=False),
        *bilingual("k", "toggle_legend", "app.legend_toggle", show=False),
        *bilingual("g", "challenges", "app.challenges_key", show=False),
        *bilingual("question_mark", "help", "app.help"),
        # The app's keys, kept out of this footer (80 columns hold the lesson's keys only).
        *bilingual("l", "app.toggle_language", "app.language", show=False),
        *bilingual("q", "app.quit", "app.quit", show=False),
    ]

    language: reactive[str] = reactive("en")

    def __init__(
        self, lesson: Lesson, pool: RankPool | None = None, metrics: MetricsServer | None = None
    ) -> None:
        super().__init__()
        self.sub_title = ""
        self.lesson = lesson
        self.pool = pool  # the app's warm ranks, handed down to the controls
        self.metrics_server = metrics  # the app's Prometheus endpoint, if asked for
        self.live: LiveWorkers | None = None  # the running run's workers
        self._workers_drawn = 0.0
        self.outcome: Outcome | None = None
        self.actions: dict[str, Action] = {}
        self.last_export: Path | None = None
        # The narrative step `n`/`N`/Home/End chose: shown until the cursor moves otherwise.
        self.pinned: int | None = None
        # The lesson's goal and challenges (scenarios/<lesson>/challenges.py), shown in the
        # narrative's place when it opens and after each outcome, until the cursor moves.
        self.goal = goal_of(lesson)
        self.progress = LessonProgress(1, lesson.name)
        self.verdicts: list[Verdict] = []
        self.overview = self.goal is not None
        # The calibration's staleness and the world size it was judged for: the header's
        # status line (_show_calibration).
        self.calibration: tuple[Staleness | None, int] = (None, 0)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            yield LessonControls(self.lesson, pool=self.pool, id="side")
            with Vertical(id="main"):
                with VerticalScroll(id="gantt-box"):
                    yield GanttView(id="gantt")
                yield GanttLegend(id="legend")
                with Horizontal(id="lower"):
                    yield NarrativePanel(id="narrative")
                    with TabbedContent(id="panels"):
                        with TabPane("Metrics", id="tab-metrics"), VerticalScroll():
                            yield MetricsPanel(id="metrics")
                        with TabPane("Ring", id="tab-ring"):
                            yield RingView(id="ring")
                        with TabPane("Memory", id="tab-memory"), VerticalScroll():
                            yield MemoryBars(id="memory")
                        with TabPane("Workers", id="tab-workers"), VerticalScroll():
                            yield WorkersView(id="workers")
                        with TabPane("Curves", id="tab-curves"):
                            yield CurvesView(id="curves")
        yield Footer(compact=True, show_command_palette=False)

    @property
    def gantt(self) -> GanttView:
        return self.query_one("#gantt", GanttView)

    @property
    def controls(self) -> LessonControls:
        return self.query_one("#side", LessonControls)

    @property
    def running(self) -> bool:
        return self.controls.running

    def on_mount(self) -> None:
        try:
            self.progress = progress_store.load(self.lesson.name)
        except progress_store.ProgressError as exc:  # untrusted: start afresh, say why
            self.notify(exc.text(self.language), severity="warning")
        self.gantt.can_focus = True
        self.gantt.focus()
        self.relabel(self.language)
        self.controls.predict()  # the plan is on screen at once; Run measures it

    def watch_language(self, language: str) -> None:
        if self.is_mounted:
            self.relabel(language)

    def relabel(self, language: str) -> None:
        lesson = self.lesson
        self.title = f"{t('app.lesson', language, n=lesson.number)} · {lesson.title[language]}"
        self.controls.relabel(language)
        self._title_gantt()
        panels = self.query_one("#panels", TabbedContent)
        for pane, key in PANELS:
            panels.get_tab(pane).label = t(key, language)
        self._update_narrative()
        self._show_legend()
        if self.outcome is not None:
            self._show_panels(self.outcome)
        self._show_calibration()

    def _title_gantt(self) -> None:
        mode = t("app.mode_" + self.gantt.mode, self.language)
        self.query_one("#gantt-box").border_title = f"{t('app.timeline', self.language)} · {mode}"

    # -- actions -----------------------------------------------------------------------
    def action_gantt(self, method: str, *args: Any) -> None:
        """Cursor, zoom, pan, view: the Gantt's own methods (the bindings above)."""
        if method in ("step", "toggle_play"):
            self.pinned = None  # the cursor, not the story, says the step again
            self.overview = False
        getattr(self.gantt, method)(*args)
        if method == "next_mode":
            self._title_gantt()

    def action_show_tab(self, pane: str) -> None:
        """`w`: the Workers tab (the panels' other tabs are a click away)."""
        self.query_one("#panels", TabbedContent).active = pane

    def action_controls(self, method: str) -> None:
        """Run, predict, open: the controls' own methods."""
        getattr(self.controls, method)()

    def action_escape(self) -> None:
        focused = self.focused
        in_field = isinstance(focused, Input) or (
            focused is not None and (focused.id or "").startswith("param-")
        )
        if in_field:
            self.gantt.focus()
        elif not self.query("#side") or not self.controls.cancel():  # (not composed yet)
            self.app.pop_screen()

    def open_path(self, path: str) -> None:
        self.controls.open_path(path)

    def action_open(self) -> None:
        """`o`: the Open box's path (a saved run, or traces: the trace screen), or the cursor
        put there when it is empty."""
        self.controls.ask_open()

    # -- what the controls post ------------------------------------------------------------
    def on_lesson_controls_traces_opened(self, _: LessonControls.TracesOpened) -> None:
        self.gantt.focus()  # back from the trace screen, keys go to the lesson again

    def on_lesson_controls_started(self, message: LessonControls.Started) -> None:
        self.actions = {a.id: a for a in message.program.actions()}
        same = self.outcome is not None and self.outcome.params == message.params
        self.gantt.set_timelines(None, self.outcome.predicted if same and self.outcome else None)
        self.gantt.follow = True
        self.live = live_workers(self.lesson, message.params)
        if self.metrics_server is not None:
            self.metrics_server.watch(self.lesson.name, run_id(self.lesson.name), self.live)
        self._draw_live(force=True)

    def on_lesson_controls_records(self, message: LessonControls.Records) -> None:
        self.gantt.add_spans(message.spans)
        if self.live is not None:
            self.live.add(message.spans, message.counters)
            self._draw_live()

    def _draw_live(self, force: bool = False) -> None:
        """The running run's workers, at most every WORKERS_REDRAW_S."""
        now = time.monotonic()
        if self.live is None or (not force and now - self._workers_drawn < WORKERS_REDRAW_S):
            return
        self._workers_drawn = now
        self.query_one("#workers", WorkersView).show_live(self.live, self.language)

    def on_lesson_controls_ready(self, message: LessonControls.Ready) -> None:
        self.check_challenges(message.outcome, message.source)
        outcome = message.outcome
        # A run judged its calibration as it started, before its ranks loaded the machine;
        # a prediction is judged now; a saved run's profile is another moment's: not judged.
        stale = outcome.calibration if message.source == "run" else None
        if message.source != "open":
            stale = stale or staleness_now(outcome.profile)
        self.calibration = (stale, outcome.params.world_size)
        self.show_outcome(outcome)  # the metrics panel says why it is stale
        self._show_calibration()

    def _show_calibration(self) -> None:
        """The status line under the title: a stale calibration (made before the last
        boot, or at a load average unlike now's; runtime.fit.conditions) and the command
        that calibrates again; empty while it is fresh or on a named profile."""
        stale, world = self.calibration
        self.sub_title = staleness_line(stale, world, self.language, short=True) or ""

    # -- export and help ----------------------------------------------------------------
    def action_export(self) -> None:
        if self.outcome is None:
            self.notify(t("app.nothing_to_export", self.language))
            return
        from playground.export.html import write_html

        folder = Path(os.environ.get("PLAYGROUND_EXPORT_DIR") or Path.cwd())
        path = folder / f"playground-{self.lesson.name}-{time.strftime('%Y%m%d-%H%M%S')}.html"
        try:
            write_html(self.outcome, path)
        except OSError as exc:
            self.notify(str(exc), severity="error")
            return
        self.last_export = path
        self.notify(
            t("app.exported", self.language, path=path), title=t("app.export", self.language)
        )

    def action_help(self) -> None:
        from playground.screens.help import HelpScreen

        self.app.push_screen(HelpScreen(self.language))
