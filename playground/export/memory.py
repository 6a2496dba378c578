"""Memory bars for the HTML export: per rank, bytes stacked by category, measured
beside predicted, one panel per variant (ZeRO stage, pipeline schedule) side by side.

The HTML twin of the app's memory widget (playground.widgets.memory), in the
"playground/ exports" box of docs/design.md. It draws playground.memory_rows of the
lesson's typed metrics, so the figure and the app show the same bars from the
same numbers; lessons without memory metrics get no figure.

Choices, and why:
- One bar trace per (panel, category), not per bar: the legend then has one
  entry per category (grouped across panels) and a click hides that category
  in every panel.
- Bars are vertical, measured and predicted of one rank next to each other
  ("r0 meas", "r0 pred"), predicted ones paler, every bar labelled with its
  total; the exact byte count is in the hover.
- The same escaping rule as playground.export.html: every string that comes
  from a scenario or its params goes through `html.escape`.
- plotly.js is already on the page (the timeline figure embeds it), so this
  fragment is written without it.

Imports: plotly and runtime's pure part; never torch.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.export.fragment import fragment, new_figure
from playground.memory_rows import memory_rows as rows_from_metrics
from playground.palette import CATEGORY_COLORS, OTHER_COLOR
from runtime.sim.units import format_bytes

if TYPE_CHECKING:
    from playground.outcome import Outcome

CATEGORY_ORDER = tuple(CATEGORY_COLORS)
PREDICTED_OPACITY = 0.55

Row = tuple[str, int, bool, dict[str, float]]


def memory_rows(outcome: Outcome) -> list[Row]:
    return [
        (row.group, row.rank, row.predicted, row.bytes_by_category)
        for row in rows_from_metrics(outcome.metrics)
    ]


def _bar_label(rank: int, predicted: bool) -> str:
    return f"r{rank} {'pred' if predicted else 'meas'}"


def build_memory_figure(outcome: Outcome) -> go.Figure | None:
    """Stacked bars per rank and category, one panel per group; None without rows."""
    rows = memory_rows(outcome)
    if not rows:
        return None
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[row[0]].append(row)
    names = list(groups)
    categories = [c for c in CATEGORY_ORDER if any(c in row[3] for row in rows)]
    categories += sorted({c for row in rows for c in row[3]} - set(categories))
    fig = make_subplots(
        figure=new_figure(),
        rows=1,
        cols=len(names),
        shared_yaxes=True,
        horizontal_spacing=min(0.04, 0.3 / max(1, len(names))),
        subplot_titles=[escape(name) for name in names],
    )
    for col, name in enumerate(names, 1):
        bars = groups[name]
        labels = [_bar_label(rank, predicted) for _, rank, predicted, _ in bars]
        for category in categories:
            values = [float(by.get(category, 0.0)) for _, _, _, by in bars]
            fig.add_trace(
                go.Bar(
                    name=escape(category),
                    legendgroup=escape(category),  # escaped like the name it groups
                    showlegend=col == 1,
                    x=labels,
                    y=values,
                    marker={
                        "color": CATEGORY_COLORS.get(category, OTHER_COLOR),
                        "opacity": [
                            PREDICTED_OPACITY if predicted else 1.0 for _, _, predicted, _ in bars
                        ],
                        "line": {"width": 0.5, "color": "white"},
                    },
                    hovertext=[
                        f"<b>{escape(name)}</b> · {escape(label)}<br>"
                        f"{escape(category)}: {format_bytes(value)} ({value:,.0f} B)"
                        for label, value in zip(labels, values, strict=True)
                    ],
                    hovertemplate="%{hovertext}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        totals = [sum(by.values()) for _, _, _, by in bars]
        # The total on top of each stack: an invisible scatter carries the text.
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=totals,
                mode="text",
                text=[format_bytes(total) for total in totals],
                textposition="top center",
                textfont={"size": 10},
                showlegend=False,
                hoverinfo="skip",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(tickangle=-60, row=1, col=col)
    title = "memory per rank at its peak, by category: measured (solid) beside predicted (pale)"
    fig.update_layout(
        barmode="stack",
        title={"text": title, "font": {"size": 14}},
        height=520,
        margin={"l": 70, "r": 30, "t": 90, "b": 90},
        legend={"title": {"text": "category"}},
    )
    fig.update_yaxes(title_text="bytes", row=1, col=1)
    return fig


def memory_html(outcome: Outcome) -> str:
    """The figure as an HTML fragment (plotly.js already on the page), or ""."""
    figure = build_memory_figure(outcome)
    if figure is None:
        return ""
    return fragment(figure)
