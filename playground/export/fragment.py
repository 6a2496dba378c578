"""A Plotly figure as an HTML fragment of the export's one page.

In the "playground/ exports" box of docs/design.md: the page (playground.export.html)
embeds plotly.js once, with its timeline; every other figure on it (lanes,
workers, memory, curves) is written without it, with the same display options.

Imports: plotly only; never torch.
"""

from __future__ import annotations

import plotly.graph_objects as go

# No Plotly logo in the mode bar; the figure follows the page's width.
CONFIG = {"displaylogo": False, "responsive": True}


def fragment(figure: go.Figure, *, with_plotlyjs: bool = False) -> str:
    """`figure` as a <div> for the page; `with_plotlyjs`: the first one, which carries
    plotly.js for them all (the file must work offline, so never from a CDN)."""
    return figure.to_html(full_html=False, include_plotlyjs=with_plotlyjs, config=CONFIG)
