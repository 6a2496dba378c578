"""The prediction error budget (playground.prediction_error): a run's headline times,
predicted before the run (an interval, from the calibration's spread) and after it,
held to 25% and 10%; a stale calibration said with the command that calibrates again.
Pure: no ranks."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from conftest import metric_of

from playground import session
from playground.formatting import format_value
from playground.prediction_error import (
    AFTER_RUN_BUDGET,
    BEFORE_RUN_BUDGET,
    budget_doc,
    budget_lines,
    budget_rows,
    budget_words,
    error_rows,
    in_interval,
    staleness_line,
    with_before,
)
from playground.saved_schema import MetricDoc, decode, metric
from playground.widgets.metrics_panel import metrics_content
from runtime.fit.conditions import Conditions, Spread, staleness
from scenarios.metrics import Metric
from scenarios.registry import LESSONS


def run_metrics() -> list[Metric]:
    return [
        Metric("parameters", "count", 412),
        Metric("makespan_s", "s", 0.50, 0.52, series="gpipe"),
        Metric("makespan_s", "s", 0.50, 0.40, series="1f1b"),
        Metric("bubble_fraction", "fraction", 0.30, 0.33, series="gpipe"),
        Metric("p2p_bytes", "bytes", [4, 8], [4, 8], series="gpipe", per="rank"),
    ]


def before_metrics() -> list[Metric]:
    return [
        Metric("parameters", "count", 412),
        Metric("makespan_s", "s", None, 0.60, series="gpipe"),
        Metric("makespan_s", "s", None, 0.70, series="1f1b"),
        Metric("bubble_fraction", "fraction", None, 0.25, series="gpipe"),
    ]


def test_each_predicted_metric_keeps_what_was_said_before_the_run() -> None:
    merged = with_before(run_metrics(), before_metrics())
    by_key = {(m.name, m.series): m for m in merged}
    assert by_key[("makespan_s", "gpipe")].before == 0.60
    assert by_key[("makespan_s", "1f1b")].before == 0.70  # paired by series, not by name
    assert by_key[("bubble_fraction", "gpipe")].before == 0.25
    assert by_key[("parameters", None)].before is None  # a fact has no prediction
    assert by_key[("p2p_bytes", "gpipe")].before is None  # nothing said of it before
    # The parts of a memory bar share name and series: each keeps its own.
    parts = with_before(
        [
            Metric("peak", "bytes", 10, 11, "zero1", "params"),
            Metric("peak", "bytes", 20, 21, "zero1", "grads"),
        ],
        [
            Metric("peak", "bytes", None, 8, "zero1", "params"),
            Metric("peak", "bytes", None, 16, "zero1", "grads"),
        ],
    )
    assert [m.before for m in parts] == [8, 16]
    gpipe = by_key[("makespan_s", "gpipe")]
    assert gpipe.before_error == pytest.approx(0.2) and gpipe.error == pytest.approx(0.04)
    doc = gpipe.to_dict()
    assert doc["before"] == 0.60 and doc["before_error"] == pytest.approx(0.2)


def test_the_budget_holds_the_headline_before_and_after() -> None:
    rows = budget_rows(with_before(run_metrics(), before_metrics()), ("makespan_s",))
    assert [r.metric.series for r in rows] == ["gpipe", "1f1b"]
    gpipe, one_f = rows
    assert gpipe.before_within is True and gpipe.after_within is True  # 20% and 4%
    assert one_f.before_within is False and one_f.after_within is False  # 40% and 20%
    doc = budget_doc(rows)
    assert doc["budget"]["before_run"] == BEFORE_RUN_BUDGET
    assert doc["budget"]["after_run"] == AFTER_RUN_BUDGET
    first = doc["metrics"][0]
    assert first["name"] == "makespan_s" and first["series"] == "gpipe"
    assert first["measured"] == 0.50
    assert first["before_run"]["predicted"] == 0.60 and first["before_run"]["within"] is True
    assert first["after_run"]["error"] == pytest.approx(0.04)
    # Before a run nothing is measured: no rows; a metric never said before has no verdict.
    assert budget_rows(before_metrics(), ("makespan_s",)) == []
    alone = budget_rows(run_metrics(), ("makespan_s",))[0]
    assert alone.before_within is None and alone.to_dict()["before_run"]["error"] is None
    assert (
        budget_rows([Metric("t", "s", 0.0, 1.0, before=math.inf)], ("t",))[0].before_within is None
    )


def test_json_lists_every_paired_metric_and_judges_the_headline_alone() -> None:
    rows = error_rows(with_before(run_metrics(), before_metrics()), ("makespan_s",))
    names = [(r.metric.name, r.metric.series) for r in rows]
    # Every measured-and-predicted metric (a per-rank list too); not the facts.
    assert names == [
        ("makespan_s", "gpipe"),
        ("makespan_s", "1f1b"),
        ("bubble_fraction", "gpipe"),
        ("p2p_bytes", "gpipe"),
    ]
    bubble = rows[2].to_dict()
    assert bubble["headline"] is False and bubble["before_run"]["budget"] is None
    assert bubble["before_run"]["error"] == pytest.approx(5 / 30)  # 0.25 against 0.30
    assert bubble["before_run"]["within"] is None and bubble["after_run"]["within"] is None
    assert rows[0].to_dict()["headline"] is True and rows[0].before_within is True


@pytest.mark.parametrize("language", ["en", "es"])
def test_the_budget_prints_in_the_learners_language(language: str) -> None:
    rows = budget_rows(with_before(run_metrics(), before_metrics()), ("makespan_s",))
    words = budget_words(language)
    lines = budget_lines(rows, words)
    assert "25%" in lines[0] and "10%" in lines[0]
    assert "makespan_s" in lines[0]  # the one metric the rows share, named once
    # Each row: its measurement, then before the run and after it side by side, labelled.
    assert lines[1].startswith("  gpipe:") and "500 ms" in lines[1]
    before, after = lines[2].split(" │ ")
    assert before.strip().startswith(words["before_run"]) and "600 ms" in before
    assert after.startswith(words["after_run"]) and "520 ms" in after
    assert ("before the run (calibration)" in before) == (language == "en")
    assert ("antes de ejecutar (calibración)" in before) == (language == "es")
    assert "20.0% ✓" in before and "4.0% ✓" in after
    # No spread recorded with these: the interval is unknown, and said so.
    assert words["no_interval"] in before
    assert "40.0% ✗" in lines[4] and "20.0% ✗" in lines[4]
    assert "playground calibrate" in lines[5]  # over before the run: calibrate again
    assert "prediction_error.py" in lines[6]  # over after it: the budget is the median's
    # Narrower than both: one under the other, each labelled.
    narrow = budget_lines(rows, words, width=60)
    assert narrow[2].strip().startswith(words["before_run"])
    assert narrow[3].strip().startswith(words["after_run"])
    within = [m for m in with_before(run_metrics(), before_metrics()) if m.series != "1f1b"]
    calm = "".join(budget_lines(budget_rows(within, ("makespan_s",)), words))
    assert "playground calibrate" not in calm and "prediction_error.py" not in calm
    assert budget_lines([], words) == []
    two = [*run_metrics(), Metric("ttft_p50_s", "s", 1.0, 1.05, series="gpipe")]
    mixed = budget_lines(budget_rows(two, ("makespan_s", "ttft_p50_s")), words)
    assert "makespan_s" not in mixed[0] and any("gpipe ttft_p50_s" in x for x in mixed[1:])
    panel = metrics_content(
        with_before(run_metrics(), before_metrics()), language, 200, ("makespan_s",)
    )
    assert lines[0] in panel.plain and lines[2] in panel.plain
    assert lines[0] not in metrics_content(run_metrics(), language, 80).plain  # no headline


def ends_metrics(factor: float) -> list[Metric]:
    """before_metrics() as predicted at one end of a calibration's spread."""
    return [
        replace(m, predicted=m.predicted * factor) if m.unit == "s" else m for m in before_metrics()
    ]


