"""The lesson contract: typed params, typed metrics, the registry, and the layer rules.

Pure tests (no ranks): scenarios.params parses and bounds values the same way
for every front end and names the field at fault; scenarios.metrics pairs
measured with predicted and computes the error; playground.formatting renders
any lesson's metrics; the registry lists each lesson once; runtime names
nothing above it, not even as a string.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from playground.formatting import format_value, metric_lines, metric_table
from playground.memory_rows import memory_rows
from scenarios.base import parse_param_args
from scenarios.metrics import Metric, find
from scenarios.params import ParamError, Params, choice, choices, count, duration, integer, size
from scenarios.registry import LESSONS, PLANNED, lessons
from scenarios.shape import GPTShape

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Demo(Params):
    aliases = {"n": "ranks"}
    ranks: int = integer(4, 2, 16, 4096)
    buffer: int = size(4 * 2**20, 1, 2**28, 2**40)
    mode: str = choice("ring", ("ring", "tree"))
    kinds: tuple[str, ...] = choices(("a", "b"), ("a", "b", "c"))
    psi: int | str = count("auto")
    mtbf: float = duration(3 * 3600.0, 0.001)
    model: GPTShape = GPTShape(layers=3, hidden=64, heads=4)


def test_defaults_typed_values_and_the_text_a_learner_types() -> None:
    params = Demo.parse({}, "run")
    assert params == Demo()
    assert params.world_size == 4 and params.model.layers == 3
    assert params.typed() == {
        "ranks": "4",
        "buffer": "4MiB",
        "mode": "ring",
        "kinds": "a,b",
        "psi": "auto",
        "mtbf": "3h",
        "layers": "3",
        "hidden": "64",
        "heads": "4",
        "seq": "16",
        "vocab": "64",
    }
    # What the form shows parses back to the same params; so does the JSON form.
    assert Demo.parse(params.typed(), "run") == params
    assert Demo.parse(params.to_dict(), "run") == params
    parsed = Demo.parse(
        {"buffer": "96KiB", "kinds": "c,a", "psi": "7B", "hidden": "128"}, "predict"
    )
    assert parsed.buffer == 96 * 1024 and parsed.kinds == ("c", "a") and parsed.psi == 7 * 10**9
    assert parsed.model == GPTShape(layers=3, hidden=128, heads=4)


@pytest.mark.parametrize(
    ("raw", "mode", "field", "needle"),
    [
        ({"ranks": "1"}, "run", "ranks", "from 2 to 16"),
        ({"ranks": "100"}, "run", "ranks", "predict allows more"),
        ({"ranks": "5000"}, "predict", "ranks", "from 2 to 4096"),
        ({"buffer": "1e400"}, "predict", "buffer", "a size"),
        ({"mtbf": "inf"}, "predict", "mtbf", "a duration"),
        ({"mtbf": "1e400s"}, "predict", "mtbf", "a duration"),
        ({"mode": "magic"}, "run", "mode", "one of ring, tree"),
        ({"kinds": "a,a"}, "run", "kinds", "once"),
        ({"psi": "0"}, "run", "psi", "from 1 to"),
        ({"hidden": "30"}, "run", "hidden", "multiple of heads"),
        ({"colour": "red"}, "run", None, "unknown parameter"),
        ({"n": "3", "ranks": "4"}, "run", "n", "give one of them"),
        ({"ranks": "4\n5"}, "run", "ranks", "'4\\n5'"),
    ],
)
def test_bad_values_name_their_field_in_one_line(raw, mode, field, needle) -> None:
    with pytest.raises(ParamError) as info:
        Demo.parse(raw, mode)
    assert info.value.field == field
    message = str(info.value)
    assert needle in message and "\n" not in message


def test_aliases_and_param_pairs() -> None:
    assert Demo.parse({"n": "8"}, "run").ranks == 8
    assert parse_param_args(["size=4MiB", " ranks = 4 "]) == {"size": "4MiB", "ranks": "4"}
    with pytest.raises(ParamError):
        parse_param_args(["nonsense"])


def test_metric_errors_pair_measured_with_predicted() -> None:
    assert Metric("t", "s", 2.0, 2.5).error == pytest.approx(0.25)
    assert Metric("t", "s", None, 2.5).error is None and Metric("t", "s", None, 2.5).is_predicted
    assert Metric("b", "bytes", [100, 200], [110, 150], per="rank").error == pytest.approx(0.25)
    assert Metric("b", "bytes", [100, 200], 100, per="rank").error == pytest.approx(0.5)
    assert not Metric("n", "count", 3).is_predicted
    doc = Metric("t", "s", math.inf, math.nan).to_dict()
    assert doc == {"name": "t", "unit": "s", "value": None, "predicted": None}
    assert Metric.from_dict(Metric("t", "s", 1.0, 2.0, series="x").to_dict()).series == "x"


def test_rendering_knows_units_not_lessons() -> None:
    metrics = [
        Metric("n", "count", 412000),
        Metric("makespan_s", "s", 0.5, 0.4, series="gpipe"),
        Metric("bubble", "fraction", None, 0.2727, series="gpipe"),
        Metric(
            "peak_bytes", "bytes", [2**20, 2**21], [2**20, 2**20], "gpipe", "activations", "rank"
        ),
    ]
    sections = metric_table(metrics)
    assert [s.series for s in sections] == [None, "gpipe"]
    assert [r.label for r in sections[1].rows][-1] == "peak_bytes (activations)"
    assert (
        format_value("fraction", 0.2727) == "27.3%" and format_value("count", 412000) == "412,000"
    )
    text = "\n".join(metric_lines(metrics, {"measured": "m", "predicted": "p", "error": "e"}))
    assert "gpipe:" in text and "500 ms" in text and "400 ms" in text and "20.0%" in text
    rows = memory_rows(metrics)
    assert [(r.group, r.rank, r.predicted) for r in rows] == [
        ("gpipe", 0, False),
        ("gpipe", 0, True),
        ("gpipe", 1, False),
        ("gpipe", 1, True),
    ]
    assert find(metrics, "makespan_s", "gpipe").value == 0.5


def test_every_lesson_is_listed_once_with_its_own_title() -> None:
    infos = lessons()
    assert [i.lesson for i in infos] == sorted(i.lesson for i in infos)
    assert len({i.scenario for i in infos}) == len(infos)
    assert not {info.scenario for info in PLANNED} & set(LESSONS)
    for lesson in LESSONS.values():
        # Every narrative step quotes a metric the lesson can report (or none).
        assert all(set(step.title) == {"es", "en"} for step in lesson.narrative)
        knobs = lesson.params.knobs()
        for name, _ in knobs:  # every knob explained in both languages (texts.toml)
            assert set(lesson.help(name)) == {"es", "en"}, (lesson.name, name)
        assert len({name for name, _ in knobs}) == len(knobs), lesson.name


def _strings(path: Path) -> list[str]:
    """String literals of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_runtime_names_nothing_above_it_not_even_as_a_string() -> None:
    """docs/design.md: the launcher is handed the rank entry; runtime never looks a lesson up."""
    for path in sorted((ROOT / "runtime").rglob("*.py")):
        for text in _strings(path):
            assert not text.startswith(("scenarios.", "playground.")), (path.name, text)


