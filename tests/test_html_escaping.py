"""The HTML export escapes every string it is given, checked on one fixed outcome in a
second: each string field a saved run can carry (span labels, kinds, series and action
ids, marks, metrics, curves, the profile, the backend) holds its own tag `<Tn a="'">`
among markup, and the page (plotly.js aside) must show every one, escaped, never raw:
neither in the HTML nor in the figures' JSON that plotly.js renders. The fuzz test
(tests/test_fuzz.py) explores other strings; this one fails at once on a dropped
`escape` (benchmarks/mutants.py)."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest
from test_hostile_replay import check_html, unescape_json

from playground.export.html import write_html
from playground.outcome import Outcome
from runtime.sim.costmodel import CostModel
from runtime.sim.trace import Mark, Span, Timeline
from scenarios.metrics import Curve, Metric
from scenarios.registry import LESSONS

pytestmark = pytest.mark.usefixtures("english")


class Tags:
    """Strings each holding a unique tag, remembered with where they were put."""

    def __init__(self) -> None:
        self.made: list[tuple[str, str]] = []

    def __call__(self, where: str) -> str:
        tag = f'<T{len(self.made)} a="\'">'
        self.made.append((where, tag))
        return f"<b>{where}</b>{tag}<script>alert(1)</script>"


def hostile_outcome(tag: Tags) -> Outcome:
    """A ring-allreduce outcome, measured and predicted, with a tag in every string."""
    kinds = [tag("kind"), tag("kind")]

    def spans(row: str) -> list[Span]:
        return [
            Span(
                rank=r,
                kind=kinds[r % 2] if r < 2 else "barrier",
                label=tag(f"{row} label"),
                start=0.1 * r,
                end=0.1 * r + 0.05,
                action_id=tag(f"{row} action id"),
                series=tag(f"{row} series"),
                bytes=1024 * (r + 1),
                peer=(r + 1) % 4,
            )
            for r in range(4)
        ]

    marks = [Mark(0.05, tag("mark kind"), tag("mark label"), 1)]
    metrics = [
        Metric(tag("metric name"), "s", 0.5, 0.4, series=tag("metric series")),
        Metric(tag("text metric name"), "text", tag("metric text"), None),
        Metric(tag("bytes metric"), "bytes", [100, 200], 150, category=tag("category")),
    ]
    curve = Curve(
        tag("curve title"),
        tag("curve x"),
        tag("curve y"),
        [1.0, 10.0, 100.0],
        {tag("curve line"): [0.3, 0.1, 0.2]},
        {tag("curve mark"): 10.0},
        log_x=True,
    )
    lesson = LESSONS["ring-allreduce"]
    return Outcome(
        lesson,
        lesson.parse({}, "predict"),
        CostModel(tag("profile name"), 1e-5, 1e-9, 1e-10, source=tag("profile source")),
        Timeline(spans("predicted")),
        Timeline(spans("measured"), [], marks),
        metrics,
        tag("backend"),
        curves=[curve],
    )


def test_the_html_export_escapes_every_string_of_a_hostile_outcome(tmp_path: Path) -> None:
    tag = Tags()
    outcome = hostile_outcome(tag)
    path = tmp_path / "out.html"
    write_html(outcome, path)
    page = path.read_text(encoding="utf-8")
    check_html(page)
    seen = unescape_json(page)
    assert "<script>alert(1)" not in seen
    for where, t in tag.made:
        opened = t.split(" ")[0]  # <T7
        assert opened not in seen, f"the {where} reached the page with its tag unescaped"
        assert f'{escape(opened)} a="' not in seen, f"the {where}: its quotes left raw"
        assert escape(t) in seen, f"the {where} is missing from the page"
