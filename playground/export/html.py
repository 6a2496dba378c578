"""Offline Plotly HTML of one Outcome: measured above predicted on one time axis.

In DESIGN.md's picture this is one of the "playground/ exports" at the bottom:
it turns the two Timelines of an Outcome (`run`, `predict` or `replay`) into a
single self-contained file (`--export FILE.html`) a learner can open without a
network, mail to a classmate or attach to a report.

Choices, and why:
- plotly.js is embedded (`include_plotlyjs=True`), never loaded from a CDN: the
  file must work offline, years later.
- One bar trace per (row, kind), not one per Span: a run of a pipeline lesson
  has thousands of Spans, and per-trace overhead (JSON keys, legend entries,
  plotly.js objects) would make the file large and the page slow. Bars are
  horizontal with `base=start`, `x=duration`, so a trace holds any number of them.
- Colours are fixed per action kind, so the same kind looks the same in every
  export and lesson; legend entries share a `legendgroup` per kind, so clicking
  one hides that kind in both rows.
- Every string that comes from a scenario, its params, the profile or a Span is
  passed through `html.escape`, including hover text and bar labels: Plotly
  renders a subset of HTML in those, and params are typed by users.
- The file is written to a temporary sibling and moved into place with
  `os.replace`, so a failure never leaves half a file where the old one was.

Imports: plotly and runtime's pure part; never torch.
"""

from __future__ import annotations

import json
import os
import zlib
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.export.interval import interval_html
from playground.export.memory import memory_html
from playground.formatting import format_metric
from playground.palette import KIND_COLORS
from runtime.files import write_text_atomic
from runtime.trace import Span, Timeline
from runtime.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from playground.session import Outcome

# Fixed colours per action kind, shared with the app (playground.palette).
# Idle time of a pipeline rank (its share of the bubble): pale, drawn under the bars.
IDLE_COLOR = "rgba(160, 160, 160, 0.28)"
PIPELINE_COMPUTE = frozenset({"F", "B", "W"})
# Kinds a future lesson invents get a colour from here, chosen by a stable hash
# of the name (crc32, not hash(): that is salted per process) so it never changes.
_EXTRA_COLORS = ("#17BECF", "#BCBD22", "#8C564B", "#9467BD", "#7F7F7F", "#2CA02C")


def kind_color(kind: str) -> str:
    if kind in KIND_COLORS:
        return KIND_COLORS[kind]
    return _EXTRA_COLORS[zlib.crc32(kind.encode()) % len(_EXTRA_COLORS)]


def write_html(outcome: Outcome, path: str | os.PathLike[str]) -> None:
    """Write the self-contained HTML timeline of `outcome` to `path` (atomically)."""
    write_text_atomic(Path(path), render_html(outcome))


def render_html(outcome: Outcome) -> str:
    """The whole page as a string: header, figure (with plotly.js inline), metrics."""
    figure_html = build_figure(outcome).to_html(
        full_html=False,
        include_plotlyjs=True,
        config={"displaylogo": False, "responsive": True},
    )
    title_en = outcome.scenario.title.get("en", outcome.scenario.name)
    return _PAGE.format(
        title=escape(f"{title_en} · playground"),
        header=_header_html(outcome),
        figure=figure_html + memory_html(outcome) + interval_html(outcome),
        metrics=_metrics_html(outcome.metrics),
    )


# -- figure ---------------------------------------------------------------------


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

    unit, scale = _time_unit(max(timeline.end for _, _, timeline, _ in rows))
    # Row heights in pixels, so a bar keeps a readable thickness at any rank count.
    row_px = [max(140, 30 * len(_ranks(timeline)) + 40) for _, _, timeline, _ in rows]
    gap_px = 70
    height = sum(row_px) + gap_px * (len(rows) - 1) + 140
    fig = make_subplots(
        rows=len(rows),
        cols=1,
        shared_xaxes=True,
        row_heights=row_px,
        vertical_spacing=gap_px / height,
        subplot_titles=[escape(title) for title, _, _, _ in rows],
    )
    in_legend: set[str] = set()
    for row, (_, is_measured, timeline, other) in enumerate(rows, 1):
        ranks = _ranks(timeline)
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
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    name=escape(kind),
                    legendgroup=kind,
                    showlegend=kind not in in_legend,
                    marker={"color": kind_color(kind), "line": {"width": 0.5, "color": "white"}},
                    y=[f"rank {s.rank}" for s in spans],
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
        fig.update_yaxes(
            categoryorder="array",
            categoryarray=[f"rank {r}" for r in ranks],
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
        template="plotly_white",
    )
    return fig


