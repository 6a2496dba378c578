"""A lesson's lanes for the HTML export: one row per item of work, its phases as bars.

In the "playground/ exports" box of docs/design.md: it draws every `Lanes` of an
Outcome (scenarios.metrics.Lanes; a lesson's `lanes` hook, computed here from
the Outcome's timelines, so a replay has them too), knowing no lesson. The
inference lesson's are the first: per request, the wait and prefill up to its
first token (TTFT), then its decode up to the last token, measured above
predicted, so a learner sees which requests queued behind others and where
the prediction parts from the run.

Choices, and why:
- One row per item, measured and predicted side by side in it (grouped bars,
  predicted hatched): the eye compares the two on one row, as in the timeline.
- Each bar is (start, length) with `base`: a phase starts where the run put it,
  not at zero.
- Rows in the items' order from the top (request 0 first), each named by the
  lesson ("req 3": never "r3", the timeline's name for rank 3); plotly.js is
  already on the page, and every string is escaped.
- The legend sits above the rows, under the title: below them it fell on the
  x axis' title, the figure's height growing with its rows.

Imports: plotly and the pure metric types; never torch.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from playground.export.fragment import fragment, new_figure
from runtime.sim.units import format_seconds
from scenarios.metrics import Lanes

if TYPE_CHECKING:
    from playground.outcome import Outcome

PHASE_COLORS = ("#F28E2B", "#4E79A7", "#59A14F", "#B07AA1")
ROW_PX = 22


def build_lanes_figure(lanes: Lanes) -> go.Figure | None:
    if not lanes.lanes:
        return None
    labels = list(dict.fromkeys(lane.label for lane in lanes.lanes))
    phases = list(dict.fromkeys(name for lane in lanes.lanes for name, _, _ in lane.phases))
    sources = list(dict.fromkeys(lane.source for lane in lanes.lanes))
    fig = new_figure()
    for p, phase in enumerate(phases):
        color = PHASE_COLORS[p % len(PHASE_COLORS)]
        for source in sources:
            rows = [
                (lane.label, start, end)
                for lane in lanes.lanes
                if lane.source == source
                for name, start, end in lane.phases
                if name == phase
            ]
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    y=[escape(label) for label, _, _ in rows],
                    base=[start for _, start, _ in rows],
                    x=[max(end - start, 0.0) for _, start, end in rows],
                    name=escape(f"{phase} ({source})"),
                    offsetgroup=source,
                    marker={
                        "color": color,
                        "opacity": 1.0 if source == sources[0] else 0.55,
                        "pattern": {"shape": "" if source == "measured" else "/"},
                    },
                    hovertext=[
                        escape(
                            f"{label} {source}: {phase} {format_seconds(end - start)}, "
                            f"from {format_seconds(start)}"
                        )
                        for label, start, end in rows
                    ],
                    hoverinfo="text",
                )
            )
    title = lanes.title + (f" (first {len(labels)}; {lanes.omitted} more not drawn)"
                           if lanes.omitted else "")  # fmt: skip
    fig.update_yaxes(
        categoryorder="array",
        categoryarray=[escape(label) for label in reversed(labels)],
        title_text="request",
    )
    fig.update_xaxes(title_text="time (s)")
    fig.update_layout(
        title={"text": escape(title)},
        barmode="group",
        bargap=0.25,
        height=160 + ROW_PX * len(labels),
        # The legend above the rows, under the title: below them, at a height that grows
        # with the rows, it fell on the x axis' title ("time (s)").
        margin={"l": 70, "r": 30, "t": 110, "b": 50},
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"},
    )
    return fig


def lanes_html(outcome: Outcome) -> str:
    """Every lanes figure of the Outcome as an HTML fragment (plotly.js already on the
    page), or ""."""
    parts = []
    for lanes in outcome.lesson.lanes(outcome.params, outcome.predicted, outcome.measured):
        figure = build_lanes_figure(lanes)
        if figure is not None:
            parts.append(fragment(figure))
    return "".join(parts)
