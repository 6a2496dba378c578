"""The Curves tab's plots survive every lesson's curves, repainted and resized (issue 35).

Each lesson's predicted curves are drawn by the real CurvePlot in a real Textual app,
painted again at other sizes (plotext's log scale once took the log of its data at
every build, so a curve below x = 10 died on its second paint), and a plot that
plotext cannot draw says so in its place instead of ending the app.
"""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from playground import session
from playground.widgets.curves import CurvePlot, CurvesView, log_ticks
from scenarios.metrics import Curve
from scenarios.registry import NAMES

SIZES = ((120, 40), (80, 24), (60, 30), (120, 40))


class CurvesApp(App[None]):
    def __init__(self, curves: list[Curve], language: str = "en") -> None:
        super().__init__()
        self.curves, self.language_ = curves, language

    def compose(self) -> ComposeResult:
        yield CurvesView(id="curves")

    def on_mount(self) -> None:
        self.query_one(CurvesView).show(self.curves, self.language_)


def painted(plot: CurvePlot) -> str:
    return str(plot.render())


@pytest.mark.parametrize("name", NAMES)
async def test_every_lessons_curves_paint_again_at_every_size(name: str) -> None:
    curves = session.predict(name, {}).curves
    app = CurvesApp(curves)
    async with app.run_test(size=SIZES[0]) as pilot:
        await pilot.pause()
        plots = list(app.query(CurvePlot))
        assert len(plots) == len([c for c in curves if c.x])
        for width, height in SIZES:
            await pilot.resize_terminal(width, height)
            await pilot.pause()
            for plot in plots:
                for _ in range(2):  # a second paint of the same figure
                    text = painted(plot)
                    assert "cannot be drawn" not in text, text
        titles = [str(s.render()) for s in app.query("CurveFigure .title")]
        assert titles == [c.title for c in curves if c.x]
        axes = [str(s.render()) for s in app.query("CurveFigure .axes")]
        drawn = [c for c in curves if c.x]
        for curve, caption in zip(drawn, axes, strict=True):
            assert curve.x_label in caption and curve.y_label in caption


async def test_a_log_axis_is_labelled_in_the_curves_own_unit() -> None:
    curve = Curve(
        title="step vs cap",
        x_label="bucket cap",
        y_label="step",
        x=[1024.0 * 2**i for i in range(11)],
        lines={"step": [0.1 + 0.01 * i for i in range(11)]},
        marks={"best": 65536.0},
        y_unit="s",
        log_x=True,
        x_unit="bytes",
    )
    app = CurvesApp([curve])
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        text = painted(app.query_one(CurvePlot))
        assert "64 KiB" in text and "1 KiB" in text
        legend = str(app.query_one("CurveFigure .marks").render())
        assert "best = 64 KiB" in legend


def test_log_ticks_pick_powers_inside_the_data_or_the_data_itself() -> None:
    assert log_ticks([3e-5, 1e-4, 2e-3, 0.5]) == [1e-4, 1e-3, 1e-2, 1e-1]
    assert log_ticks([2.5, 5.0, 7.5]) == [2.5, 5.0, 7.5]
    assert log_ticks([1024.0 * 2**i for i in range(11)], 2.0) == [1024.0, 8192.0, 65536.0, 524288.0]


async def test_a_curve_plotext_cannot_draw_says_why_in_its_place(monkeypatch) -> None:
    curves = session.predict("failure-resume", {}).curves
    app = CurvesApp(curves, language="es")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        plot = app.query_one(CurvePlot)

        def broken() -> str:
            raise IndexError("list index out of range")

        monkeypatch.setattr(plot.plt, "build", broken)
        text = painted(plot)
        assert "no se puede dibujar" in text and "IndexError" in text
        plot.refresh()
        await pilot.pause()
        assert app.is_running
