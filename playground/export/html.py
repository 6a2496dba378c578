"""Offline Plotly HTML of one Outcome: measured above predicted on one time axis.

In docs/design.md's picture this is one of the "playground/ exports" at the bottom:
it turns the two Timelines of an Outcome (`run`, `predict` or `replay`) into a
single self-contained file (`--export FILE.html`) a learner can open without a
network, mail to a classmate or attach to a report.

The page: a header (lesson, params as typed, profile), the timeline figure
(playground.export.timeline), under it the lesson's lanes (one row per
request: playground.export.lanes), the per-rank utilisation panel of a
real run (playground.export.workers: each rank's compute, transfers, waiting
and idle time, and the straggler), the memory bars and the
checkpoint-interval curves when the lesson has them, after a run the headline
times against the prediction error budget (playground.prediction_error), and
the typed metrics as one table.

Choices, and why:
- plotly.js is embedded (`include_plotlyjs=True`), never loaded from a CDN: the
  file must work offline, years later.
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
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from playground.export.curves import curves_html
from playground.export.fragment import fragment
from playground.export.lanes import lanes_html
from playground.export.memory import memory_html
from playground.export.timeline import build_figure
from playground.export.workers import workers_html
from playground.formatting import format_value, metric_table
from playground.prediction_error import AFTER_RUN_BUDGET, BEFORE_RUN_BUDGET, mark
from runtime.engine.files import SHARED_FILE, write_text_atomic
from runtime.sim.units import format_seconds

if TYPE_CHECKING:
    from playground.outcome import Outcome
    from scenarios.metrics import Metric


def write_html(outcome: Outcome, path: str | os.PathLike[str]) -> None:
    """Write the self-contained HTML timeline of `outcome` to `path` (atomically)."""
    page = render_html(outcome)
    # A lone surrogate (a saved run may carry one in a label) has no UTF-8 form: it is
    # written as "?" rather than failing the whole export.
    page = page.encode("utf-8", "replace").decode("utf-8")
    # A document to share (0644), written in place of a regular file only.
    write_text_atomic(Path(path), page, mode=SHARED_FILE)


def render_html(outcome: Outcome) -> str:
    """The whole page as a string: header, figure (with plotly.js inline), metrics."""
    figure_html = fragment(build_figure(outcome), with_plotlyjs=True)
    title_en = outcome.lesson.title.get("en", outcome.lesson.name)
    return _PAGE.format(
        title=escape(f"{title_en} · playground"),
        header=_header_html(outcome),
        figure=figure_html
        + lanes_html(outcome)
        + workers_html(outcome)
        + memory_html(outcome)
        + curves_html(outcome),
        metrics=_budget_html(outcome) + _metrics_html(outcome.metrics),
    )


# -- header and metrics -------------------------------------------------------------


def _header_html(outcome: Outcome) -> str:
    lesson, profile = outcome.lesson, outcome.profile
    title_en = lesson.title.get("en", lesson.name)
    title_es = lesson.title.get("es", "")
    facts = [
        ("scenario", lesson.name),
        ("ranks", str(outcome.params.world_size)),
        ("backend", outcome.backend or "— (prediction only)"),
        ("profile", profile.name),
        ("profile source", profile.source or "—"),
        ("predicted makespan", format_seconds(outcome.predicted.makespan)),
    ]
    if outcome.measured is not None:
        facts.append(("measured makespan", format_seconds(outcome.measured.makespan)))
    facts_html = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts)
    exact = outcome.params.values()
    params_html = "".join(
        f'<tr><th>{escape(name)}</th><td title="{escape(_exact(exact[name]))}">'
        f"{escape(typed)}</td></tr>"
        for name, typed in outcome.params.typed().items()
    )
    return (
        f"<h1>{escape(title_en)}</h1>\n"
        f'<p class="es" lang="es">{escape(title_es)}</p>\n'
        f"<dl>{facts_html}</dl>\n"
        f'<table class="params"><caption>params</caption>{params_html}</table>'
    )


def _budget_html(outcome: Outcome) -> str:
    """After a run, the headline times against the prediction error budget
    (playground.prediction_error): measured, predicted before the run (with the interval
    from the calibration's spread, and whether the run fell in it) and after it, each
    error marked within (✓) or over (✗) its budget."""
    rows = outcome.budget_rows
    if not rows:
        return ""
    head = (
        '<tr class="head"><th></th><td>measured</td><td>before the run (calibration)</td>'
        "<td>predicted interval</td><td>measured within it</td><td>error</td>"
        "<td>after the run (refit on this run)</td><td>error</td></tr>"
    )
    out = [head]
    for row in rows:
        m = row.metric
        cells = [format_value(m.unit, m.value, "en"), format_value(m.unit, m.before, "en")]
        # The before-run interval (the calibration's spread), and whether the run fell in it.
        if m.before_low is None or m.before_high is None:
            cells += ["unknown (calibrate again)", ""]
        else:
            low, high = (format_value(m.unit, v, "en") for v in (m.before_low, m.before_high))
            within = {True: "✓", False: "✗", None: ""}[row.within_interval]
            cells += [f"{low}–{high}", within]
        cells.append(mark(m.before_error, row.before_within) if m.before_error is not None else "")
        cells += [
            format_value(m.unit, m.predicted, "en"),
            mark(m.error, row.after_within) if m.error is not None else "",
        ]
        label = " ".join(filter(None, (m.series, m.name)))
        out.append(
            f"<tr><th>{escape(label)}</th>"
            + "".join(f"<td>{escape(c)}</td>" for c in cells)
            + "</tr>"
        )
    caption = (
        f"prediction error (budget: {BEFORE_RUN_BUDGET:.0%} before the run, "
        f"{AFTER_RUN_BUDGET:.0%} after it)"
    )
    return f'<table class="metrics"><caption>{escape(caption)}</caption>{"".join(out)}</table>\n'


def _metrics_html(metrics: list[Metric]) -> str:
    """One table, by playground.formatting's sections: a series as a header row, then
    its metrics, measured beside predicted with the error."""
    out = ['<tr class="head"><th></th><td>measured</td><td>predicted</td><td>error</td></tr>']
    for section in metric_table(metrics, "en"):  # the page is in English
        pad = ""
        if section.series is not None:
            out.append(f'<tr class="group"><th colspan="4">{escape(section.series)}</th></tr>')
            pad = ' style="padding-left: 1.2em"'
        for row in section.rows:
            m = row.metric
            out.append(
                f"<tr><th{pad}>{escape(row.label)}</th>"
                f'<td title="{escape(_exact(m.value))}">{escape(row.value)}</td>'
                f'<td title="{escape(_exact(m.predicted))}">{escape(row.predicted)}</td>'
                f"<td>{escape(row.error)}</td></tr>"
            )
    return f'<table class="metrics"><caption>metrics</caption>{"".join(out)}</table>'


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
table.workers td {{ text-align: right; }}
tr.straggler th, tr.straggler td {{ color: #C0392B; font-weight: bold; }}
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
