"""The Gantt chart: one row per rank, a bar per Span, measured beside predicted, and its cursor.

A `playground/` widget of docs/design.md, drawn with Textual's Line API (the rows
themselves are drawn by playground.widgets.gantt_draw): every terminal row is a
`Strip` kept in an LRU cache keyed by what it depends on (data version, time
window, width, cursor, mode), so moving the cursor redraws only what changed.

- Rows: one per rank; in "both" mode the predicted row sits under the measured
  one (`r0 ·p`). Idle time is drawn as dim dots, so the bubble is visible. A
  collective that overlaps the rank's other spans (a non-blocking all-reduce, a
  DDP bucket under backward) goes on a communication lane beneath the rank's
  row (`r0 ~c`, `r0 ~pc`), so the overlap is visible rather than hidden.
- A time window (`zoom`, `pan`, `home`) and a time cursor that steps from
  event to event (`step`), jumps to either end (`jump`) and plays as an
  animation (`toggle_play`, driven by `advance`, which tests call directly
  instead of waiting on wall time). Every move posts `CursorMoved`, so the
  screen updates the narrative and the ring ("messages up").
- Live runs: `add_spans` appends Spans as they arrive from the ranks.
- Marks of the measured run (a failure ✕, its detection !, a restart ↻, a
  checkpoint ◆, a skipped step ⊘, a grown loss scale ↑) as one glyph in the rows
  of the rank they concern.
- Several series in one run (GPipe then 1F1B; ZeRO's stages; inference's modes):
  a divider where each next one starts, and their names on the time axis.

Imports: textual, runtime.sim.trace and runtime.sim.collective_kinds; never torch.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from playground.widgets.gantt_draw import (
    LABEL_WIDTH,
    MARK_GLYPHS,
    GanttRow,
    axis_strip,
    row_strip,
    series_starts,
)
from runtime.sim.collective_kinds import overlaps
from runtime.sim.trace import Mark, Span, Timeline

MODES = ("both", "measured", "predicted")
CACHE_SIZE = 1024
PLAY_FPS = 20
PLAY_SECONDS = 10.0  # one pass over the whole run while playing


class GanttView(Widget):
    """Ranks × time; measured, predicted or both; a cursor that steps and plays."""

    DEFAULT_CSS = """
    GanttView { height: auto; min-height: 3; }
    """

    cursor: reactive[float] = reactive(0.0, layout=False)
    mode: reactive[str] = reactive("both")
    window: reactive[tuple[float, float]] = reactive((0.0, 1.0))

    @dataclass
    class CursorMoved(Message):
        """The cursor moved (a step, a jump, a frame of play, new timelines)."""

        cursor: float

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[GanttRow] = []
        self._measured: dict[int, GanttRow] = {}
        self._predicted: dict[int, GanttRow] = {}
        # Communication lanes: collectives that overlap the rank's row (see the docstring).
        self._comm: dict[int, GanttRow] = {}
        self._comm_predicted: dict[int, GanttRow] = {}
        self.marks: list[Mark] = []
        # Per row kind (predicted or not): where each series starts, when there are several.
        self.series: dict[bool, list[tuple[float, str]]] = {}
        self.events: list[float] = []  # span boundaries of the visible rows, sorted
        self.playing = False
        self._timer: Timer | None = None
        self._version = 0
        self._cache: OrderedDict[tuple, Strip] = OrderedDict()
        self.follow = True  # a live run widens the window as spans arrive

    # -- data ---------------------------------------------------------------------
    def set_timelines(self, measured: Timeline | None, predicted: Timeline | None) -> None:
        self._measured, self._predicted = {}, {}
        self._comm, self._comm_predicted = {}, {}
        self.marks = [m for m in (measured.marks if measured else []) if m.kind in MARK_GLYPHS]

        # At equal starts, the rank's own work first: a collective launched as it starts
        # overlaps it and goes on the communication lane.
        def order(span: Span) -> tuple[float, bool]:
            return (span.start, overlaps(span.kind))

        for span in sorted(predicted.spans if predicted else [], key=order):
            self._add(span, True)
        for span in sorted(measured.spans if measured else [], key=order):
            self._add(span, False)
        self._arrange()
        self.home()

    def add_spans(self, spans: Iterable[Span]) -> None:
        """Spans of a live run, as they arrive."""
        rows = len(self._measured) + len(self._comm)
        for span in spans:
            self._add(span, False)
        if len(self._measured) + len(self._comm) != rows:  # a new rank, or a new lane
            self._arrange()
        self._changed()
        if self.follow:
            end = self.end
            lo, hi = self.window
            if end > hi:
                self.window = (lo, max(end, hi * 1.25))

    def _add(self, span: Span, predicted: bool) -> None:
        row = self._row(span.rank, predicted)
        # Kinds that may run beside a rank's own work (runtime.sim.collective_kinds).
        if overlaps(span.kind) and row.max_ends and row.max_ends[-1] > span.start:
            lanes = self._comm_predicted if predicted else self._comm
            if span.rank not in lanes:
                label = f"r{span.rank} ~" + ("pc" if predicted else "c")
                lanes[span.rank] = GanttRow(label, span.rank, predicted)
            row = lanes[span.rank]
        row.add(span)

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
                rows += [self._comm[rank]] if rank in self._comm else []
            if self.mode in ("both", "predicted") and rank in self._predicted:
                rows.append(self._predicted[rank])
                rows += [self._comm_predicted[rank]] if rank in self._comm_predicted else []
            if self.mode == "measured" and rank not in self._measured and rank in self._predicted:
                rows.append(self._predicted[rank])  # nothing measured yet: show the plan
        self.rows = rows
        self.series = {
            p: series_starts([r for r in rows if r.predicted is p]) for p in (False, True)
        }
        self.events = sorted({t for row in rows for s in row.spans for t in (s.start, s.end)})
        self._changed()
        self.refresh(layout=True)

    def _changed(self) -> None:
        self._version += 1
        self.refresh()

    def watch_mode(self) -> None:
        self._arrange()

    def next_mode(self) -> None:
        """Both, measured only, predicted only, and round again."""
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]

    @property
    def end(self) -> float:
        return max((row.max_ends[-1] for row in self.rows if row.max_ends), default=0.0)

    @property
    def start(self) -> float:
        return min((row.spans[0].start for row in self.rows if row.spans), default=0.0)

    def span_at_cursor(self) -> Span | None:
        """The span under the cursor on the lowest rank that has one (measured first)."""
        best: tuple[bool, Span] | None = None
        for row in self.rows:
            span = row.span_at(self.cursor)
            if span is None:
                continue
            if best is None or (row.predicted, span.rank) < (best[0], best[1].rank):
                best = (row.predicted, span)
        return best[1] if best else None

    # -- the cursor ------------------------------------------------------------------
    def step(self, direction: int) -> None:
        """To the next (or previous) span boundary."""
        if not self.events:
            return
        if direction > 0:
            i = bisect_right(self.events, self.cursor + 1e-12)
            self.cursor = self.events[min(i, len(self.events) - 1)]
        else:
            i = bisect_left(self.events, self.cursor - 1e-12) - 1
            self.cursor = self.events[max(i, 0)]
        self.show_cursor()

    def jump(self, to_end: bool) -> None:
        self.home()
        self.cursor = self.end if to_end else self.start

    def toggle_play(self) -> None:
        self.playing = not self.playing
        if self.playing and self._timer is None:
            self._timer = self.set_interval(1 / PLAY_FPS, self.advance)
        elif not self.playing and self._timer is not None:
            self._timer.stop()
            self._timer = None

    def advance(self, frames: int = 1) -> None:
        """Move the cursor forward as `frames` animation frames would (the clock)."""
        length = max(self.end - self.start, 1e-9)
        cursor = self.cursor + frames * length / (PLAY_SECONDS * PLAY_FPS)
        if cursor >= self.end:
            cursor = self.end
            if self.playing:
                self.toggle_play()
        self.cursor = cursor
        self.show_cursor()

    def watch_cursor(self, cursor: float) -> None:
        self.refresh()
        self.post_message(self.CursorMoved(cursor))

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

    def get_content_height(self, container, viewport, width: int) -> int:
        return 1 + max(1, len(self.rows))

    # -- drawing ---------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.size.width
        plot = max(1, width - LABEL_WIDTH)
        lo, hi = self.window
        step = (hi - lo) / plot
        cursor_col = int((self.cursor - lo) / step) if step > 0 else -1
        key = (y, self._version, self.window, width, cursor_col, self.mode)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        if y == 0:
            # The measured rows' series named on the axis (the predicted ones' if none ran).
            named = self.series.get(False) or self.series.get(True, [])
            strip = axis_strip(plot, lo, step, cursor_col, named)
        elif y - 1 < len(self.rows):
            row = self.rows[y - 1]
            dividers = [t for t, _ in self.series.get(row.predicted, [])[1:]]
            strip = row_strip(row, self.marks, plot, lo, step, cursor_col, dividers)
        else:
            strip = Strip.blank(width)
        self._cache[key] = strip
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return strip
