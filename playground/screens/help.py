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

# (keys as shown, catalog entry): the lesson screen's keys, then the app's.
KEYS = [
    ("r", "app.run"),
    ("p", "app.predict"),
    ("o", "app.open"),
    ("space", "app.play"),
    ("← →", "app.prev"),
    ("→", "app.next"),
    ("+ −", "app.zoom_in"),
    ("−", "app.zoom_out"),
    ("Home End", "app.home"),
    ("⇧← ⇧→", "app.pan_left"),
    ("m", "app.view"),
    ("e", "app.export"),
    ("w", "app.show_workers"),
    ("Esc", "app.back_or_cancel"),
    ("l", "app.language"),
    ("?", "app.help"),
    ("q", "app.quit"),
]


def help_text(language: str) -> Content:
    lines = [Content.styled(t("app.help_title", language), "bold")]
    for keys, entry in KEYS:
        if entry in ("app.next", "app.zoom_out") or keys == "Home End":
            continue  # shown on the line of their pair
        text = t(entry, language)
        if keys == "← →":
            text = f"{t('app.prev', language)} / {t('app.next', language)}"
        elif keys == "⇧← ⇧→":
            text = f"{t('app.pan_left', language)} / {t('app.pan_right', language)}"
        elif keys == "+ −":
            text = f"{t('app.zoom_in', language)} / {t('app.zoom_out', language)}"
        lines.append(Content.assemble((f"{keys:<10}", "bold $text-accent"), text))
    lines.append(
        Content.assemble(
            (f"{'Home End':<10}", "bold $text-accent"),
            f"{t('app.home', language)} / {t('app.end', language)}",
        )
    )
    lines.append(Content.styled(t("app.help_close", language), "$foreground-muted"))
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape,question_mark", "dismiss", "")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 60; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 1 2;
    }
    """

    def __init__(self, language: str) -> None:
        super().__init__()
        self.language = language

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(help_text(self.language), id="help")
