"""The checkpoint-interval curve for the HTML export: overhead versus interval, with
Young's and Daly's intervals and the simulated optimum marked.

Lesson 3's second half (scenarios.failure_resume) in the "playground/ exports"
box of DESIGN.md. It draws what the scenario's metrics carry in
`overhead_curve` (runtime.checkpoint_interval's Monte-Carlo and the exact
expectation of the same model), so `predict failure-resume --export` shows
the trade-off without any run; outcomes without that metric get no figure.

Choices, and why:
- The interval axis is logarithmic: the curve is flat near the optimum and
  steep on both sides, and the grid is geometric.
- Overhead is shown in percent of the useful work, the unit the formulas talk in.
- Vertical lines, each labelled, for Young, Daly and the simulated optimum: the
  lesson is that the last two coincide and the first is a little further out.
- plotly.js is already on the page (the timeline figure embeds it), so this
  fragment is written without it; strings are escaped as in the timeline.

Imports: plotly and runtime's pure part; never torch.
"""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from runtime.units import format_seconds

if TYPE_CHECKING:
    from playground.session import Outcome

LINES = (
    ("young_interval_s", "Young √(2CM)", "#F28E2B", "dash"),
    ("daly_interval_s", "Daly", "#4E79A7", "dot"),
    ("simulated_optimal_interval_s", "simulated optimum", "#E15759", "solid"),
)


def _seconds(value: float) -> str:
    """Whole seconds once they are many (1,099 s reads better than 1.1e+03 s)."""
    return f"{value:,.0f} s" if value >= 100 else format_seconds(value)


def build_interval_figure(metrics: dict[str, Any]) -> go.Figure | None:
    curve = metrics.get("overhead_curve")
    if not isinstance(curve, dict) or not curve.get("interval_s"):
        return None
    taus = curve["interval_s"]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=taus,
            y=[100 * v for v in curve["overhead_simulated_fraction"]],
            mode="markers+lines",
            name="Monte-Carlo (exponential failures)",
            marker={"size": 5, "color": "#59A14F"},
            line={"width": 1},
            hovertemplate="τ = %{x:.4g} s<br>overhead %{y:.3f} %<extra>simulated</extra>",
        )
    )
    if curve.get("overhead_expected_fraction"):
        fig.add_trace(
            go.Scatter(
                x=taus,
                y=[100 * v for v in curve["overhead_expected_fraction"]],
                mode="lines",
                name="expected (exact, same model)",
                line={"width": 1.5, "color": "#BAB0AC", "dash": "dash"},
                hovertemplate="τ = %{x:.4g} s<br>overhead %{y:.3f} %<extra>expected</extra>",
            )
        )
    for row, (key, name, color, dash) in enumerate(LINES):
        value = metrics.get(key)
        if value is None:
            continue
        fig.add_vline(x=value, line={"color": color, "dash": dash, "width": 2})
        # The label as a separate annotation: on a log axis an annotation's x is the
        # log10 of the value, a shape's is the value itself (plotly.py #2580, #4012),
        # so add_vline's own annotation would land elsewhere.
        # Stacked one under the other: Daly's line and the simulated optimum nearly touch.
        fig.add_annotation(
            x=math.log10(value),
            xref="x",
            y=0.98 - 0.08 * row,
            yref="paper",
            xanchor="left",
            xshift=4,
            text=escape(f"{name}: {_seconds(value)}"),
            showarrow=False,
            font={"color": color},
        )
        # An invisible point per line, so each has a legend entry and a hover.
        fig.add_trace(
            go.Scatter(
                x=[value],
                y=[None],
                mode="lines",
                name=escape(f"{name} = {_seconds(value)}"),
                line={"color": color, "dash": dash, "width": 2},
            )
        )
    mtbf, cost = metrics.get("mtbf_s"), metrics.get("save_cost_s")
    title = "How often to checkpoint: overhead vs interval"
    if mtbf is not None and cost is not None:
        title += escape(f" (M = {_seconds(mtbf)}, C = {_seconds(cost)})")
    fig.update_xaxes(type="log", title_text="checkpoint interval τ (s, compute between saves)")
    fig.update_yaxes(title_text="overhead (% of the useful work)")
    fig.update_layout(
        title={"text": title},
        height=460,
        template="plotly_white",
        margin={"l": 70, "r": 30, "t": 80, "b": 50},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def interval_html(outcome: Outcome) -> str:
    """The figure as an HTML fragment (plotly.js already on the page), or ""."""
    figure = build_interval_figure(outcome.metrics)
    if figure is None:
        return ""
    return figure.to_html(
        full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True}
    )
