"""The prediction error budget (playground.prediction_error): a run's headline times,
predicted before the run and after it, held to 25% and 10%. Pure: no ranks."""

from __future__ import annotations

import json
import math

import pytest

from playground import session
from playground.prediction_error import (
    AFTER_RUN_BUDGET,
    BEFORE_RUN_BUDGET,
    budget_doc,
    budget_lines,
    budget_rows,
    budget_words,
    error_rows,
    with_before,
)
from playground.saved_schema import MetricDoc, decode, metric
from playground.widgets.metrics_panel import metrics_content
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
    assert doc["budget"] == {"before_run": BEFORE_RUN_BUDGET, "after_run": AFTER_RUN_BUDGET}
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
    lines = budget_lines(rows, budget_words(language))
    assert "25%" in lines[0] and "10%" in lines[0]
    assert ("before" in lines[1]) == (language == "en") and ("antes" in lines[1]) == (
        language == "es"
    )
    assert "makespan_s" in lines[0]  # the one metric the rows share, named once
    assert "gpipe " in lines[2] and "20.0% ✓" in lines[2] and "4.0% ✓" in lines[2]
    assert "40.0% ✗" in lines[3] and "20.0% ✗" in lines[3]
    assert "playground calibrate" in lines[4]  # over before the run: calibrate again
    assert "prediction_error.py" in lines[5]  # over after it: the budget is the median's
    within = [m for m in with_before(run_metrics(), before_metrics()) if m.series != "1f1b"]
    calm = "".join(budget_lines(budget_rows(within, ("makespan_s",)), budget_words(language)))
    assert "playground calibrate" not in calm and "prediction_error.py" not in calm
    assert budget_lines([], budget_words(language)) == []
    two = [*run_metrics(), Metric("ttft_p50_s", "s", 1.0, 1.05, series="gpipe")]
    mixed = budget_lines(budget_rows(two, ("makespan_s", "ttft_p50_s")), budget_words(language))
    assert "makespan_s" not in mixed[0] and any("gpipe ttft_p50_s" in x for x in mixed[2:])
    panel = metrics_content(
        with_before(run_metrics(), before_metrics()), language, 80, ("makespan_s",)
    )
    assert lines[0] in panel.plain and "40.0% ✗" in panel.plain
    assert lines[0] not in metrics_content(run_metrics(), language, 80).plain  # no headline


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
