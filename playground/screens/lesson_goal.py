"""The lesson screen's story keys and its goal: `n`/`N`, Home/End, `k`, `g`, and the checks.

Part of `playground/` in docs/design.md, split off playground.screens.lesson (which
composes the widgets and mixes these in) so that each file reads in one sitting:

- `StoryKeys`: the narrative told in its own order (issue 40, item 4). `n`/`N` (and
  PageDown/PageUp) go to the next/previous narrative step, the cursor jumping to that
  step's first event (playground.widgets.narrative.step_starts); Home/End show the
  first/last step; `k` toggles the timeline's legend (playground.widgets.legend).
- `GoalChallenges`: the lesson's goal and challenges (items 1 and 2). After each
  outcome the challenges are checked (playground.challenges) and what was met, or
  answered wrong, is said; `g` opens the challenges (playground.screens.challenges)
  to give an answer before the run; progress is kept (playground.progress).

Nothing here imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from playground import progress as progress_store
from playground.challenges import Verdict, check
from playground.i18n import t
from playground.outcome import Outcome
from playground.progress import LessonProgress
from playground.widgets.challenges import comparison
from playground.widgets.legend import GanttLegend
from playground.widgets.narrative import NarrativePanel, step_starts
from scenarios.goals import Facts, Goal

if TYPE_CHECKING:
    from textual.screen import Screen as _Screen

    from playground.widgets.gantt import GanttView
    from runtime.sim.program import Action
    from scenarios.base import Lesson
else:
    _Screen = object  # mixins of the lesson screen (which is the Screen)


class StoryKeys(_Screen):
    """`n`/`N`, Home/End and `k` of the lesson screen (what it uses of the screen is
    annotated here; playground.screens.lesson defines it)."""

    lesson: Lesson
    gantt: GanttView
    actions: dict[str, Action]
    pinned: int | None
    overview: bool
    language: str

    def action_story(self, direction: int) -> None:
        """`n`/`N`: the next (previous) narrative step, in the story's order; the cursor
        jumps to that step's first event (it stays put for a step this timeline lacks)."""
        steps = len(self.lesson.narrative)
        if not steps:
            return
        current = self.pinned
        if current is None:
            current = self.query_one("#narrative", NarrativePanel).step_index
        index = 0 if current is None else min(max(current + direction, 0), steps - 1)
        self.goto_step(index)

    def goto_step(self, index: int) -> None:
        """Narrative step `index` on screen, the cursor at its first event."""
        rows = self.gantt.rows
        measured = [row for row in rows if not row.predicted]
        spans = [span for row in (measured or rows) for span in row.spans]
        start = step_starts(self.lesson, self.actions, spans, self._waits_for_straggler)[index]
        self.pinned, self.overview = index, False
        if start is not None:
            self.gantt.cursor = start
            self.gantt.show_cursor()
        self._update_narrative()

    def action_story_edge(self, to_end: bool) -> None:
        """Home/End: the cursor at the timeline's start (end), the story at its first
        (last) step."""
        self.gantt.jump(to_end)
        self.pinned = len(self.lesson.narrative) - 1 if to_end else 0
        self.overview = False
        self._update_narrative()

    def action_toggle_legend(self) -> None:
        """`k`: what the timeline's rows, signs, glyphs and colours mean."""
        if self.query_one("#legend", GanttLegend).toggle():
            self._show_legend()

    def _show_legend(self) -> None:
        legend = self.query_one("#legend", GanttLegend)
        if not legend.has_class("shown"):
            return  # drawn when `k` shows it
        kinds = sorted({span.kind for row in self.gantt.rows for span in row.spans})
        legend.show_legend(self.language, kinds)


class GoalChallenges(_Screen):
    """The goal shown and the challenges checked, on the lesson screen."""

    lesson: Lesson
    goal: Goal | None
    progress: LessonProgress
    verdicts: list[Verdict]
    pinned: int | None
    overview: bool
    language: str

    def check_challenges(self, outcome: Outcome, source: str) -> None:
        """Check the challenges on what the ranks measured (a run of this app) or on a
        prediction; a saved run opened from a file meets none. Says what was met."""
        if self.goal is None:
            return
        ran = source == "run" and outcome.measured is not None
        facts = Facts(outcome.params, tuple(outcome.metrics), ran)
        self.verdicts = check(
            self.goal, self.progress, facts, prediction_counts=source == "predict"
        )
        checked = [v for v in self.verdicts if v.met is not None]
        if any(v.met or v.yours is not None for v in checked):  # met, or an answer used
            self._save_progress()
        for verdict in checked:
            number = self.goal.challenges.index(verdict.challenge) + 1
            text = verdict.challenge.text[self.language]
            if verdict.met:
                self.notify(text, title=t("app.challenge_met_n", self.language, n=number))
            elif verdict.yours is not None:
                said = f"{text}\n{comparison(verdict, self.language)}"
                title = t("app.challenge_not_met_n", self.language, n=number)
                self.notify(said, title=title, severity="warning")

    def _save_progress(self) -> None:
        try:
            progress_store.save(self.progress)
        except OSError as exc:  # kept for this session only; say why
            self.notify(f"{exc.strerror or exc}: {exc.filename}", severity="error")

    def action_challenges(self) -> None:
        """`g`: the challenges, to read a hint and give an answer before the run."""
        if self.goal is None:
            return
        from playground.screens.challenges import ChallengesScreen

        goal = self.goal
        first_open = next(
            (n for n, c in enumerate(goal.challenges) if not self.progress.state(c.id).met), 0
        )

        def closed(answered: bool | None) -> None:
            if answered:
                self._save_progress()
            self.overview, self.pinned = True, None
            self._update_narrative()

        screen = ChallengesScreen(goal, self.progress, self.language, first_open)
        self.app.push_screen(screen, closed)
