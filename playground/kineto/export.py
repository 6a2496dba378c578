"""A read trace as one offline HTML page: the job's ranks above, the prediction below.

Part of playground.kineto (issue 39): `playground trace … --export FILE.html` and the
app's trace screen (`e`). The page is a run's page (playground.export.html) drawn from
a trace: the same timeline figure (playground.export.timeline, fed by
playground.kineto.timeline), the same per-rank panel under it (playground.export.workers,
fed by playground.kineto.workers), the same page frame and metrics table, and the
collectives named by mechanism. Every string from the trace is escaped (a kernel name
is free text in a file from elsewhere); plotly.js is inline, nothing is loaded.

Imports: plotly through playground.export; never torch.
"""

from __future__ import annotations

import os
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any, cast

from playground.export.fragment import fragment
from playground.export.html import _PAGE, _metrics_html
from playground.export.timeline import build_figure
from playground.export.workers import workers_html
from playground.kineto.collectives import MECHANISM_NAMES
from playground.kineto.report import TraceReport
from playground.kineto.timeline import trace_view
from runtime.engine.files import SHARED_FILE, write_text_atomic


def write_trace_html(report: TraceReport, path: str | os.PathLike[str]) -> None:
    """Write the page of `report` to `path` (atomically, a shared document)."""
    page = render(report).encode("utf-8", "replace").decode("utf-8")
    write_text_atomic(Path(path), page, mode=SHARED_FILE)


def render(report: TraceReport) -> str:
    view = trace_view(report)
    figure = fragment(build_figure(cast(Any, view)), with_plotlyjs=True)
    figure += workers_html(cast(Any, report))  # what it reads of a run: `.workers`
    return _PAGE.format(
        title=escape("your job's trace · playground"),
        header=_header(report),
        figure=figure,
        metrics=_mechanisms(report) + _metrics_html(report.metrics),
    )


def _header(report: TraceReport) -> str:
    profile = report.profile.name + (" (assumed)" if report.assumed else "")
    facts = [
        ("ranks", ", ".join(str(t.rank) for t in report.traces)),
        ("backend", ", ".join(sorted({t.backend or "?" for t in report.traces}))),
        ("device", ", ".join(sorted({t.device or "—" for t in report.traces}))),
        ("profile", profile),
        ("files", ", ".join(t.path for t in report.traces)),
    ]
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts)
    return (
        "<h1>Your job's trace, read in the lessons' vocabulary</h1>\n"
        '<p class="es" lang="es">La traza de su trabajo, leída con el vocabulario de las '
        "lecciones</p>\n"
        f"<dl>{items}</dl>"
    )


def _mechanisms(report: TraceReport) -> str:
    counts = Counter((c.kind, c.mechanism, c.lesson) for c in report.collectives)
    rows = []
    for (kind, mechanism, lesson), n in sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1])):
        said = MECHANISM_NAMES[mechanism][0] if mechanism else "cannot tell from this trace"
        if lesson:
            said += f" · lesson {lesson}"
        rows.append(f"<tr><th>{escape(kind)}</th><td>{n}</td><td>{escape(said)}</td></tr>")
    caption = "<caption>collectives by mechanism</caption>"
    return f'<table class="mechanisms">{caption}{"".join(rows)}</table>'
