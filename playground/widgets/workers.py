"""The Workers tab: one row per rank, sparklines of its steps, the median row, the straggler.

A `playground/` widget of docs/design.md, drawn with the Line API (cached Strips,
like playground.widgets.memory). The screen hands it what to show (attributes
down): a run's runtime.engine.live_workers.LiveWorkers while it streams its records
(`show_live`), an Outcome when a run ends, a saved run is opened or a
prediction is made (`show_outcome`: measured workers, else predicted ones). Each rank's row has two sparklines, its
step time and its busy fraction per step (the last steps that fit), then its
figures per step on average (playground.workers_text); the straggler's row is
marked and coloured, and the last line says who straggled and why.

Imports: textual, rich and the pure report types; never torch.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from playground.i18n import t
from playground.worker_figures import workers_of
from playground.workers_text import RankRow, rank_rows, sparkline, straggler_sentence
from runtime.engine.live_workers import LiveWorkers
from runtime.engine.stragglers import WorkersReport
from scenarios.metrics import find

if TYPE_CHECKING:
    from playground.outcome import Outcome

LABEL = 5  # "r12 ⚠"
FIGURES = ("step", "busy", "wait")  # the figures beside the sparklines
FIGURE_WIDTH = 8
# A prediction's workers are listed up to this many ranks.
MAX_RANKS = 64
STRAGGLER = Style(color="#E15759", bold=True)
MUTED = Style(color="#909090")
SPARK = Style(color="#4E79A7")
BUSY = Style(color="#59A14F")


class WorkersView(Widget):
    """Per-rank rows of a run's workers report (or a note when there is none)."""

    DEFAULT_CSS = """
    WorkersView { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.report: WorkersReport | None = None
        self.language = "en"
        self.note = ""  # shown when there is no report (or above it)
        self._lines: list[tuple[str, RankRow | str | None]] = []
        self._width = -1  # the width `_lines` was laid out for
        self._cache: dict[tuple[int, int], Strip] = {}

    def show(self, report: WorkersReport | None, language: str, note: str = "") -> None:
        """Draw `report` (None: only the note), headed by `note`."""
        self.report, self.language, self.note = report, language, note
        self._width = -1
        self._cache = {}
        self.refresh(layout=True)

    def _layout(self, width: int) -> list[tuple[str, RankRow | str | None]]:
        """The lines at this width: the verdict wraps, the rest is cropped."""
        if width != self._width:
            report, lines = self.report, []
            if self.note:
                lines.append(("note", self.note))
            if report is not None and report.ranks:
                lines.append(("header", None))
                lines += [("rank", row) for row in rank_rows(report)]
                sentence = straggler_sentence(report, self.language)
                lines += [("verdict", part) for part in textwrap.wrap(sentence, max(10, width))]
            self._lines, self._width = lines, width
        return self._lines

    def show_live(self, live: LiveWorkers, language: str) -> None:
        """A run's figures so far, as its records stream in."""
        report = live.report()
        self.show(report, language, t("workers.live", language, steps=sum(report.closed)))

    def show_outcome(self, outcome: Outcome, language: str) -> None:
        """A finished or opened run's measured workers, else a prediction's (small ones)."""
        world = outcome.params.world_size
        if outcome.workers is not None:
            self.show(outcome.workers, language, t("workers.measured", language))
        elif find(outcome.metrics, "lumped") is not None:
            self.show(None, language, t("workers.empty", language))
        elif world > MAX_RANKS:
            self.show(None, language, t("workers.too_many", language, n=world))
        else:
            predicted = workers_of(outcome, outcome.predicted)
            self.show(predicted, language, t("workers.predicted", language))

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(self._layout(width)))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = (y, width)
        if key not in self._cache:
            self._cache[key] = self._line(y, width)
        return self._cache[key]

    def _spark_width(self, width: int) -> int:
        return max(3, (width - LABEL - FIGURE_WIDTH * len(FIGURES) - 2) // 2)

    def _line(self, y: int, width: int) -> Strip:
        lines = self._layout(width)
        if y >= len(lines):
            return Strip.blank(width)
        kind, row = lines[y]
        report, language = self.report, self.language
        if kind == "note":
            return Strip([Segment(str(row), MUTED)]).crop(0, width)
        assert report is not None
        if kind == "verdict":
            style = STRAGGLER if report.overall.straggler is not None else MUTED
            return Strip([Segment(str(row), style)]).crop(0, width)
        spark = self._spark_width(width)
        if kind == "header":
            titles = [t(f"workers.{name}", language) for name in FIGURES]
            text = (
                " " * LABEL
                + f"{t('workers.step_spark', language)[:spark]:<{spark}} "
                + f"{t('workers.busy_spark', language)[:spark]:<{spark}} "
                + "".join(f"{title:>{FIGURE_WIDTH}}" for title in titles)
            )
            return Strip([Segment(text, MUTED)]).crop(0, width)
        assert isinstance(row, RankRow)
        return Strip(self._rank_segments(row, report, spark)).crop(0, width)

    def _rank_segments(self, row: RankRow, report: WorkersReport, spark: int) -> list[Segment]:
        figures = "".join(f"{v:>{FIGURE_WIDTH}}" for v in (row.step, row.busy, row.wait))
        if row.rank is None:  # the median row: no sparklines of its own
            name = t("workers.median_short", self.language)[: LABEL - 1]
            blank = " " * (2 * spark + 2)
            return [Segment(f"{name:<{LABEL}}", MUTED), Segment(blank), Segment(figures, MUTED)]
        steps = report.per_rank.get(row.rank, [])
        top = max((s.step_s for r in report.per_rank.values() for s in r if s), default=0.0)
        step_line = sparkline([s.step_s if s else None for s in steps], spark, top)
        busy_line = sparkline([s.busy if s else None for s in steps], spark, 1.0)
        label = f"r{row.rank}" + (" ⚠" if row.straggler else "")
        style = STRAGGLER if row.straggler else Style(bold=True)
        return [
            Segment(f"{label:<{LABEL}}", style),
            Segment(f"{step_line:<{spark}} ", STRAGGLER if row.straggler else SPARK),
            Segment(f"{busy_line:<{spark}} ", BUSY),
            Segment(figures, style if row.straggler else Style()),
        ]