def test_the_before_run_prediction_is_an_interval_and_its_verdict_whether_the_run_fell_in_it():
    merged = with_before(run_metrics(), before_metrics(), (ends_metrics(0.8), ends_metrics(1.5)))
    by_key = {(m.name, m.series): m for m in merged}
    gpipe, one_f = by_key[("makespan_s", "gpipe")], by_key[("makespan_s", "1f1b")]
    assert (gpipe.before_low, gpipe.before, gpipe.before_high) == pytest.approx((0.48, 0.6, 0.9))
    assert (one_f.before_low, one_f.before_high) == pytest.approx((0.56, 1.05))
    # The same at both ends (a count): a zero-width interval around it.
    bubble = by_key[("bubble_fraction", "gpipe")]
    assert bubble.before_low == bubble.before_high == 0.25
    rows = budget_rows(merged, ("makespan_s",))
    assert rows[0].within_interval is True  # 0.50 in [0.48, 0.90]
    assert rows[1].within_interval is False  # 0.50 under 0.56
    doc = rows[0].to_dict()["before_run"]
    assert doc["low"] == pytest.approx(0.48) and doc["high"] == pytest.approx(0.9)
    assert doc["within_interval"] is True and doc["predicted"] == 0.6
    assert rows[0].to_dict()["after_run"]["low"] is None  # refit on the run: no spread
    # A rate is highest at the fast end: the interval is the lowest and highest of the three.
    rate = with_before(
        [Metric("busbw", "GB/s", 1.0, 1.1)],
        [Metric("busbw", "GB/s", None, 2.0)],
        ([Metric("busbw", "GB/s", None, 2.5)], [Metric("busbw", "GB/s", None, 1.2)]),
    )[0]
    assert (rate.before_low, rate.before_high) == (1.2, 2.5)
    # Per-rank lists element-wise; a measurement within on every rank only.
    per_rank = with_before(
        [Metric("t", "s", [1.0, 2.0], [1.0, 2.0], per="rank")],
        [Metric("t", "s", None, [1.1, 1.5], per="rank")],
        ([Metric("t", "s", None, [0.9, 1.2])], [Metric("t", "s", None, [1.3, 1.9])]),
    )[0]
    assert per_rank.before_low == [0.9, 1.2] and per_rank.before_high == [1.3, 1.9]
    assert in_interval(per_rank.value, per_rank.before_low, per_rank.before_high) is False
    assert in_interval([1.0, 1.5], per_rank.before_low, per_rank.before_high) is True
    assert in_interval(1.0, None, 2.0) is None and in_interval("x", 0, 1) is None
    # The text: the interval, its verdict, and only 1f1b's miss asks to calibrate again.
    words = budget_words("en")
    lines = budget_lines(rows, words)
    assert "[480 ms–900 ms] " + words["inside"] in lines[2]
    assert "[560 ms–1.05 s] " + words["outside"] in lines[4]
    assert any("playground calibrate" in line for line in lines)
    assert not any(
        "playground calibrate" in line for line in budget_lines(rows[:1], words)
    )  # in the interval (and in budget): nothing to say


