"""The lesson screen's panels: an outcome shown, and the narrative kept beside the cursor.

Part of `playground/` in docs/design.md, split off playground.screens.lesson (which
composes the widgets, handles the controls' messages and mixes this in, as it mixes
in playground.screens.lesson_goal's keys) so that each file reads in one sitting.
`OutcomePanels.show_outcome` puts an Outcome on screen: the Gantt's timelines, the
metrics (with, under them, why the calibration is stale where it is), the ring, the
memory bars, the workers and the curves, then the goal in the narrative's place. `_update_narrative` (on each `CursorMoved` of the Gantt, and
after a key of the story) shows the narrative step the cursor is in, or the step
pinned by `n`/`N`/Home/End, or the goal while the overview is on; where peers wait
for a flagged straggler it shows the lesson's `straggler` step.

Nothing here imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from playground.challenges import Verdict
from playground.i18n import t
from playground.memory_rows import memory_rows
from playground.outcome import Outcome
from playground.prediction_error import staleness_line
from playground.progress import LessonProgress
from playground.widgets.challenges import goal_content
from playground.widgets.curves import CurvesView
from playground.widgets.gantt import GanttView
from playground.widgets.memory import MemoryBars
from playground.widgets.metrics_panel import MetricsPanel
from playground.widgets.narrative import NarrativePanel, metric_line
from playground.widgets.ring import RingView
from playground.widgets.workers import WorkersView
from runtime.engine.workers import COLLECTIVES, MESSAGES
from runtime.sim.trace import Span
from scenarios.base import STRAGGLER_PHASE
from scenarios.metrics import find

if TYPE_CHECKING:
    from textual.screen import Screen as _Screen

    from runtime.engine.live_workers import LiveWorkers
    from runtime.fit.conditions import Staleness
    from runtime.sim.program import Action
    from scenarios.base import Lesson
    from scenarios.goals import Goal
else:
    _Screen = object  # a mixin of the lesson screen (which is the Screen)

WAITS = COLLECTIVES | MESSAGES


class OutcomePanels(_Screen):
    """An outcome on the lesson screen's Gantt and panels, and the narrative beside the
    cursor (what it uses of the screen is annotated here; playground.screens.lesson
    defines it)."""

    lesson: Lesson
    gantt: GanttView
    actions: dict[str, Action]
    outcome: Outcome | None
    live: LiveWorkers | None
    goal: Goal | None
    progress: LessonProgress
    verdicts: list[Verdict]
    pinned: int | None
    overview: bool
    language: str
    calibration: tuple[Staleness | None, int]  # its staleness, and the world size judged

    # -- showing an outcome -------------------------------------------------------------
    def show_outcome(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.live = None
        # A lumped prediction (predict at scale) stands for more Actions than are worth
        # building again here: its spans are drawn without them.
        lumped = find(outcome.metrics, "lumped") is not None
        program = None if lumped else outcome.lesson.build(outcome.params)
        self.actions = {a.id: a for a in program.actions()} if program is not None else {}
        self.gantt.set_timelines(outcome.measured, outcome.predicted)
        self.gantt.follow = False
        self._show_panels(outcome)
        self._show_legend()
        self.pinned, self.overview = None, self.goal is not None
        self.gantt.cursor = self.gantt.start
        self._update_narrative()

    def _show_panels(self, outcome: Outcome) -> None:
        language = self.language
        headline = outcome.lesson.hooks.headline
        # Under the before-run prediction: why the calibration behind it is stale, if it is.
        stale = staleness_line(*self.calibration, language)
        self.query_one("#metrics", MetricsPanel).show(outcome.metrics, language, headline, stale)
        titles = {}
        for step in self.lesson.narrative:
            for phase in step.phases:
                titles[phase] = step.title[language].split(": ", 1)[-1]
        followed = outcome.measured if outcome.measured is not None else outcome.predicted
        ring = self.query_one("#ring", RingView)
        world = outcome.params.world_size
        if find(outcome.metrics, "lumped") is not None:  # only the ranks it draws
            world = max(outcome.predicted.ranks(), default=0) + 1
        ring.set_data(world, self.actions.values(), followed, titles)
        rows = memory_rows(outcome.metrics)
        words = {w: t(f"app.memory_{w}", language) for w in ("measured", "predicted", "note")}
        if not rows:
            words["note"] = t("app.memory_none", language)
        self.query_one("#memory", MemoryBars).set_rows(rows, words)
        self.query_one("#workers", WorkersView).show_outcome(outcome, language)
        self.query_one("#curves", CurvesView).show(outcome.curves, language)

    def on_gantt_view_cursor_moved(self, message: GanttView.CursorMoved) -> None:
        self._update_narrative()

    def _update_narrative(self) -> None:
        self.query_one("#ring", RingView).cursor = self.gantt.cursor
        panel = self.query_one("#narrative", NarrativePanel)
        panel.border_title = t("app.narrative", self.language)
        if self.overview and self.goal is not None:
            panel.show_overview(
                goal_content(self.goal, self.progress, self.language, self.verdicts)
            )
            return
        span = self.gantt.span_at_cursor()
        action = self.actions.get(span.action_id or "") if span is not None else None
        step = self.lesson.step_for_phase(action.phase) if action is not None else None
        if span is not None and self._waits_for_straggler(span):
            step = self.lesson.step_for_phase(STRAGGLER_PHASE) or step
        index, series = panel.step_index, action.series if action is not None else None
        if self.pinned is not None and self.pinned < len(self.lesson.narrative):
            index = self.pinned
        elif step is not None:
            index = self.lesson.narrative.index(step)
        elif self.outcome is None:
            index = None
        metric = ""
        if index is not None and self.outcome is not None:
            step = self.lesson.narrative[index]
            metric = metric_line(step, self.outcome.metrics, series, self.language)
        panel.show(self.lesson, self.language, index, metric)

    def _waits_for_straggler(self, span: Span) -> bool:
        """A rank waiting in communication while the run has a straggler (another rank)."""
        workers = self.outcome.workers if self.outcome is not None else None
        straggler = workers.overall.straggler if workers is not None else None
        return straggler is not None and span.rank != straggler and span.kind in WAITS
