"""The timeline figure of the HTML export: measured above predicted, one row per rank.

Part of the "playground/ exports" of docs/design.md (playground.export.html puts it
on the page). Choices, and why:
- One bar trace per (row, kind), not one per Span: a run of a pipeline lesson
  has thousands of Spans, and per-trace overhead (JSON keys, legend entries,
  plotly.js objects) would make the file large and the page slow. Bars are
  horizontal with `base=start`, `x=duration`, so a trace holds any number of them.
- Colours are fixed per action kind, so the same kind looks the same in every
  export and lesson; legend entries share a `legendgroup` per kind, so clicking
  one hides that kind in both rows.
- The idle time of each rank inside each series (a pipeline schedule) is shaded:
  the bubble.
- Series that ran one after the other (GPipe then 1F1B, zero's stages, inference's
  modes) are parted by a solid vertical line, each named over its own part of the
  row: back to back they read as one run. A lesson's warm-up steps (series
  runtime.engine.workers.WARMUP_SERIES) are one of them, and their bars are hatched,
  as in the app's Gantt: run and predicted, left out of the lesson's times.
- Every string that comes from a lesson, its params, the profile or a Span is
  passed through `html.escape`, hover text and bar labels included: Plotly
  renders a subset of HTML in those.

Where each thing goes (the bubble, the series' windows, the comm lane, the ranks, the
time unit) is worked out without plotly in playground.export.timeline_layout.

Imports: plotly and runtime's pure part; never torch.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from html import escape
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.export.fragment import new_figure
from playground.export.timeline_layout import (
    bubble_intervals,
    comm_lane,
    ranks_with_marks,
    series_windows,
    time_unit,
)
from playground.palette import KIND_COLORS
from runtime.engine.workers import WARMUP_SERIES
from runtime.sim.trace import POSITION_FIELDS, Span, Timeline
from runtime.sim.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from playground.outcome import Outcome

# Fixed colours per action kind, shared with the app (playground.palette).
# Idle time of a pipeline rank (its share of the bubble): pale, drawn under the bars.
IDLE_COLOR = "rgba(160, 160, 160, 0.28)"
# Kinds a future lesson invents get a colour from here, chosen by a stable hash
# of the name (crc32, not hash(): that is salted per process) so it never changes.
_EXTRA_COLORS = ("#17BECF", "#BCBD22", "#8C564B", "#9467BD", "#7F7F7F", "#2CA02C")


def kind_color(kind: str) -> str:
    if kind in KIND_COLORS:
        return KIND_COLORS[kind]
    return _EXTRA_COLORS[zlib.crc32(kind.encode("utf-8", "surrogatepass")) % len(_EXTRA_COLORS)]


def build_figure(outcome: Outcome) -> go.Figure:
    """Measured (if any) above predicted, one row per rank, one bar trace per (row, kind)."""
    # (title, is_measured, timeline, the other timeline's spans by action id)
    rows: list[tuple[str, bool, Timeline, dict[str, Span]]] = []
    measured, predicted = outcome.measured, outcome.predicted
    if measured is not None:
        backend = f" ({outcome.backend})" if outcome.backend else ""
        rows.append((f"measured{backend}", True, measured, predicted.by_action()))
    pairs = measured.by_action() if measured is not None else {}
    rows.append((f"predicted ({outcome.profile.name})", False, predicted, pairs))

    unit, scale = time_unit(max(timeline.end for _, _, timeline, _ in rows))
    # Row heights in pixels, so a bar keeps a readable thickness at any rank count.
    row_px = [max(140, 30 * len(ranks_with_marks(timeline)) + 40) for _, _, timeline, _ in rows]
    # Series named over their rows (series_windows) need a line between the row's title
    # and its plot.
    parted = any(series_windows(timeline) for _, _, timeline, _ in rows)
    gap_px = 90 if parted else 70
    height = sum(row_px) + gap_px * (len(rows) - 1) + 140
    fig = make_subplots(
        figure=new_figure(),
        rows=len(rows),
        cols=1,
        shared_xaxes=True,
        row_heights=row_px,
        vertical_spacing=gap_px / height,
        subplot_titles=[escape(title) for title, _, _, _ in rows],
    )
    if parted:
        fig.update_annotations(yshift=18)  # the subplot titles, above the series' names
    in_legend: set[str] = set()
    for row, (_, is_measured, timeline, other) in enumerate(rows, 1):
        ranks = ranks_with_marks(timeline)
        lane = comm_lane(timeline.spans)
        laned = {s.rank for s in timeline.spans if id(s) in lane}
        by_kind: dict[str, list[Span]] = defaultdict(list)
        for span in timeline.spans:
            by_kind[span.kind].append(span)
        idle = bubble_intervals(timeline)
        if idle:
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    name="idle (bubble)",
                    legendgroup="idle",
                    showlegend="idle" not in in_legend,
                    marker={"color": IDLE_COLOR, "line": {"width": 0}},
                    y=[f"rank {rank}" for rank, _, _ in idle],
                    base=[start * scale for _, start, _ in idle],
                    x=[(end - start) * scale for _, start, end in idle],
                    hovertext=[
                        f"idle on rank {rank}: {format_seconds(end - start)}"
                        for rank, start, end in idle
                    ],
                    hovertemplate="%{hovertext}<extra></extra>",
                ),
                row=row,
                col=1,
            )
            in_legend.add("idle")
        for kind in _kind_order(by_kind):
            spans = by_kind[kind]
            marker: dict[str, Any] = {
                "color": kind_color(kind),
                "line": {"width": 0.5, "color": "white"},
            }
            if any(s.series == WARMUP_SERIES for s in spans):
                # A warm-up step's bars hatched, as in the app's Gantt: run and predicted,
                # left out of the lesson's times.
                shapes = ["/" if s.series == WARMUP_SERIES else "" for s in spans]
                marker["pattern"] = {"shape": shapes, "fgcolor": "white", "solidity": 0.35}
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    name=escape(kind),
                    # Escaped too: not rendered by plotly.js, but the file must hold no
                    # markup from a saved run anywhere (a kind is free text there).
                    legendgroup=escape(kind),
                    showlegend=kind not in in_legend,
                    marker=marker,
                    y=[f"rank {s.rank}" + (" comm" if id(s) in lane else "") for s in spans],
                    base=[s.start * scale for s in spans],
                    x=[s.duration * scale for s in spans],
                    text=[escape(s.label) for s in spans],
                    textposition="inside",
                    insidetextanchor="middle",
                    textangle=0,  # never rotate a label to squeeze it in: hide it instead
                    hovertext=[_hover(s, other.get(s.action_id or ""), is_measured) for s in spans],
                    hovertemplate="%{hovertext}<extra></extra>",
                ),
                row=row,
                col=1,
            )
            in_legend.add(kind)
        if timeline.marks:
            _add_marks(fig, timeline, ranks, scale, row)
        _add_series_dividers(fig, timeline, scale, row)
        fig.update_yaxes(
            categoryorder="array",
            categoryarray=[
                name for r in ranks for name in [f"rank {r}"] + [f"rank {r} comm"] * (r in laned)
            ],
            autorange="reversed",  # rank 0 on top, as in the app's Gantt
            row=row,
            col=1,
        )
        fig.update_xaxes(showticklabels=True, showgrid=True, row=row, col=1)
    fig.update_xaxes(title_text=f"time since start ({unit})", row=len(rows), col=1)
    fig.update_layout(
        barmode="overlay",  # bars of different kinds on one rank share its lane
        bargap=0.25,
        height=height,
        margin={"l": 70, "r": 30, "t": 60, "b": 50},
        hovermode="closest",
        hoverlabel={"align": "left"},
        # Labels inside bars only where they fit at a readable size.
        uniformtext={"mode": "hide", "minsize": 9},
        legend={"title": {"text": "kind"}, "tracegroupgap": 2},
    )
    return fig


def _add_series_dividers(fig: go.Figure, timeline: Timeline, scale: float, row: int) -> None:
    """Where one series ends and the next begins: a solid line at the end of the one
    before (a schedule's last span; the next one's barrier starts there on some rank),
    and each series' name over its own part of the row, so GPipe and 1F1B drawn side by
    side read as two runs, not one."""
    windows = series_windows(timeline)
    for k, (name, start, _) in enumerate(windows):
        if k:
            boundary = windows[k - 1][2]
            fig.add_vline(
                x=boundary * scale,
                line={"color": "#333", "width": 1.5},
                row=row,
                col=1,
            )
        fig.add_annotation(
            x=(windows[k - 1][2] if k else start) * scale,
            xref="x",
            xanchor="left",
            xshift=3,
            y=1.0,
            yref="y domain",
            yanchor="bottom",
            text=f"<b>{escape(name)}</b>",
            showarrow=False,
            font={"size": 11, "color": "#333"},
            row=row,
            col=1,
        )


def _kind_order(kinds: dict[str, Any]) -> list[str]:
    """Known kinds in palette order, then new ones alphabetically: a stable legend."""
    known = [k for k in KIND_COLORS if k in kinds]
    return known + sorted(k for k in kinds if k not in KIND_COLORS)


def _hover(span: Span, pair: Span | None, is_measured: bool) -> str:
    lines = [
        f"<b>{escape(span.label)}</b>",
        f"kind: {escape(span.kind)}",
        f"rank: {span.rank}",
    ]
    if span.action_id is not None:
        lines.append(f"action: {escape(span.action_id)}")
    lines.append(f"start: {format_seconds(span.start)}")
    lines.append(f"duration: {format_seconds(span.duration)}")
    if span.bytes:
        lines.append(f"bytes: {format_bytes(span.bytes)}")
    if span.peer is not None:
        lines.append(f"peer: rank {span.peer}")
    for name in POSITION_FIELDS:
        value = getattr(span, name)
        if value is not None:
            lines.append(f"{name}: {escape(str(value))}")
    if pair is not None:
        # The error is always relative to the measurement, whichever row we hover.
        meas, pred = (span, pair) if is_measured else (pair, span)
        other = "predicted" if is_measured else "measured"
        lines.append(f"{other}: {format_seconds(pair.duration)}")
        if meas.duration > 0:
            error = abs(pred.duration - meas.duration) / meas.duration
            lines.append(f"prediction error: {error:.1%}")
    return "<br>".join(lines)


def _add_marks(
    fig: go.Figure, timeline: Timeline, ranks: list[int], scale: float, row: int
) -> None:
    """Failures, checkpoints, restarts: a dashed line plus a hoverable marker per rank."""
    xs: list[float] = []
    ys: list[str] = []
    texts: list[str] = []
    for mark in timeline.marks:
        fig.add_vline(
            x=mark.t * scale, line={"dash": "dot", "color": "#444", "width": 1}, row=row, col=1
        )
        text = f"<b>{escape(mark.label)}</b><br>{escape(mark.kind)} at {format_seconds(mark.t)}"
        for rank in ranks if mark.rank is None else [mark.rank]:
            xs.append(mark.t * scale)
            ys.append(f"rank {rank}")
            texts.append(text)
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers",
            name="marks",
            legendgroup="marks",
            showlegend=False,
            marker={"symbol": "x-thin", "size": 12, "line": {"width": 2, "color": "#222"}},
            hovertext=texts,
            hovertemplate="%{hovertext}<extra></extra>",
        ),
        row=row,
        col=1,
    )