def test_json_says_where_the_interval_came_from_and_how_stale_the_calibration_was():
    rows = budget_rows(with_before(run_metrics(), before_metrics()), ("makespan_s",))
    unknown = budget_doc(rows)
    assert unknown["calibration"] == {"interval": "unknown", "conditions": None, "staleness": None}
    assert unknown["budget"]["before_run_verdict"] == "measured within the predicted interval"
    recorded = Conditions(1e9, 9e8, 0.5, Spread((0.9, 1.2), (0.8, 1.5))).to_dict()
    stale = staleness(Conditions.from_dict(recorded), 9e8, 3.0)
    doc = budget_doc(rows, stale, recorded)
    assert doc["calibration"]["interval"] == "measured"
    assert doc["calibration"]["staleness"]["verdict"] == "load"
    assert doc["calibration"]["staleness"]["stale"] is True
    json.dumps(doc, allow_nan=False)


@pytest.mark.parametrize("language", ["en", "es"])
def test_a_stale_calibration_is_said_with_the_command_that_calibrates_again(language):
    recorded = Conditions(calibrated_at=1000.0, booted_at=900.0, load1=0.5)
    for verdict in (
        staleness(recorded, booted_at=2000.0, load=0.5),  # rebooted since
        staleness(recorded, booted_at=900.0, load=3.0),  # loaded since
        staleness(None, booted_at=900.0, load=0.5),  # an older calibration: no conditions
    ):
        line = staleness_line(verdict, 2, language)
        assert line is not None and "playground calibrate --ranks 2" in line
    loaded = staleness_line(staleness(recorded, 900.0, 3.0), 4, language)
    assert "3.00" in loaded and "0.50" in loaded
    assert staleness_line(staleness(recorded, 900.0, 0.6), 2, language) is None  # fresh
    assert staleness_line(None, 2, language) is None  # a named profile


