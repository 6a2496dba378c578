"""A Plotly figure as an HTML fragment of the export's one page.

In the "playground/ exports" box of docs/design.md: the page (playground.export.html)
embeds plotly.js once, with its timeline; every other figure on it (lanes,
workers, memory, curves) is written without it, with the same display options.

Every figure of the page wears Plotly's "plotly_white" template, and it is put on here,
once the figure is built: a figure builder makes its figure with `new_figure` (or gives
`make_subplots` one of them), which carries no template. Plotly checks a template
property by property each time one is set (on every figure, a fifth or more of an
export); the figure as built is still checked by Plotly, the template is its own.

Imports: plotly only; never torch.
"""

from __future__ import annotations

import functools
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

# No Plotly logo in the mode bar; the figure follows the page's width.
CONFIG = {"displaylogo": False, "responsive": True}
TEMPLATE = "plotly_white"


def new_figure() -> go.Figure:
    """An empty figure without a template (`fragment` puts the page's on)."""
    return go.Figure(layout={"template": "none"})


@functools.cache
def _template() -> dict[str, Any]:
    return pio.templates[TEMPLATE].to_plotly_json()


def fragment(figure: go.Figure, *, with_plotlyjs: bool = False) -> str:
    """`figure` as a <div> for the page, in the page's template; `with_plotlyjs`: the
    first one, which carries plotly.js for them all (the file must work offline, so never
    from a CDN)."""
    doc = figure.to_plotly_json()
    doc["layout"] = {**doc.get("layout", {}), "template": _template()}
    # The figure was checked as it was built, and the template is Plotly's own.
    return pio.to_html(
        doc, full_html=False, include_plotlyjs=with_plotlyjs, config=CONFIG, validate=False
    )
