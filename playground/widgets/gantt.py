"""The Gantt chart: one row per rank, a bar per Span, measured beside predicted.

A `playground/` widget of DESIGN.md, drawn with Textual's Line API: every
terminal row is a `Strip` built by `render_line(y)` and kept in an LRU cache
keyed by what it depends on (data version, time window, width, cursor, mode),
so scrolling the cursor redraws only what changed.

- Rows: one per rank; in "both" mode the predicted row sits under the measured
  one (`r0 ·p`). Colour per action kind (the same palette family as the HTML
  export), the Span's label inside its bar when it fits, idle time drawn as
  dim dots so the bubble is visible.
- A time window (zoom with `zoom`, pan with `pan`) and a time cursor (a
  highlighted column) that the lesson screen moves event by event.
- Live runs: `add_spans` appends Spans as they arrive from the ranks.
- Marks of the measured run (a failure ✕, its detection !, a restart ↻, a
  checkpoint ◆) as one glyph in the rows of the rank they concern.

Finding the bar under each column is a binary search in the row's spans (the
spans of one rank do not overlap, so their ends are sorted), so a frame costs
columns × rows × log(spans), whatever the number of spans: 100k spans redraw
in a few milliseconds (benchmarks/app_gantt.py).

Imports: textual, rich and runtime.trace; never torch.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache

from rich.segment import Segment
from rich.style import Style
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from playground.palette import KIND_COLORS, OTHER_COLOR
from runtime.trace import Mark, Span, Timeline
from runtime.units import format_seconds

LABEL_WIDTH = 7
MODES = ("both", "measured", "predicted")
IDLE = Style(color="#5A5A5A")
CURSOR = Style(bgcolor="#FFFFFF", color="#000000", bold=True)
AXIS = Style(color="#9A9A9A")
CACHE_SIZE = 1024
# Marks (failures, restarts, checkpoints) as one glyph in the rows they concern;
# per-step marks are left out: the bars already show the steps.
MARK_GLYPHS = {
    "failure": ("✕", Style(color="#FF5555", bold=True, bgcolor="#000000")),
    "detection": ("!", Style(color="#FFD75F", bold=True, bgcolor="#000000")),
    "restart": ("↻", Style(color="#5FD7FF", bold=True, bgcolor="#000000")),
    "resume": ("▶", Style(color="#5FD7FF", bold=True, bgcolor="#000000")),
    "checkpoint": ("◆", Style(color="#D7AF87", bold=True)),
    "lost": ("…", Style(color="#FF8787", bold=True)),
}


@cache
def kind_style(kind: str, predicted: bool) -> Style:
    # Barriers darker than in the HTML: a light grey bar reads as empty in a terminal.
    color = "#6F6A66" if kind == "barrier" else KIND_COLORS.get(kind, OTHER_COLOR)
    # Predicted bars are the same hue, dimmed: the eye pairs them with the measured ones.
    return Style(bgcolor=color, color="#000000" if not predicted else "#202020", dim=predicted)


@dataclass
class GanttRow:
    label: str
    rank: int
    predicted: bool
    spans: list[Span] = field(default_factory=list)
    max_ends: list[float] = field(default_factory=list)  # running max of ends, sorted

    def add(self, span: Span) -> None:
        if self.spans and span.start < self.spans[-1].start:
            # Spans of a live run arrive roughly, not exactly, in order: re-sort.
            self.spans.append(span)
            self.spans.sort(key=lambda s: s.start)
            self._rebuild()
            return
        self.spans.append(span)
        self.max_ends.append(max(span.end, self.max_ends[-1] if self.max_ends else span.end))

    def _rebuild(self) -> None:
        running = float("-inf")
        self.max_ends = []
        for s in self.spans:
            running = max(running, s.end)
            self.max_ends.append(running)

    def span_in(self, t0: float, t1: float) -> int | None:
        """Index of the span that covers most of [t0, t1): the one covering its
        middle if any, else the first that starts inside it."""
        middle = (t0 + t1) / 2
        i = bisect_right(self.max_ends, t0)
        best = None
        while i < len(self.spans) and self.spans[i].start < t1:
            span = self.spans[i]
            if span.start <= middle < span.end:
                return i
            if best is None and span.end > t0:
                best = i
            i += 1
            if i - (best or i) > 4:  # a handful of tiny spans in one column: the first will do
                break
        return best


class GanttView(Widget):
    """Ranks × time; measured, predicted or both; a cursor; zoom and pan."""

    DEFAULT_CSS = """
    GanttView { height: auto; min-height: 3; }
    """

    cursor: reactive[float] = reactive(0.0, layout=False)
    mode: reactive[str] = reactive("both")
    window: reactive[tuple[float, float]] = reactive((0.0, 1.0))

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[GanttRow] = []
        self._measured: dict[int, GanttRow] = {}
        self._predicted: dict[int, GanttRow] = {}
        self.marks: list[Mark] = []
        self._version = 0
        self._cache: OrderedDict[tuple, Strip] = OrderedDict()
        self.follow = True  # a live run widens the window as spans arrive

    # -- data ---------------------------------------------------------------------
    def set_timelines(self, measured: Timeline | None, predicted: Timeline | None) -> None:
        self._measured, self._predicted = {}, {}
        self.marks = [m for m in (measured.marks if measured else []) if m.kind in MARK_GLYPHS]
        for span in sorted(predicted.spans if predicted else [], key=lambda s: s.start):
            self._row(span.rank, True).add(span)
        for span in sorted(measured.spans if measured else [], key=lambda s: s.start):
            self._row(span.rank, False).add(span)
        self._arrange()
        self.home()

    def add_spans(self, spans: Iterable[Span]) -> None:
        """Spans of a live run, as they arrive."""
        grew = False
        for span in spans:
            if span.rank not in self._measured:
                grew = True
            self._row(span.rank, False).add(span)
        if grew:
            self._arrange()
        self._changed()
        if self.follow:
            end = self.end
            lo, hi = self.window
            if end > hi:
                self.window = (lo, max(end, hi * 1.25))

    def clear(self) -> None:
        self.set_timelines(None, None)

    def _row(self, rank: int, predicted: bool) -> GanttRow:
        table = self._predicted if predicted else self._measured
        if rank not in table:
            table[rank] = GanttRow(f"r{rank}" + (" ·p" if predicted else ""), rank, predicted)
        return table[rank]

    def _arrange(self) -> None:
        ranks = sorted(set(self._measured) | set(self._predicted))
        rows = []
        for rank in ranks:
            if self.mode in ("both", "measured") and rank in self._measured:
                rows.append(self._measured[rank])
            if self.mode in ("both", "predicted") and rank in self._predicted:
                rows.append(self._predicted[rank])
            if self.mode == "measured" and rank not in self._measured and rank in self._predicted:
                rows.append(self._predicted[rank])  # nothing measured yet: show the plan
        self.rows = rows
        self._changed()
        self.refresh(layout=True)

    def _changed(self) -> None:
        self._version += 1
        self.refresh()

    def watch_mode(self) -> None:
        self._arrange()

    def visible_spans(self) -> list[Span]:
        return [s for row in self.rows for s in row.spans]

    @property
    def end(self) -> float:
        return max((row.max_ends[-1] for row in self.rows if row.max_ends), default=0.0)

    @property
    def start(self) -> float:
        return min((row.spans[0].start for row in self.rows if row.spans), default=0.0)

    # -- view ----------------------------------------------------------------------
    def home(self) -> None:
        end = self.end
        self.window = (min(0.0, self.start), end if end > 0 else 1.0)

    def zoom(self, factor: float) -> None:
        """Zoom by `factor` (> 1 zooms in) around the cursor."""
        lo, hi = self.window
        span = (hi - lo) / factor
        if span <= 1e-9:
            return
        centre = self.cursor if lo <= self.cursor <= hi else (lo + hi) / 2
        share = (centre - lo) / (hi - lo) if hi > lo else 0.5
        self.window = (centre - share * span, centre + (1 - share) * span)

    def pan(self, fraction: float) -> None:
        lo, hi = self.window
        shift = (hi - lo) * fraction
        self.window = (lo + shift, hi + shift)

    def show_cursor(self) -> None:
        """Pan so the cursor is inside the window."""
        lo, hi = self.window
        if not lo <= self.cursor <= hi:
            width = hi - lo
            self.window = (self.cursor - width / 2, self.cursor + width / 2)

    def watch_window(self) -> None:
        self.refresh()

    def watch_cursor(self) -> None:
        self.refresh()

    def get_content_height(self, container, viewport, width: int) -> int:
        return 1 + max(1, len(self.rows))

    # -- drawing ---------------------------------------------------------------------
    def _column_time(self, width: int) -> tuple[float, float]:
        lo, hi = self.window
        return lo, (hi - lo) / max(1, width)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        plot = max(1, width - LABEL_WIDTH)
        lo, step = self._column_time(plot)
        cursor_col = int((self.cursor - lo) / step) if step > 0 else -1
        key = (y, self._version, self.window, width, cursor_col, self.mode)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        if y == 0:
            strip = self._axis(plot, lo, step, cursor_col)
        elif y - 1 < len(self.rows):
            strip = self._row_strip(self.rows[y - 1], plot, lo, step, cursor_col)
        else:
            strip = Strip.blank(width)
        self._cache[key] = strip
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return strip

    def _axis(self, plot: int, lo: float, step: float, cursor_col: int) -> Strip:
        chars = [" "] * plot
        every = 16
        for col in range(0, plot, every):
            text = format_seconds(max(0.0, lo + col * step))
            text = "|" + text
            if col + len(text) <= plot:
                chars[col : col + len(text)] = list(text)
        segments = [Segment(f"{'t':<{LABEL_WIDTH}}", AXIS)]
        segments += _styled(chars, [AXIS] * plot, cursor_col)
        return Strip(segments)

    def _row_strip(
        self, row: GanttRow, plot: int, lo: float, step: float, cursor_col: int
    ) -> Strip:
        chars = ["·"] * plot
        styles = [IDLE] * plot
        owner: list[int | None] = [None] * plot
        for col in range(plot):
            t0 = lo + col * step
            index = row.span_in(t0, t0 + step)
            if index is not None:
                owner[col] = index
                span = row.spans[index]
                chars[col] = " "
                styles[col] = kind_style(span.kind, row.predicted)
        # Where one bar follows another with no gap, a thin edge tells them apart.
        for col in range(1, plot):
            if (
                owner[col] is not None
                and owner[col - 1] is not None
                and owner[col] != owner[col - 1]
            ):
                chars[col] = "▏"
        # Labels inside bars, where the bar is wide enough.
        col = 0
        while col < plot:
            index = owner[col]
            if index is None:
                col += 1
                continue
            end = col
            while end < plot and owner[end] == index:
                end += 1
            label = row.spans[index].label
            if label and end - col >= len(label) + 2:
                start = col + 1 + (end - col - 1 - len(label)) // 2
                chars[start : start + len(label)] = list(label)
            col = end
        if not row.predicted:
            for mark in self.marks:
                col = int((mark.t - lo) / step) if step > 0 else -1
                if 0 <= col < plot and (mark.rank is None or mark.rank == row.rank):
                    chars[col], styles[col] = MARK_GLYPHS[mark.kind]
        name_style = Style(color="#B0B0B0", dim=row.predicted, bold=not row.predicted)
        segments = [Segment(f"{row.label:<{LABEL_WIDTH}}"[:LABEL_WIDTH], name_style)]
        segments += _styled(chars, styles, cursor_col)
        return Strip(segments)


def _styled(chars: list[str], styles: list[Style], cursor_col: int) -> list[Segment]:
    """Runs of equal style as segments; the cursor column drawn on top."""
    if 0 <= cursor_col < len(chars):
        styles = list(styles)
        styles[cursor_col] = styles[cursor_col] + CURSOR
        chars = list(chars)
        if chars[cursor_col] in (" ", "·"):
            chars[cursor_col] = "│"
    segments = []
    start = 0
    for i in range(1, len(chars) + 1):
        if i == len(chars) or styles[i] is not styles[start]:
            segments.append(Segment("".join(chars[start:i]), styles[start]))
            start = i
    return segments