def test_a_saved_run_keeps_the_before_prediction_and_recomputes_its_error() -> None:
    doc = Metric("makespan_s", "s", 0.5, 0.52, "gpipe", before=0.6).to_dict()
    doc["before_error"] = 99.0  # a file's word is never taken for it
    back = metric(decode(json.dumps(doc).encode(), MetricDoc))
    assert back.before == 0.6 and back.before_error == pytest.approx(0.2)


@pytest.mark.parametrize("name", list(LESSONS))
def test_every_lesson_predicts_the_headline_its_budget_holds(name: str) -> None:
    headline = LESSONS[name].hooks.headline
    assert headline and all(h.endswith("_s") for h in headline)
    predicted = {m.name for m in session.predict(name, {}).metrics if m.predicted is not None}
    assert set(headline) <= predicted


async def test_the_panel_labels_before_and_after_the_run_and_the_status_says_stale() -> None:
    """Pilot: a finished run (a saved one, as a run of this app posts it) whose headline
    carries its before-run interval: the metrics panel labels the prediction before the
    run (calibration) with its interval and the one after it (refit on this run), in
    either language; the header's status line says the calibration was stale and how
    to calibrate again."""
    from pathlib import Path

    from textual.widgets import Static

    from playground.app import PlaygroundApp
    from playground.saved import replay
    from playground.screens.lesson import LessonScreen
    from playground.widgets.controls import LessonControls

    outcome = replay(Path(__file__).parent / "data" / "ring-allreduce-2ranks.json")
    headline = outcome.lesson.hooks.headline
    outcome.metrics = [
        replace(m, before=m.predicted, before_low=0.5 * m.predicted, before_high=2 * m.predicted)
        if m.name in headline
        else m
        for m in outcome.metrics
    ]
    loaded = staleness(Conditions(1e9, 9e8, 0.4), 9e8, 3.0)
    details = {**outcome.profile.details, "staleness": loaded.to_dict()}
    outcome.profile = replace(outcome.profile, details=details)
    [row] = outcome.budget_rows
    assert row.within_interval is not None
    app = PlaygroundApp(language="en")
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_lesson("ring-allreduce")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        screen.controls.post_message(LessonControls.Ready(outcome, "run"))
        await pilot.pause()
        for language in ("en", "es"):
            words = budget_words(language)
            panel = str(screen.query_one("#metrics", Static).content)
            assert words["before_run"] in panel and words["after_run"] in panel
            low, high = (
                format_value("s", v) for v in (row.metric.before_low, row.metric.before_high)
            )
            assert f"[{low}–{high}]" in panel
            # The status line under the title: the command; the panel: why, and the command.
            assert "playground calibrate --ranks 2" in screen.sub_title
            assert ("recalibra:" in screen.sub_title) == (language == "es")
            assert "3.00" in panel and "0.40" in panel and "playground calibrate --ranks 2" in panel
            assert ("carga media" in panel) == (language == "es")
            await pilot.press("l")
            await pilot.pause()


@pytest.mark.ranks
def test_a_real_run_carries_its_before_run_interval_and_the_verdict_on_it() -> None:
    """`playground run ring-allreduce --ranks 2 --json` on this machine's calibration
    (made by the run itself where the session has none): the headline's before-run
    prediction lies within its interval from the calibration's spread, the run says
    whether the measurement fell in it, and the after-run one is there beside it."""
    from test_cli import playground

    out = playground("run", "ring-allreduce", "--ranks", "2", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    budget = doc["prediction_error"]
    assert budget["calibration"]["interval"] == "measured"
    assert budget["calibration"]["staleness"]["verdict"] in ("fresh", "rebooted", "load")
    [row] = [r for r in budget["metrics"] if r["headline"]]
    before, after = row["before_run"], row["after_run"]
    assert 0 < before["low"] <= before["predicted"] <= before["high"]
    assert before["low"] < before["high"]  # a spread was measured: never a point
    assert isinstance(before["within_interval"], bool)
    assert before["within_interval"] == (before["low"] <= row["measured"] <= before["high"])
    assert after["predicted"] > 0 and after["error"] is not None
    # The metric itself carries the interval too (what the app's panel shows).
    time_s = metric_of(doc, "time_s")
    assert (time_s["before_low"], time_s["before_high"]) == (before["low"], before["high"])
