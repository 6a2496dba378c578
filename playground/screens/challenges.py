"""The challenges screen (`g`): pick a challenge, read its hint, give your answer first.

Part of `playground/` in docs/design.md (issue 40, items 1 and 2). A modal over the
lesson: ↑/↓ choose a challenge (playground.widgets.challenges draws it); where it asks
for the learner's number or choice, the box takes it and Enter keeps it
(playground.challenges.answer; a wrong form is refused in one line, in the learner's
language) until the next run checks it. Esc goes back; the lesson screen saves the
progress and shows the goal again.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from playground.challenges import answer
from playground.i18n import t
from playground.progress import LessonProgress
from playground.widgets.challenges import challenge_content
from scenarios.goals import AnswerError, Goal


class ChallengesScreen(ModalScreen[bool]):
    """Dismissed with whether an answer was kept (the progress then needs saving)."""

    # ↑ ↓ and Enter before any focused widget (the scrolling box would take ↑ ↓, and
    # keys typed ahead of a slow frame reach the box before its focus does).
    BINDINGS = [
        Binding("escape", "close", ""),
        Binding("up", "move(-1)", "", priority=True),
        Binding("down", "move(1)", "", priority=True),
        Binding("enter", "submit", "", priority=True),
    ]
    DEFAULT_CSS = """
    ChallengesScreen { align: center middle; }
    ChallengesScreen > VerticalScroll {
        width: 76; max-width: 95%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    ChallengesScreen #challenge-list { margin-bottom: 1; }
    ChallengesScreen #challenge-error { color: $text-error; }
    ChallengesScreen #challenge-answer { margin-top: 1; }
    """

    def __init__(self, goal: Goal, progress: LessonProgress, language: str, index: int = 0):
        super().__init__()
        self.goal = goal
        self.progress = progress
        self.language = language
        self.index = min(max(index, 0), len(goal.challenges) - 1)
        self.answered = False

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.can_focus = False  # the answer box has the keys; ↑ ↓ choose
            box.border_title = t("app.challenges", self.language)
            yield Static(id="challenge-list")
            yield Static(id="challenge")
            yield Input(id="challenge-answer", compact=True)
            yield Static(id="challenge-error")
            yield Static(t("app.challenges_keys", self.language), id="challenge-keys")

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        language = self.language
        # One line for all of them (met ✓, open ·; the one shown reversed), so that the
        # challenge and its answer box fit 24 rows.
        cells: list[Content | str] = []
        for n, challenge in enumerate(self.goal.challenges):
            sign = "✓" if self.progress.state(challenge.id).met else "·"
            style = "reverse bold" if n == self.index else ""
            cells += [Content.styled(f" {sign}{n + 1} ", style), " "]
        self.query_one("#challenge-list", Static).update(Content.assemble(*cells))
        challenge = self.goal.challenges[self.index]
        state = self.progress.state(challenge.id)
        self.query_one("#challenge", Static).update(
            challenge_content(self.index + 1, challenge, state, language)
        )
        box = self.query_one("#challenge-answer", Input)
        box.value = ""
        # Always shown (a box that appears and goes as ↑ ↓ move would lose the focus):
        # disabled where the challenge asks nothing first.
        box.disabled = challenge.ask is None
        if challenge.ask is None:
            box.placeholder = t("app.challenge_no_answer", language)
        else:
            choices = "/".join(challenge.ask.choices)
            box.placeholder = t("app.challenge_answer_hint", language, choices=choices or "#")
            self.set_focus(box)
        self.query_one("#challenge-error", Static).update("")

    def on_key(self, event: events.Key) -> None:
        """A character typed while the box has lost the focus still goes into it."""
        box = self.query_one("#challenge-answer", Input)
        if event.is_printable and event.character and not box.disabled and not box.has_focus:
            box.focus()
            box.insert_text_at_cursor(event.character)
            event.stop()

    def action_move(self, step: int) -> None:
        self.index = (self.index + step) % len(self.goal.challenges)
        self.show()

    def action_submit(self) -> None:
        box = self.query_one("#challenge-answer", Input)
        if not box.disabled:
            self.keep(box.value)

    def keep(self, typed: str) -> None:
        """Keep `typed` as the answer to the challenge on screen, or say why not."""
        challenge = self.goal.challenges[self.index]
        try:
            answer(self.progress, challenge, typed)
        except AnswerError as exc:
            self.query_one("#challenge-error", Static).update(exc.texts[self.language])
            return
        self.answered = True
        self.show()
        self.query_one("#challenge-error", Static).update(
            Content.styled(t("app.challenge_kept", self.language), "$text-success")
        )

    def action_close(self) -> None:
        self.dismiss(self.answered)