def test_no_module_is_longer_than_a_sitting() -> None:
    """docs/design.md: a file is one idea, readable in one sitting (tests aside)."""
    for folder in ("runtime", "scenarios", "playground", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            assert lines <= 350, f"{path.relative_to(ROOT)} has {lines} lines"


def test_a_lessons_probes_are_its_own_and_name_functions_of_its_package() -> None:
    """Hooks.probes (runtime.fit.calibration_probes): the rates record is filed under the
    lesson's name, and each probe's entry is a function of the lesson's own package
    taking (rank, world_size), found without importing it (a probe module imports torch)."""
    for lesson in LESSONS.values():
        probes = lesson.hooks.probes
        if probes is None:
            continue
        assert probes.lesson == lesson.name
        assert len({p.name for p in probes.probes}) == len(probes.probes), lesson.name
        package = f"scenarios.{lesson.name.replace('-', '_')}."
        for probe in probes.probes:
            module, _, function = probe.entry.partition(":")
            assert module.startswith(package), (lesson.name, probe.entry)
            path = ROOT / (module.replace(".", "/") + ".py")
            defined = {
                node.name: [a.arg for a in node.args.args]
                for node in ast.parse(path.read_text()).body
                if isinstance(node, ast.FunctionDef)
            }
            assert defined.get(function) == ["rank", "world_size"], (lesson.name, probe.entry)


def test_the_home_screens_lines_are_each_lessons_own() -> None:
    """scenarios.registry.lessons() reads the lines from texts.toml without importing the
    lessons: they must be what each package's LESSON says (its number, title, summary)."""
    from scenarios.registry import NAMES, lessons

    assert lessons() == [LESSONS[name].info for name in NAMES]
