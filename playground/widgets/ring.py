"""The ring: ranks on a circle, and the chunk each one sends and receives at the cursor.

A `playground/` widget of docs/design.md (Line API: `render_line` returns cached
Strips). Lesson 1's picture: for the step of the ring all-reduce under the
time cursor, each rank shows `→cK` (the chunk it sends to its right
neighbour) and `←cJ` (the one it receives from its left), and the title names
the phase (reduce-scatter adds what arrives, all-gather only copies it) and
the step within it.

It reads the ring steps' Actions (runtime.engine.collectives puts send_chunk and
recv_chunk in their args) and a Timeline; the cursor picks, on each rank, the
step that started last before it.

Imports: textual, rich and runtime's pure part; never torch.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from runtime.sim.program import Action
from runtime.sim.trace import Span, Timeline

PHASE_COLORS = {"reduce-scatter": "#F28E2B", "all-gather": "#59A14F"}
RING = Style(color="#5A5A5A")
RANK = Style(bold=True, color="#FFFFFF")
HEIGHT = 11


class RingView(Widget):
    """n ranks around a ring; per rank, the chunk sent and received at the cursor."""

    DEFAULT_CSS = """
    RingView { height: 11; }
    """

    cursor: reactive[float] = reactive(0.0)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.world = 0
        self.actions: dict[str, Action] = {}
        self.steps: dict[int, list[Span]] = {}  # rank -> its ring steps, by start
        self._starts: dict[int, list[float]] = {}
        self.titles: dict[str, str] = {}  # phase -> learner-facing name
        self._lines: list[Strip] | None = None
        self._key: tuple | None = None

    def set_data(
        self,
        world: int,
        actions: Iterable[Action],
        timeline: Timeline | None,
        titles: dict[str, str],
    ) -> None:
        self.world = world
        self.actions = {a.id: a for a in actions if a.kind == "sendrecv"}
        self.titles = titles
        self.steps = {}
        for span in sorted(timeline.spans if timeline else [], key=lambda s: s.start):
            if span.action_id in self.actions:
                self.steps.setdefault(span.rank, []).append(span)
        self._starts = {r: [s.start for s in spans] for r, spans in self.steps.items()}
        self._key = None
        self.refresh()

    def watch_cursor(self) -> None:
        self.refresh()

    def current(self) -> dict[int, Action]:
        """Per rank, the ring step that started last at or before the cursor."""
        out = {}
        for rank, spans in self.steps.items():
            i = bisect_right(self._starts[rank], self.cursor) - 1
            if i >= 0:
                out[rank] = self.actions[spans[i].action_id or ""]
        return out

    def caption(self, now: dict[int, Action]) -> tuple[str, Style]:
        if not now:
            return ("ring: —", RING)
        action = now.get(0) or next(iter(now.values()))
        phase = action.phase or ""
        label = action.label.split(" c")[0]  # "RS 2/3"
        name = self.titles.get(phase, phase)
        return (f"{name} · {label}", Style(bold=True, color=PHASE_COLORS.get(phase, "#FFFFFF")))

    def _build(self, width: int) -> list[Strip]:
        now = self.current()
        grid = [[" "] * width for _ in range(HEIGHT)]
        styles: list[list[Style | None]] = [[None] * width for _ in range(HEIGHT)]

        def put(row: int, col: int, text: str, style: Style) -> None:
            for i, ch in enumerate(text):
                if 0 <= row < HEIGHT and 0 <= col + i < width:
                    grid[row][col + i] = ch
                    styles[row][col + i] = style

        caption, caption_style = self.caption(now)
        put(0, max(0, (width - len(caption)) // 2), caption, caption_style)
        n = max(1, self.world)
        cx, cy = width / 2, (HEIGHT + 1) / 2
        rx, ry = max(6.0, width / 2 - 9), (HEIGHT - 3) / 2
        for k in range(96):  # the ring itself
            angle = 2 * math.pi * k / 96
            put(round(cy + ry * math.sin(angle)), round(cx + rx * math.cos(angle)), "·", RING)
        put(round(cy), round(cx) - 1, "↻", RING)
        for rank in range(self.world):
            angle = -math.pi / 2 + 2 * math.pi * rank / n  # rank 0 on top, clockwise
            row = round(cy + ry * math.sin(angle))
            col = round(cx + rx * math.cos(angle))
            action = now.get(rank)
            color = PHASE_COLORS.get(action.phase or "", "#FFFFFF") if action else "#9A9A9A"
            node = f" r{rank} "
            put(row, col - len(node) // 2, node, RANK + Style(bgcolor=color, color="#000000"))
            if action is not None:
                moves = f"→c{action.arg('send_chunk')} ←c{action.arg('recv_chunk')}"
                below = row + 1 if row < cy else row - 1 if row > cy else row + 1
                put(below, col - len(moves) // 2, moves, Style(color=color))
        strips = []
        for row in range(HEIGHT):
            segments = []
            start = 0
            for i in range(1, width + 1):
                if i == width or styles[row][i] is not styles[row][start]:
                    text = "".join(grid[row][start:i])
                    segments.append(Segment(text, styles[row][start] or Style()))
                    start = i
            strips.append(Strip(segments))
        return strips

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        now = self.current()
        key = (width, tuple(sorted((r, a.id) for r, a in now.items())), self.world, id(self.steps))
        if key != self._key or self._lines is None:
            self._lines = self._build(width)
            self._key = key
        return self._lines[y] if y < len(self._lines) else Strip.blank(width)
