"""The timeline's legend: what each row label, glyph and colour of the Gantt chart means.

A `playground/` widget of docs/design.md, toggled by `k` on the lesson screen. The
Gantt (playground.widgets.gantt, drawn by playground.widgets.gantt_draw) labels its
rows `r0`, `r0 ·p`, `r0 ~c`, `r0 ~pc`, hatches a warm-up step's bars, draws idle time
as dots, the cursor as a bar, the start of each series as `┃`, and the marks of a run
as glyphs. The glyphs and
their styles are read from gantt_draw's own table (MARK_GLYPHS), so a mark added
there appears here; its words come from the i18n catalogs (`app.legend_mark_<kind>`),
and tests/test_challenges.py checks every mark has them in both languages.

Imports: textual, rich and the Gantt's drawing tables; never torch.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.style import Style
from rich.text import Text
from textual.content import Content
from textual.widgets import Static

from playground.i18n import t
from playground.palette import KIND_COLORS, OTHER_COLOR
from playground.widgets.gantt_draw import CURSOR, DIVIDER, IDLE, MARK_GLYPHS, WARMUP_FILL

# (what is drawn, its catalog entry): the rows' labels first, then the drawing's signs.
ROWS = (
    ("r0", "app.legend_row"),
    ("r0 ·p", "app.legend_row_predicted"),
    ("r0 ~c", "app.legend_row_comm"),
    ("r0 ~pc", "app.legend_row_comm_predicted"),
)
SIGNS = (
    (WARMUP_FILL, Style(bgcolor="#4E79A7", color="#000000"), "app.legend_warmup"),
    ("▏", Style(bgcolor="#4E79A7", color="#000000"), "app.legend_edge"),
    ("·", IDLE, "app.legend_idle"),
    ("│", CURSOR, "app.legend_cursor"),
    ("┃", DIVIDER, "app.legend_series"),
)


def mark_entries() -> list[tuple[str, str]]:
    """(mark kind, catalog entry) of every glyph the Gantt draws."""
    return [(kind, f"app.legend_mark_{kind}") for kind in MARK_GLYPHS]


def _styled(text: str, style: Style) -> Content:
    """`text` in the Gantt's own rich style (the very colours of the timeline)."""
    return Content.from_rich_text(Text(text, style=style))


def legend_content(language: str, kinds: Iterable[str] = ()) -> Content:
    """Every row label, sign and mark glyph with its meaning; then a colour swatch for
    each action kind in `kinds` (the ones on the timeline now)."""
    lines: list[Content] = [Content.styled(t("app.legend_title", language), "bold")]
    for label, entry in ROWS:
        lines.append(Content.assemble((f"{label:<7}", "bold"), " ", t(entry, language)))
    for sign, style, entry in SIGNS:
        lines.append(Content.assemble(_styled(sign, style), " " * 7, t(entry, language)))
    for kind, entry in mark_entries():
        glyph, style = MARK_GLYPHS[kind]
        lines.append(Content.assemble(_styled(glyph, style), " " * 7, t(entry, language)))
    swatches: list[Content | str] = []
    for kind in dict.fromkeys(kinds):
        color = KIND_COLORS.get(kind, OTHER_COLOR)
        swatches += [_styled("  ", Style(bgcolor=color)), f" {kind}  "]
    if swatches:
        lines.append(Content.assemble(t("app.legend_kinds", language), " ", *swatches))
    lines.append(Content.styled(t("app.legend_dim", language), "$foreground-muted"))
    return Content("\n").join(lines)


class GanttLegend(Static):
    """The legend under the timeline, hidden until `k` shows it."""

    DEFAULT_CSS = """
    GanttLegend {
        display: none; height: auto; max-height: 45%; overflow-y: auto;
        border: round $secondary; border-title-color: $text; padding: 0 1;
    }
    GanttLegend.shown { display: block; }
    """

    def show_legend(self, language: str, kinds: Iterable[str] = ()) -> None:
        self.border_title = t("app.legend", language)
        self.update(legend_content(language, kinds))

    def toggle(self) -> bool:
        """Shown if hidden, hidden if shown; whether it is shown now."""
        self.toggle_class("shown")
        return self.has_class("shown")
