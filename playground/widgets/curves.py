"""The Curves tab: a lesson's curves drawn in the terminal, as the HTML export draws them.

A `playground/` widget of docs/design.md. It renders every `Curve` of an Outcome
(scenarios.metrics.Curve: a lesson's `curves` hook or its `figures`) with
textual-plotext, knowing no lesson: the checkpoint-interval overhead with
Young's and Daly's optimum, DDP's speed-up over ranks, the step time against
the bucket cap, goodput against the request rate.

Choices, and why:
- plotext draws braille lines in the cell grid, so a curve keeps its shape in
  a side panel. Each vertical mark is a line on the plot; its name and value
  are written under the plot in the mark's colour, where no line crosses them
  (text inside the canvas ran off its edge and took plotext down); the title
  and the axes' names are lines above the plot that wrap (plotext drops a
  title wider than the plot and cuts the x label beside the y label).
- A log x axis is drawn as log10 of x with the ticks labelled in x's own unit:
  plotext's own log scale takes the log of its stored data again at every
  build, so the second paint of a curve below x = 10 raised a math domain
  error. Points a log axis cannot place (x ≤ 0) and absent values are left
  out, never drawn as 0.
- A curve that still cannot be drawn (plotext has its own limits, a panel too
  small) says why in its place: no widget takes the app down.

Imports: textual, textual-plotext and the pure metric types; never torch.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static
from textual_plotext import PlotextPlot

from playground.export.curves import x_text
from playground.i18n import t
from scenarios.metrics import Curve

LINE_COLORS = ("green", "gray", "cyan", "yellow")
MARK_COLORS = ("orange", "blue", "red", "magenta")
# Rich's names for the marks' colours, for their labels under the plot.
MARK_STYLES = ("dark_orange", "blue", "red", "magenta")
PLOT_HEIGHT = 20
MAX_TICKS = 5


def log_ticks(xs: list[float], base: float = 10.0) -> list[float]:
    """Where to label a log axis: the powers of `base` inside the data when it spans two
    or more (thinned to MAX_TICKS), else up to MAX_TICKS of the data's own x values."""
    low, high = min(xs), max(xs)
    first, last = math.floor(math.log(low, base)), math.ceil(math.log(high, base))
    decades = [base**k for k in range(first, last + 1) if low <= base**k <= high]
    if len(decades) >= 2:
        step = max(1, math.ceil(len(decades) / MAX_TICKS))
        return decades[::step]
    ordered = sorted(set(xs))
    if len(ordered) <= MAX_TICKS:
        return ordered
    picks = {round(i * (len(ordered) - 1) / (MAX_TICKS - 1)) for i in range(MAX_TICKS)}
    return [ordered[i] for i in sorted(picks)]


def placed(curve: Curve, x: float) -> float:
    """x where the plot draws it: its log10 on a log axis."""
    return math.log10(x) if curve.log_x else x


def can_place(curve: Curve, x: float | None) -> bool:
    return x is not None and math.isfinite(x) and (x > 0 or not curve.log_x)


class CurvePlot(PlotextPlot):
    """One curve's lines, and a vertical line per mark; a sentence if it cannot be drawn."""

    DEFAULT_CSS = f"CurvePlot {{ height: {PLOT_HEIGHT}; }}"

    def __init__(self, curve: Curve, language: str = "en") -> None:
        super().__init__()
        self.curve = curve
        self.language = language

    def said(self, english: str) -> str:
        """A curve's text in the learner's language."""
        return self.curve.text(english, self.language)

    def on_mount(self) -> None:
        curve, plt = self.curve, self.plt
        percent = curve.y_unit == "fraction"
        drawn_x: list[float] = []
        for i, (name, ys) in enumerate(curve.lines.items()):
            points = [
                (x, 100 * y if percent else y)
                for x, y in zip(curve.x, ys, strict=False)
                if can_place(curve, x) and y is not None and math.isfinite(y)
            ]
            if not points:
                continue
            xs, values = zip(*points, strict=True)
            drawn_x.extend(xs)
            plt.plot(
                [placed(curve, x) for x in xs],
                list(values),
                label=self.said(name),
                color=LINE_COLORS[i % len(LINE_COLORS)],
                marker="braille",
            )
        for i, (_, value) in enumerate(curve.marks.items()):
            if can_place(curve, value):
                plt.vline(placed(curve, value), MARK_COLORS[i % len(MARK_COLORS)])
        if curve.log_x and drawn_x:
            # A size reads best on powers of two (64 KiB, 1 MiB), anything else on ten.
            ticks = log_ticks(drawn_x, 2.0 if curve.x_unit == "bytes" else 10.0)
            plt.xticks([placed(curve, x) for x in ticks], [x_text(x, curve.x_unit) for x in ticks])

    def render(self) -> RenderResult:
        # plotext fails on some shapes and sizes (an IndexError placing a legend or a
        # label in a canvas too small): the curve says so in its place instead.
        try:
            return super().render()
        except Exception as exc:  # noqa: BLE001 - any drawing failure, shown, not raised
            reason = f"{type(exc).__name__}: {exc}"
            return Text(t("app.curve_not_drawn", self.language, title=self.said(self.curve.title),
                          reason=reason))  # fmt: skip


def axes_caption(curve: Curve, language: str) -> Text:
    """`↑ y label · → x label`, in the learner's language."""
    y = curve.text(curve.y_label, language) + (" (%)" if curve.y_unit == "fraction" else "")
    x = curve.text(curve.x_label, language) + (" (log)" if curve.log_x else "")
    return Text.assemble(("↑ ", "bold"), y, ("  → ", "bold"), x, style="dim")


def marks_legend(curve: Curve, language: str) -> Text:
    """The marks' names and values, one per line in its line's colour."""
    legend = Text()
    for i, (name, value) in enumerate(curve.marks.items()):
        if not can_place(curve, value):
            continue
        style = MARK_STYLES[i % len(MARK_STYLES)]
        legend.append("│ ", style=f"bold {style}")
        legend.append(f"{curve.text(name, language)} = {x_text(value, curve.x_unit)}\n")
    legend.rstrip()
    return legend


class CurveFigure(Vertical):
    """A curve's plot with its marks' legend under it."""

    DEFAULT_CSS = (
        "CurveFigure { height: auto; margin-bottom: 1; } CurveFigure Static { height: auto; }"
    )

    def __init__(self, curve: Curve, language: str) -> None:
        super().__init__()
        self.curve = curve
        self.language = language

    def compose(self) -> ComposeResult:
        yield Static(Text(self.curve.text(self.curve.title, self.language), style="bold"),
                     classes="title")  # fmt: skip
        yield Static(axes_caption(self.curve, self.language), classes="axes")
        yield CurvePlot(self.curve, self.language)
        legend = marks_legend(self.curve, self.language)
        if legend.plain:
            yield Static(legend, classes="marks")


class CurvesView(VerticalScroll):
    """Every curve of the outcome shown, or a line saying the lesson draws none."""

    def show(self, curves: list[Curve], language: str) -> None:
        self.remove_children()
        drawn = [c for c in curves if any(can_place(c, x) for x in c.x)]
        if not drawn:
            self.mount(Static(t("app.curves_none", language)))
            return
        self.mount_all(CurveFigure(c, language) for c in drawn)
