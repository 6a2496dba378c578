"""Predict on a hardware profile: the scheduler on the roofline clock, drawn as a timeline.

Part of lesson 7's prediction, pure (DESIGN.md: predict is cheap at any scale
it accepts). Rather than simulate every Action of a Program planned on this
machine's clock, `predict` plans the trace on the profile's own clock
(scenarios.inference.stepmodel's roofline with the profile's rates, links and
memory) and reads the latencies off the plan: Vidur's method (Agrawal et al.
2024), the real scheduler on a modelled clock. The timeline draws one span per
iteration and stage (the first MAX_SPANS), each series after the previous one.

Pure: stdlib and the lesson's pure modules.
"""

from __future__ import annotations

from runtime.trace import Span, Timeline
from scenarios.inference.plan import Plan
from scenarios.inference.program import requests_label

MAX_SPANS = 20_000
FORMULA = (
    "the scheduler's own iterations on the profile's roofline clock (Vidur-style): "
    "per rank max(FLOPs/peak, bytes/bandwidth) per part, TP collectives by alpha-beta; "
    "one span per iteration and stage"
)


def draw(plans: list[tuple[str, Plan]]) -> tuple[Timeline, list[float]]:
    """The spans of each series' plan, one series after another; and each series' start."""
    spans: list[Span] = []
    offsets = []
    offset = 0.0
    for series, planned in plans:
        offsets.append(offset)
        serving = planned.serving
        tp = serving.tp
        for k, it in enumerate(planned.iterations):
            if len(spans) >= MAX_SPANS:
                break
            kind = "prefill" if it.prefill else "decode"
            for s, (start, end) in enumerate(it.stages):
                first = (it.engine * serving.pp + s) * tp if serving.pp == 1 else s * tp
                for rank in range(first, first + tp):
                    spans.append(Span(rank, kind, requests_label(it), offset + start,
                                      offset + end, series=series, step=k, stage=s))
        offset += max((it.end for it in planned.iterations), default=0.0)
    return Timeline(spans=spans), offsets
