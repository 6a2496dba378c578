"""The per-rank utilisation panel of the HTML export, under the timeline.

In the "playground/ exports" box of docs/design.md, the HTML twin of the app's
Workers tab (playground.widgets.workers): for a real run (or a replayed one),
each rank's average step split into compute, transfers, waiting for peers and
idle time, as stacked bars, beside its work (compute + transfers) in every
step, one line per rank; the straggler's bar and line are red and the title
says who straggled and why. Under the figure, the same table the Workers tab and
`playground run` print (playground.workers_text). A prediction (no run) gets no
panel: its ranks are whatever the model says.

Choices, and why:
- Seconds per step on average, not totals: runs of different lengths compare.
- Work per step as lines (not step time): in data parallelism every rank's wall
  step is the same, the waiting is what differs, and the work is what a
  straggler has more of.
- The same escaping rule as playground.export.html: every string that comes
  from a scenario, its params or a saved file goes through `html.escape`.
- plotly.js is already on the page (the timeline figure embeds it).

Imports: plotly and the pure report types; never torch.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.export.fragment import fragment, new_figure
from playground.workers_text import columns, rank_rows, straggler_sentence
from runtime.engine.stragglers import WorkersReport
from runtime.sim.units import format_seconds

if TYPE_CHECKING:
    from playground.outcome import Outcome

PARTS = (
    ("compute_s", "compute", "#4E79A7"),
    ("comm_s", "transfers", "#59A14F"),
    ("wait_s", "waiting for peers", "#F28E2B"),
    ("idle_s", "idle", "#BAB0AC"),
)
STRAGGLER_COLOR = "#E15759"
LINE_COLOR = "#9AA7B8"


def build_workers_figure(report: WorkersReport) -> go.Figure:
    ranks = report.ranks
    straggler = report.overall.straggler
    labels = [f"r{r}" + (" ⚠ straggler" if r == straggler else "") for r in ranks]
    fig = make_subplots(
        figure=new_figure(),
        rows=1,
        cols=2,
        column_widths=[0.45, 0.55],
        horizontal_spacing=0.1,
        subplot_titles=["each rank's step, on average", "work per step (compute + transfers)"],
    )
    for key, name, color in PARTS:
        values = []
        for r in ranks:
            totals = report.totals[r]
            values.append(getattr(totals, key) / totals.steps if totals.steps else 0.0)
        fig.add_trace(
            go.Bar(
                name=name,
                y=labels,
                x=values,
                orientation="h",
                marker={"color": color, "line": {"width": 0.5, "color": "white"}},
                hovertext=[f"{escape(lb)} · {name}: {format_seconds(v)}" for lb, v in zip(labels, values, strict=True)],
                hovertemplate="%{hovertext}<extra></extra>",
            ),
            row=1,
            col=1,
        )  # fmt: skip
    steps = [escape(w.label) for w in report.windows]
    for r, label in zip(ranks, labels, strict=True):
        work = [s.work_s if s else None for s in report.per_rank[r]]
        slow = r == straggler
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=work,
                mode="lines+markers",
                name=escape(label),
                line={"color": STRAGGLER_COLOR if slow else LINE_COLOR, "width": 3 if slow else 1.5},
                marker={"size": 5},
                showlegend=False,
                hovertext=[f"{escape(label)} · {s}: {format_seconds(v or 0)}" for s, v in zip(steps, work, strict=True)],
                hovertemplate="%{hovertext}<extra></extra>",
            ),
            row=1,
            col=2,
        )  # fmt: skip
    fig.update_xaxes(title_text="seconds per step", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(title_text="seconds", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(tickangle=-45, row=1, col=2)
    title = "per-rank utilisation · " + escape(straggler_sentence(report, "en"))
    fig.update_layout(
        barmode="stack",
        title={"text": title, "font": {"size": 14}},
        height=max(360, 60 * len(ranks) + 220),
        margin={"l": 90, "r": 30, "t": 90, "b": 90},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def workers_table(report: WorkersReport) -> str:
    """The Workers tab's rows as an HTML table (escaped)."""
    head = "".join(f"<td>{escape(c)}</td>" for c in columns(report, "en"))
    out = [f'<tr class="head"><th>rank</th>{head}</tr>']
    for row in rank_rows(report):
        name = f"r{row.rank}" if row.rank is not None else "median"
        cells = (row.step, row.busy, row.compute, row.wait, row.sent, row.memory, row.throughput)
        mark = ' class="straggler"' if row.straggler else ""
        tds = "".join(f"<td>{escape(c)}</td>" for c in cells)
        out.append(f"<tr{mark}><th>{escape(name)}</th>{tds}</tr>")
    caption = "workers: per step on average (wait: for peers, inside communication)"
    return f'<table class="workers"><caption>{caption}</caption>{"".join(out)}</table>'


def workers_html(outcome: Outcome) -> str:
    """The panel as an HTML fragment (plotly.js already on the page), or "" without a run."""
    report = outcome.workers
    if report is None or not report.ranks or not report.windows:
        return ""
    figure = fragment(build_workers_figure(report))
    return f'<section id="workers">{figure}{workers_table(report)}</section>'
