"""The help screen: every key of the app, in the learner's language (`?`).

Part of `playground/` in docs/design.md. It lists the bindings the lesson screen
and the app declare (their descriptions come from the i18n catalogs, so the
list is always the keys that really work) and closes with Esc or `?`.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from playground.i18n import t

# (keys as shown, catalog entries): the lesson screen's keys, then the app's. A line
# with two entries says both, "first / second" (a key and its opposite).
KEYS: list[tuple[str, tuple[str, ...]]] = [
    ("r", ("app.run",)),
    ("p", ("app.predict",)),
    ("o", ("app.open",)),
    ("g", ("app.challenges_key",)),
    ("space", ("app.play",)),
    ("← →", ("app.prev", "app.next")),
    ("n N", ("app.next_step", "app.prev_step")),
    ("PgDn PgUp", ("app.next_step", "app.prev_step")),
    ("Home End", ("app.home", "app.end")),
    ("+ −", ("app.zoom_in", "app.zoom_out")),
    ("⇧← ⇧→", ("app.pan_left", "app.pan_right")),
    ("m", ("app.view",)),
    ("k", ("app.legend_toggle",)),
    ("e", ("app.export",)),
    ("w", ("app.show_workers",)),
    ("c", ("app.show_curves",)),
    ("Esc", ("app.back_or_cancel",)),
    ("l", ("app.language",)),
    ("ctrl+p", ("app.palette_open",)),
    ("?", ("app.help",)),
    ("q", ("app.quit",)),
]
WIDTH = 11  # the widest keys ("PgDn PgUp") and a space


def help_text(language: str) -> Content:
    lines = [Content.styled(t("app.help_title", language), "bold")]
    for keys, entries in KEYS:
        text = " / ".join(t(entry, language) for entry in entries)
        lines.append(Content.assemble((f"{keys:<{WIDTH}}", "bold $text-accent"), text))
    lines.append(Content.styled(t("app.help_close", language), "$foreground-muted"))
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape,question_mark", "dismiss", "")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 70; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 1 2;
    }
    """

    def __init__(self, language: str) -> None:
        super().__init__()
        self.language = language

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(help_text(self.language), id="help")
