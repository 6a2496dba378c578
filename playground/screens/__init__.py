"""The app's screens, one file per screen, and the bilingual key bindings they share.

Part of `playground/` in docs/design.md (the Textual front end). Every screen here
follows "messages up, attributes down": the app owns the learner's `language`
and binds it down into each screen (`data_bind`); a screen tells the app what
the learner asked for with a message and never pushes screens itself.

Why `bilingual()`: Textual fixes a binding's description when the class is
built, and offers no public way to retitle it (Textualize/textual#4180). The
course must switch language live, footer included, so each key is bound once
per language and `BilingualBindings.check_action` enables only the copy in the
current language (the "dynamic actions" path of Textual's guide). The footer
and the key handling then follow `language` with no private API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding

from playground.i18n import LANGUAGES, t

if TYPE_CHECKING:
    from textual.dom import DOMNode as _Node
else:
    # A plain mixin at run time: a DOMNode base would add a CSS type name to every screen.
    _Node = object


def bilingual(keys: str, action: str, text: str, *, show: bool = True) -> list[Binding]:
    """`keys` bound to `action`, described by the catalog entry `text`, once per language
    (`show=False` keeps it out of the footer; the help screen still lists it)."""
    return [
        Binding(keys, f"localized({lang!r}, {action!r})", t(text, lang), show=show)
        for lang in LANGUAGES
    ]


class BilingualBindings(_Node):
    """Mixin for a node with `bilingual()` bindings and a `language` attribute."""

    language: str

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "localized":
            # False (not None): the other language's copy is neither shown nor run.
            return parameters[0] == self.language
        return super().check_action(action, parameters)

    async def action_localized(self, language: str, action: str) -> None:
        # In this node's namespace, as if the key had been bound to `action` directly.
        await self.app.run_action(action, self)
