"""Drawing a Gantt row: spans, idle dots, labels, marks and the cursor as one Strip.

A warm-up step's bars are hatched (░), so a learner sees the iterations a lesson runs
before its timed ones, and that they are left out of its times.

The Line API half of the Gantt chart (playground.widgets.gantt holds the
widget, its time window and its cursor). A row is one rank's spans, measured
or predicted; finding the bar under each column is a binary search in the
row's spans (the spans of one rank do not overlap, so their running maximum of
ends is sorted), so a frame costs columns × rows × log(spans), whatever the
number of spans: 100k spans redraw in a few milliseconds
(benchmarks/app_gantt.py).

Imports: rich, textual's Strip and runtime's pure part; never torch.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cache

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from playground.palette import KIND_COLORS, OTHER_COLOR
from runtime.engine.workers import WARMUP_SERIES
from runtime.sim.trace import Mark, Span
from runtime.sim.units import format_seconds

LABEL_WIDTH = 7
MODES = ("both", "measured", "predicted")
IDLE = Style(color="#5A5A5A")
CURSOR = Style(bgcolor="#FFFFFF", color="#000000", bold=True)
AXIS = Style(color="#9A9A9A")
# Where one series (a schedule, a ZeRO stage, an inference mode) hands over to the next.
DIVIDER = Style(color="#FFFFFF", bold=True)
CACHE_SIZE = 1024
# A warm-up step's bars (runtime.engine.workers.WARMUP_SERIES) are hatched: run and
# predicted like the others, left out of the lesson's times.
WARMUP_FILL = "░"
# Marks (failures, restarts, checkpoints) as one glyph in the rows they concern;
# per-step marks are left out: the bars already show the steps.
MARK_GLYPHS = {
    "failure": ("✕", Style(color="#FF5555", bold=True, bgcolor="#000000")),
    "detection": ("!", Style(color="#FFD75F", bold=True, bgcolor="#000000")),
    "restart": ("↻", Style(color="#5FD7FF", bold=True, bgcolor="#000000")),
    "resume": ("▶", Style(color="#5FD7FF", bold=True, bgcolor="#000000")),
    "checkpoint": ("◆", Style(color="#D7AF87", bold=True)),
    "lost": ("…", Style(color="#FF8787", bold=True)),
    # Mixed precision: a step the loss scaler skipped (inf/NaN), a scale that grew.
    "skip": ("⊘", Style(color="#FF5555", bold=True)),
    "scale": ("↑", Style(color="#FFD75F", bold=True)),
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

    def span_at(self, t: float) -> Span | None:
        """The span with start <= t < end, if any."""
        i = bisect_right(self.max_ends, t)
        while i < len(self.spans) and self.spans[i].start <= t:
            if t < self.spans[i].end:
                return self.spans[i]
            i += 1
        return None

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


def series_starts(rows: list[GanttRow]) -> list[tuple[float, str]]:
    """(first start, series) of each series in the rows, in time order; empty unless two
    or more run (GPipe then 1F1B, ZeRO's stages one after another). Barriers are left
    out: a series begins with its own work."""
    starts: dict[str, float] = {}
    for row in rows:
        for span in row.spans:
            if span.series is not None and span.kind != "barrier":
                starts[span.series] = min(span.start, starts.get(span.series, span.start))
    return sorted((t, name) for name, t in starts.items()) if len(starts) > 1 else []


def column(t: float, lo: float, step: float) -> int:
    return int((t - lo) / step) if step > 0 else -1


def axis_strip(
    plot: int, lo: float, step: float, cursor_col: int, series: list[tuple[float, str]] = ()
) -> Strip:
    """The time axis: a tick every 16 columns; where several series run one after the
    other, each one's name at its start (over the ticks: which one is which matters more)."""
    chars = [" "] * plot
    styles = [AXIS] * plot
    every = 16
    for col in range(0, plot, every):
        text = format_seconds(max(0.0, lo + col * step))
        text = "|" + text
        if col + len(text) <= plot:
            chars[col : col + len(text)] = list(text)
    for t, name in series:
        col = max(0, column(t, lo, step))
        text = list("┃" + name)[: max(0, plot - col)]
        if col < plot:
            chars[col : col + len(text)] = text
            styles[col : col + len(text)] = [DIVIDER] * len(text)
    segments = [Segment(f"{'t':<{LABEL_WIDTH}}", AXIS)]
    segments += styled(chars, styles, cursor_col)
    return Strip(segments)


def row_strip(
    row: GanttRow,
    marks: list[Mark],
    plot: int,
    lo: float,
    step: float,
    cursor_col: int,
    dividers: list[float] = (),
) -> Strip:
    """One rank's row: a bar per span (label inside when it fits), idle dots, marks, and
    a divider where the next series starts."""
    chars = ["·"] * plot
    styles = [IDLE] * plot
    owner: list[int | None] = [None] * plot
    for col in range(plot):
        t0 = lo + col * step
        index = row.span_in(t0, t0 + step)
        if index is not None:
            owner[col] = index
            span = row.spans[index]
            chars[col] = WARMUP_FILL if span.series == WARMUP_SERIES else " "
            styles[col] = kind_style(span.kind, row.predicted)
    # Where one bar follows another with no gap, a thin edge tells them apart.
    for col in range(1, plot):
        if owner[col] is not None and owner[col - 1] is not None and owner[col] != owner[col - 1]:
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
    for t in dividers:
        col = column(t, lo, step)
        if 0 <= col < plot:
            chars[col], styles[col] = "┃", DIVIDER
    if not row.predicted:
        for mark in marks:
            col = column(mark.t, lo, step)
            if 0 <= col < plot and (mark.rank is None or mark.rank == row.rank):
                chars[col], styles[col] = MARK_GLYPHS[mark.kind]
    name_style = Style(color="#B0B0B0", dim=row.predicted, bold=not row.predicted)
    segments = [Segment(f"{row.label:<{LABEL_WIDTH}}"[:LABEL_WIDTH], name_style)]
    segments += styled(chars, styles, cursor_col)
    return Strip(segments)


def styled(chars: list[str], styles: list[Style], cursor_col: int) -> list[Segment]:
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