def bubble_intervals(timeline: Timeline) -> list[tuple[int, float, float]]:
    """(rank, start, end) of the time a pipeline rank computes nothing (F/B/W) while
    its schedule runs: the bubble, shaded so the eye finds it. Schedules that ran
    one after the other (ids "<schedule>/...") each get their own window."""
    windows: dict[str, list[float]] = {}
    busy: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for span in timeline.spans:
        if span.kind == "barrier":
            continue
        group = (span.action_id or "").split("/", 1)[0] if "/" in (span.action_id or "") else ""
        window = windows.setdefault(group, [span.start, span.end])
        window[0], window[1] = min(window[0], span.start), max(window[1], span.end)
        if span.kind in PIPELINE_COMPUTE:
            busy[(group, span.rank)].append((span.start, span.end))
    if not busy:
        return []
    ranks = timeline.ranks()
    out = []
    for group, (lo, hi) in windows.items():
        for rank in ranks:
            cursor = lo
            for start, end in sorted(busy.get((group, rank), [])):
                if start > cursor:
                    out.append((rank, cursor, start))
                cursor = max(cursor, end)
            if hi > cursor:
                out.append((rank, cursor, hi))
    return out


def _time_unit(end: float) -> tuple[str, float]:
    """A unit that keeps tick labels short for this run's length."""
    if end >= 10:
        return "s", 1.0
    if end >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


def _ranks(timeline: Timeline) -> list[int]:
    marked = {m.rank for m in timeline.marks if m.rank is not None}
    return sorted(set(timeline.ranks()) | marked)


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
    for name in ("stage", "microbatch", "chunk", "step"):
        value = getattr(span, name)
        if value is not None:
            lines.append(f"{name}: {value}")
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


# -- header and metrics -------------------------------------------------------------


def _header_html(outcome: Outcome) -> str:
    scenario, profile = outcome.scenario, outcome.profile
    title_en = scenario.title.get("en", scenario.name)
    title_es = scenario.title.get("es", "")
    facts = [
        ("scenario", scenario.name),
        ("ranks", str(scenario.world_size(outcome.params))),
        ("backend", outcome.backend or "— (prediction only)"),
        ("profile", profile.name),
        ("profile source", profile.source or "—"),
        ("predicted makespan", format_seconds(outcome.predicted.makespan)),
    ]
    if outcome.measured is not None:
        facts.append(("measured makespan", format_seconds(outcome.measured.makespan)))
    facts_html = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts)
    declared = {p.name: p.kind for p in scenario.params}
    params_html = "".join(
        f'<tr><th>{escape(str(k))}</th><td title="{escape(_exact(v))}">'
        f"{escape(_format_param(declared.get(k), v))}</td></tr>"
        for k, v in outcome.params.items()
    )
    return (
        f"<h1>{escape(title_en)}</h1>\n"
        f'<p class="es" lang="es">{escape(title_es)}</p>\n'
        f"<dl>{facts_html}</dl>\n"
        f'<table class="params"><caption>params</caption>{params_html}</table>'
    )


def _format_param(kind: str | None, value: Any) -> str:
    """A param as the learner typed it (`4 MiB`, not 4194304); the exact value is the tooltip."""
    if kind == "bytes" and isinstance(value, int | float):
        return format_bytes(value)
    if kind == "duration" and isinstance(value, int | float):
        return format_seconds(value)
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _metrics_html(metrics: dict[str, Any]) -> str:
    """One table; a group of metrics (one per schedule, say) as a header row, then its rows."""

    def rows(group: dict[str, Any], depth: int) -> str:
        out = []
        pad = f' style="padding-left: {depth * 1.2}em"' if depth else ""
        for name, value in group.items():
            if isinstance(value, dict):
                out.append(f'<tr class="group"><th colspan="2"{pad}>{escape(str(name))}</th></tr>')
                out.append(rows(value, depth + 1))
            else:
                out.append(
                    f'<tr><th{pad}>{escape(str(name))}</th><td title="{escape(_exact(value))}">'
                    f"{escape(format_metric(str(name), value))}</td></tr>"
                )
        return "".join(out)

    return f'<table class="metrics"><caption>metrics</caption>{rows(metrics, 0)}</table>'


def _exact(value: Any) -> str:
    """The unrounded value, shown as a tooltip on the formatted one."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


# -- writing -----------------------------------------------------------------------


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em 2em; color: #222; }}
h1 {{ font-size: 1.4em; margin: 0; }}
p.es {{ margin: 0.2em 0 0.8em; color: #555; font-style: italic; }}
dl {{ display: grid; grid-template-columns: max-content 1fr; gap: 0.15em 1em; margin: 0 0 0.8em; }}
dt {{ color: #555; }}
dd {{ margin: 0; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}
caption {{ text-align: left; font-weight: bold; padding-bottom: 0.3em; }}
th, td {{ text-align: left; padding: 0.15em 1em 0.15em 0; border-bottom: 1px solid #eee; }}
th {{ font-weight: normal; color: #555; font-family: ui-monospace, monospace; }}
td {{ font-variant-numeric: tabular-nums; }}
tr.group th {{ font-weight: bold; color: #222; padding-top: 0.6em; }}
</style>
</head>
<body>
<header>
{header}
</header>
<main>
{figure}
{metrics}
</main>
</body>
</html>
"""
