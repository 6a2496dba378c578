"""The terminal app a learner gets by typing `playground`.

The top of docs/design.md's picture (`playground/`: app, screens, widgets). The app
owns the state every screen shares, the learner's `language`, and binds it
down into each screen; screens post messages up (`HomeScreen.LessonChosen`) and
the app decides what to show. One file per screen under playground.screens,
the styles in the sibling app.tcss.

It must paint its first frame fast and survive anything a rank does, so it
imports textual, the i18n catalog and scenario definitions only: never torch,
never a rank module (runtime.engine.worker, runtime.engine.comm, scenarios.<lesson>.rank).

It owns the warm ranks (runtime.engine.pool.RankPool): started by the first run, kept
for the next run of the same size, handed down to each lesson screen, and torn
down when the app exits, however it exits (q, SIGINT, SIGTERM, unmount).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from functools import partial
from typing import TYPE_CHECKING

from textual.app import App
from textual.command import Hit, Hits, Provider
from textual.reactive import reactive
from textual.screen import Screen

from playground.i18n import LANGUAGES, default_language, t
from playground.screens import BilingualBindings, bilingual
from playground.screens.home import HomeScreen
from runtime.engine.launch import prepare
from runtime.engine.pool import RankPool
from runtime.engine.spawn import warm_start
from scenarios.registry import get_lesson, lessons

if TYPE_CHECKING:
    from playground.screens.lesson import LessonScreen
    from runtime.engine.prometheus import MetricsServer


class LessonCommands(Provider):
    """Command palette entries: one per built lesson, matched on its scenario name
    and on its title in both languages."""

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        app = self.app
        assert isinstance(app, PlaygroundApp)
        for info in lessons():
            if not info.available:
                continue
            title = info.title[app.language]
            text = f"{t('app.palette_open', app.language)}: {info.scenario} · {title}"
            score = max(matcher.match(f"{info.scenario} {title}"), matcher.match(info.title["en"]))
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(text),
                    partial(app.open_lesson, info.scenario),
                    help=info.summary[app.language],
                )


class PlaygroundApp(BilingualBindings, App[None]):
    """Home screen with the unit's lessons; each built lesson opens its own screen."""

    CSS_PATH = "app.tcss"
    # The palette (ctrl+p) finds lessons by scenario name or title, in either language.
    COMMANDS = {LessonCommands}
    COMMAND_PALETTE_BINDING = "ctrl+p"
    BINDINGS = [
        *bilingual("l", "toggle_language", "app.language"),
        *bilingual("q", "quit", "app.quit"),
        # A learner's own job: profiler traces (playground.screens.trace, issue 39).
        # Kept out of the footer, so the home screen's snapshot holds; docs/traces.md says it.
        *bilingual("o", "open_trace", "app.open_trace", show=False),
    ]

    language: reactive[str] = reactive("en")

    def __init__(self, language: str | None = None, metrics: MetricsServer | None = None) -> None:
        super().__init__()
        # The Prometheus endpoint (PLAYGROUND_METRICS_PORT, playground.metrics_server):
        # each run's live per-rank figures, served while the app runs.
        self.metrics = metrics
        # Before Textual replaces sys.stderr (docs/design.md): the resource tracker that
        # spawned ranks need must start now, or launching fails later.
        prepare()
        # No processes yet: the first run starts them, and the next ones reuse them.
        self.pool = RankPool()
        # set_reactive: no watcher before the app runs, so the title is set here too.
        language = language or default_language()
        self.set_reactive(PlaygroundApp.language, language)
        self.title = t("app.title", language)

    def on_mount(self) -> None:
        # SIGINT (kill -INT; in the app ctrl+c is a key, not a signal) and SIGTERM end the
        # app like `q`: a run is cancelled (the launcher kills every rank and waits for
        # each to be gone) and the terminal is given back in its normal state.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.shut_down)
        # The fork server's torch import, once the first frame is on screen: started
        # before it, it would share the cores with the first paint (twice as slow here).
        self.call_after_refresh(self._warm_ranks)

    def _warm_ranks(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # a run then spawns its ranks
            warm_start()
        # The lesson screen's modules (its widgets, plotext, the session), also once the
        # first frame is out: the home screen does without them, and the first lesson
        # opened then finds them imported.
        lesson_screen()

    async def action_quit(self) -> None:
        self.shut_down()

    def shut_down(self) -> None:
        """Cancel any run, tear the warm ranks down (every one gone), then exit."""
        for screen in self.screen_stack:
            if isinstance(screen, lesson_screen()) and screen.is_mounted:
                screen.controls.cancel()
        self.pool.close()
        self.exit()

    def on_unmount(self) -> None:
        self.pool.close()  # however the app ends, no rank outlives it

    def get_default_screen(self) -> Screen[None]:
        return HomeScreen().data_bind(PlaygroundApp.language)

    def watch_language(self, language: str) -> None:
        self.title = t("app.title", language)
        # The footer asks check_action again: the other language's bindings show now.
        self.refresh_bindings()

    def action_toggle_language(self) -> None:
        self.language = LANGUAGES[(LANGUAGES.index(self.language) + 1) % len(LANGUAGES)]

    def on_home_screen_lesson_chosen(self, message: HomeScreen.LessonChosen) -> None:
        self.open_lesson(message.scenario)

    def action_open_trace(self, paths: list[str] | None = None) -> None:
        """The trace screen, reading `paths` at once if given (a lesson's open box)."""
        from playground.screens.trace import TraceScreen  # at first use: not before the first frame

        self.push_screen(TraceScreen(self.language, paths).data_bind(PlaygroundApp.language))

    def open_lesson(self, name: str) -> None:
        screen = lesson_screen()(get_lesson(name), pool=self.pool, metrics=self.metrics)
        self.push_screen(screen.data_bind(PlaygroundApp.language))


def lesson_screen() -> type[LessonScreen]:
    """The lesson screen's class, imported at first use (not before the first frame)."""
    from playground.screens.lesson import LessonScreen

    return LessonScreen


if __name__ == "__main__":
    PlaygroundApp().run()
