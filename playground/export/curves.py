"""A lesson's curves for the HTML export: y series over one x axis, labelled vertical lines.

In the "playground/ exports" box of docs/design.md: it draws every `Curve` of an
Outcome (scenarios.metrics.Curve; a lesson's `curves` hook), knowing no
lesson. The failure-resume lesson's overhead-versus-checkpoint-interval curve
is the first: its Monte-Carlo and exact expectation as two lines, Young's,
Daly's and the simulated optimum as vertical lines, so `predict
failure-resume --export` shows the trade-off without any run.

Choices, and why:
- A logarithmic x axis where the curve asks for one (`log_x`): the interval
  curve is flat near the optimum and steep on both sides.
- Fractions are shown in percent, the unit the formulas talk in.
- Each vertical line is labelled by a separate annotation, stacked: on a log
  axis an annotation's x is the log10 of the value, a shape's is the value
  itself (plotly.py #2580, #4012), so add_vline's own annotation would land
  elsewhere, and two close lines would overlap.
- A line with a single value (a run's measurement beside a predicted curve: the
  inference lesson's goodput at the run's rate) is drawn as a large marker.
- plotly.js is already on the page (the timeline figure embeds it), so each
  fragment is written without it; every string is escaped.

Imports: plotly and the pure metric types; never torch.
"""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from playground.export.fragment import fragment, new_figure
from runtime.sim.units import format_bytes, format_seconds
from scenarios.metrics import Curve

if TYPE_CHECKING:
    from playground.outcome import Outcome

LINE_COLORS = ("#59A14F", "#BAB0AC", "#76B7B2", "#EDC948")
POINT_COLORS = ("#E15759", "#4E79A7", "#B07AA1")  # single-value lines: dark, to stand out
MARK_STYLES = (
    ("#F28E2B", "dash"),
    ("#4E79A7", "dot"),
    ("#E15759", "solid"),
    ("#B07AA1", "dashdot"),
)


def x_text(value: float, unit: str = "s") -> str:
    """Whole seconds once they are many (1,099 s reads better than 1.1e+03 s); bytes
    with their unit (a bucket size: 4 MiB); a plain number as it is (a request rate)."""
    if unit == "bytes":
        return format_bytes(value)
    if unit != "s":
        return f"{value:,.4g}"
    return f"{value:,.0f} s" if value >= 100 else format_seconds(value)


def build_curve_figure(curve: Curve) -> go.Figure | None:
    if not curve.x:
        return None
    percent = curve.y_unit == "fraction"
    fig = new_figure()
    points = 0
    for i, (name, ys) in enumerate(curve.lines.items()):
        # A line with one value only (a run's measurement at its own x) is a point: a
        # line through one value draws nothing.
        point = sum(y is not None for y in ys) == 1
        color = LINE_COLORS[i % len(LINE_COLORS)]
        if point:
            color, points = POINT_COLORS[points % len(POINT_COLORS)], points + 1
        fig.add_trace(
            go.Scatter(
                x=curve.x,
                y=[None if y is None else (100 * y if percent else y) for y in ys],
                mode="markers+lines" if i == 0 else "markers" if point else "lines",
                name=escape(name),
                marker={
                    "size": 11 if point else 5,
                    "symbol": "diamond" if point else "circle",
                    "color": color,
                },
                line={"width": 1 if i == 0 else 1.5, "dash": "solid" if i == 0 else "dash"},
            )
        )
    for row, (name, value) in enumerate(curve.marks.items()):
        if value is None or value <= 0:
            continue
        color, dash = MARK_STYLES[row % len(MARK_STYLES)]
        fig.add_vline(x=value, line={"color": color, "dash": dash, "width": 2})
        fig.add_annotation(
            x=math.log10(value) if curve.log_x else value,
            xref="x",
            y=0.98 - 0.08 * row,
            yref="paper",
            xanchor="left",
            xshift=4,
            text=escape(f"{name}: {x_text(value, curve.x_unit)}"),
            showarrow=False,
            font={"color": color},
        )
        # An invisible point per line, so each has a legend entry.
        fig.add_trace(
            go.Scatter(
                x=[value],
                y=[None],
                mode="lines",
                name=escape(f"{name} = {x_text(value, curve.x_unit)}"),
                line={"color": color, "dash": dash, "width": 2},
            )
        )
    fig.update_xaxes(type="log" if curve.log_x else "linear", title_text=escape(curve.x_label))
    fig.update_yaxes(title_text=escape(curve.y_label + (" (%)" if percent else "")))
    fig.update_layout(
        title={"text": escape(curve.title)},
        height=460,
        margin={"l": 70, "r": 30, "t": 80, "b": 50},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def curves_html(outcome: Outcome) -> str:
    """Every curve as an HTML fragment (plotly.js already on the page), or ""."""
    parts = []
    for curve in outcome.curves:
        figure = build_curve_figure(curve)
        if figure is not None:
            parts.append(fragment(figure))
    return "".join(parts)
