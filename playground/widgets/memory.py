"""Memory bars: per rank, bytes stacked by category, measured beside predicted.

A `playground/` widget of docs/design.md (Line API, cached Strips). Each rank gets
a measured bar and, under it, the predicted one, on one scale for the whole
chart, with the total in bytes at the end; a legend names the categories
(params, grads, optimizer states, activations, communication buffers). Rows
may be grouped (one group per pipeline schedule or ZeRO stage) so variants
sit side by side.

Imports: textual, rich and runtime's pure part; never torch.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from playground.memory_rows import MemoryRow
from playground.palette import CATEGORY_COLORS, OTHER_COLOR
from runtime.sim.units import format_bytes

LABEL_WIDTH = 14
FIGURE_WIDTH = 10


class MemoryBars(Widget):
    """Stacked bars per rank (measured, then predicted), grouped, one scale."""

    DEFAULT_CSS = """
    MemoryBars { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[MemoryRow] = []
        # Learner-facing words, set by the screen in the learner's language.
        self.words = {
            "measured": "meas",
            "predicted": "pred",
            "note": "(solid: measured, shaded: predicted)",
        }
        self._lines: list[tuple[str, MemoryRow | None]] = []
        self._cache: dict[tuple[int, int], Strip] = {}

    def set_rows(self, rows: list[MemoryRow], words: dict[str, str] | None = None) -> None:
        self.rows = rows
        self.words.update(words or {})
        self._lines = [("legend", None)]
        group = None
        for row in rows:
            if row.group != group and row.group:
                self._lines.append(("group", row))
            group = row.group
            self._lines.append(("bar", row))
        self._cache = {}
        self.refresh(layout=True)

    def categories(self) -> list[str]:
        seen = []
        for row in self.rows:
            for name in row.bytes_by_category:
                if name not in seen:
                    seen.append(name)
        known = [c for c in CATEGORY_COLORS if c in seen]
        return known + [c for c in seen if c not in CATEGORY_COLORS]

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(self._lines))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = (y, width)
        if key not in self._cache:
            self._cache[key] = self._line(y, width)
        return self._cache[key]

    def _line(self, y: int, width: int) -> Strip:
        if y >= len(self._lines):
            return Strip.blank(width)
        kind, row = self._lines[y]
        if kind == "legend":
            segments = []
            for name in self.categories():
                segments.append(Segment("■ ", Style(color=CATEGORY_COLORS.get(name, OTHER_COLOR))))
                segments.append(Segment(f"{name}  ", Style(color="#B0B0B0")))
            segments.append(Segment(self.words["note"], Style(dim=True)))
            return Strip(segments).crop(0, width)
        assert row is not None
        if kind == "group":
            return Strip([Segment(row.group, Style(bold=True))]).crop(0, width)
        scale = max((r.total for r in self.rows), default=0.0)
        plot = max(1, width - LABEL_WIDTH - FIGURE_WIDTH - 1)
        side = self.words["predicted" if row.predicted else "measured"]
        label = f" r{row.rank} {side}"
        segments = [
            Segment(f"{label:<{LABEL_WIDTH}}", Style(dim=row.predicted, bold=not row.predicted))
        ]
        used = 0
        position = 0.0
        for name in self.categories():
            value = row.bytes_by_category.get(name, 0.0)
            if value <= 0 or scale <= 0:
                continue
            position += value / scale * plot
            cells = max(1, round(position) - used)
            char = "▒" if row.predicted else "█"
            segments.append(
                Segment(char * cells, Style(color=CATEGORY_COLORS.get(name, OTHER_COLOR)))
            )
            used += cells
        segments.append(Segment(" " * max(0, plot - used)))
        segments.append(
            Segment(f" {format_bytes(row.total):>{FIGURE_WIDTH}}", Style(color="#D0D0D0"))
        )
        return Strip(segments).crop(0, width)
