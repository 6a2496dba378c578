"""The home screen: every lesson of the unit, in course order, built or still to come.

The first thing a learner sees when typing `playground` (docs/design.md, "What the
product is"). Lessons come from scenarios.registry.lessons(); the ones not
built yet stay in the list, marked "coming soon", so the learner sees the
whole unit. Choosing a built lesson posts `HomeScreen.LessonChosen` up to the
app, which opens it; choosing an unbuilt one only shows a notice.

Imports: textual and the scenario registry (no torch, nothing heavy).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Header, OptionList
from textual.widgets.option_list import Option

from playground.i18n import t
from playground.screens import BilingualBindings
from scenarios.lesson_info import LessonInfo
from scenarios.registry import lessons


def lesson_prompt(info: LessonInfo, language: str) -> Content:
    """Two lines: number, title and status; then the one-line summary.

    Built lessons stand out; the others are greyed. ($foreground-muted, not
    $text-muted: a Content span cannot resolve the latter's "auto 60%".)
    """
    muted = "$foreground-muted"
    if info.available:
        status = (t("app.available", language), "bold $text-success")
    else:
        status = (t("app.planned", language), "italic $text-warning")
    return Content.assemble(
        (t("app.lesson", language, n=info.lesson), muted),
        (" · ", muted),
        (info.title[language], "bold" if info.available else muted),
        "  ",
        status,
        "\n",
        (info.summary[language], "" if info.available else muted),
    )


class HomeScreen(BilingualBindings, Screen[None]):
    """The unit's lessons as a list; Enter opens one."""

    language: reactive[str] = reactive("en")

    @dataclass
    class LessonChosen(Message):
        """The learner chose a built lesson; the app opens its screen."""

        scenario: str

    def __init__(self) -> None:
        super().__init__()
        self.sub_title = ""  # too long for the header beside the title: the list's border shows it
        self.lessons = lessons()

    def compose(self) -> ComposeResult:
        yield Header()
        options: list[Option | None] = []
        for info in self.lessons:
            # None draws a rule between lessons, so each summary stays with its title.
            options += [None] if options else []
            options.append(Option(lesson_prompt(info, self.language), id=info.scenario))
        yield OptionList(*options, id="lessons")
        yield Footer()

    def on_mount(self) -> None:
        # Start on the first lesson one can open, so Enter does something at once.
        first = next((n for n, i in enumerate(self.lessons) if i.available), 0)
        self.query_one("#lessons", OptionList).highlighted = first
        self.relabel(self.language)

    def watch_language(self, language: str) -> None:
        if self.is_mounted:
            self.relabel(language)

    def relabel(self, language: str) -> None:
        """Every text of the screen in `language`; the highlighted lesson stays."""
        options = self.query_one("#lessons", OptionList)
        for info in self.lessons:
            options.replace_option_prompt(info.scenario, lesson_prompt(info, language))
        # Tagline and hint ride on the list's border: two more rows for the lessons.
        options.border_title = t("app.subtitle", language)
        options.border_subtitle = t("app.hint", language)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        info = next(i for i in self.lessons if i.scenario == event.option_id)
        if info.available:
            self.post_message(self.LessonChosen(info.scenario))
        else:
            self.notify(t("app.lesson_not_built", self.language), title=info.title[self.language])
