"""The Curves tab: a lesson's curves drawn in the terminal, as the HTML export draws them.

A `playground/` widget of DESIGN.md. It renders every `Curve` of an Outcome
(scenarios.metrics.Curve: a lesson's `curves` hook or its `figures`) with
textual-plotext, knowing no lesson: the checkpoint-interval overhead with
Young's and Daly's optimum, DDP's speed-up over ranks, the step time against
the bucket cap, goodput against the request rate.

Choices, and why:
- plotext draws braille lines in the cell grid, so a curve keeps its shape in
  a side panel; each vertical mark is a line with its name and value written
  beside it, stacked from the top.
- A fraction is drawn in percent, a log x axis where the curve asks for one,
  as in playground.export.curves; points a log axis cannot place (x ≤ 0) and
  absent values are left out, never drawn as 0.

Imports: textual, textual-plotext and the pure metric types; never torch.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Static
from textual_plotext import PlotextPlot

from playground.export.curves import x_text
from playground.i18n import t
from scenarios.metrics import Curve

LINE_COLORS = ("green", "gray", "cyan", "yellow")
MARK_COLORS = ("orange", "blue", "red", "magenta")
PLOT_HEIGHT = 22


class CurvePlot(PlotextPlot):
    """One curve: its lines, and a vertical line per mark."""

    DEFAULT_CSS = f"CurvePlot {{ height: {PLOT_HEIGHT}; }}"

    def __init__(self, curve: Curve, language: str = "en") -> None:
        super().__init__()
        self.curve = curve
        self.language = language

    def on_mount(self) -> None:
        curve, plt = self.curve, self.plt

        def said(english: str) -> str:  # in the learner's language
            return curve.text(english, self.language)

        percent = curve.y_unit == "fraction"
        plt.title(said(curve.title))
        plt.xlabel(said(curve.x_label))
        plt.ylabel(said(curve.y_label) + (" (%)" if percent else ""))
        if curve.log_x:
            plt.xscale("log")
        top = 0.0
        for i, (name, ys) in enumerate(curve.lines.items()):
            points = [
                (x, 100 * y if percent else y)
                for x, y in zip(curve.x, ys, strict=False)
                if y is not None and (x > 0 or not curve.log_x)
            ]
            if points:
                xs, values = zip(*points, strict=True)
                top = max(top, *values)
                plt.plot(
                    list(xs),
                    list(values),
                    label=said(name),
                    color=LINE_COLORS[i % len(LINE_COLORS)],
                    marker="braille",
                )
        for i, (name, value) in enumerate(curve.marks.items()):
            if value is not None and (value > 0 or not curve.log_x):
                color = MARK_COLORS[i % len(MARK_COLORS)]
                plt.vline(value, color)
                # Stacked from the top, as the HTML export labels its marks.
                label = f"{said(name)} = {x_text(value, curve.x_unit)}"
                plt.text(label, value, top * (0.95 - 0.12 * i), color=color)


class CurvesView(VerticalScroll):
    """Every curve of the outcome shown, or a line saying the lesson draws none."""

    def show(self, curves: list[Curve], language: str) -> None:
        self.remove_children()
        drawn = [c for c in curves if c.x]
        if not drawn:
            self.mount(Static(t("app.curves_none", language)))
            return
        self.mount_all(CurvePlot(c, language) for c in drawn)
