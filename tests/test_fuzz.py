"""Fuzzers of the trust boundaries (issue 11): what a user types, what a saved run holds,
what the HTML export writes.

(a) `predict` and `show` of every lesson with generated `-p key=value` pairs (and
    `--ranks`): exit 0 with strict output, or exit 2 with one printable line; never a
    traceback, and never exit 0 when a pair is known to be wrong (an unknown key, a
    value outside the knob's declared bounds, text that is no number).
(b) `replay` of valid saved runs mutated by hypothesis (keys deleted, types changed,
    NaN/Infinity/1e400, huge and negative numbers, string ranks, deep nesting,
    control characters and markup, truncated files, bytes that are not UTF-8), as
    `--json` documents and as torchrun `--out` directories: never a traceback, never
    exit 0 for a file that is not strict JSON or whose params the lesson refuses.
(c) the HTML export of Outcomes whose every string (span labels, kinds, series,
    action ids, marks, metric names, series and text values, curve titles, the
    profile, the backend) is generated around markup, quotes and control
    characters: the file holds none of that markup unescaped.

Kept fast for CI (a few seconds each): generated values stay below each knob's
`CAPS` (issue 12: predicting a 1M-rank ZeRO is slow) unless they are past the
knob's predict bound, where they are refused before anything is built.
"""

from __future__ import annotations

import copy
import json
import tempfile
from html import escape
from pathlib import Path
from typing import Any

import pytest
from conftest import examples
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from jsonraw import Raw, dumps
from test_hostile_replay import (
    HOSTILE,
    check_html,
    check_strict_doc,
    cli,
    control_characters,
    one_line_error,
    strict_json,
    unescape_json,
)

from playground.export.html import write_html
from playground.outcome import Outcome
from runtime.sim.costmodel import CostModel
from runtime.sim.trace import Mark, Span, Timeline
from scenarios.metrics import CATEGORIES, UNITS, Curve, Metric
from scenarios.params import Knob
from scenarios.registry import LESSONS

pytestmark = pytest.mark.usefixtures("english")

FAST: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}

ESC = "\x1b]0;pwned\x07\x1b[2J"
MARKUP = ("<script>alert(1)</script>", "\"'><img src=x onerror=alert(1)>", "</script>", "&amp;")
HOSTILE_CHARS = "<>&\"'/=;,\\\x00\x07\x1b\x7f\x85\x9b\u2028\u202e\n\t é中"


# == (a) the CLI's params ================================================================
# The largest valid value generated per knob (each lesson's predict and show stay well
# under a second there); values past a knob's predict bound are generated too.
CAPS = {
    "ranks": 16,
    "resume_ranks": 8,
    "stages": 8,
    "layers": 16,
    "microbatches": 16,
    "chunks": 8,
    "steps": 60,
    "repeat": 8,
    "hidden": 512,
    "heads": 32,
    "seq": 512,
    "vocab": 2048,
    "microbatch": 64,
    "microbatch_size": 64,
    "batch": 512,
    "max_restarts": 10,
    "checkpoint_every": 60,
}


def _garbage() -> st.SearchStrategy[str]:
    """Text no knob accepts: no digit at all, so no number hides in it."""
    return st.one_of(
        st.sampled_from(["", "abc", "nan", "inf", "-inf", "x1", "<script>", ESC, "1.2.3"]),
        st.text(st.characters(exclude_categories=["Nd"], exclude_characters="="), max_size=8)
        .map(str.strip)
        .filter(lambda s: s not in ("auto",)),
    )


def knob_value(name: str, knob: Knob) -> st.SearchStrategy[tuple[str, bool | None]]:
    """(text, known_bad): known_bad is True when the knob must refuse the text, False when
    it must accept it (rules between fields may still refuse), None when unsure."""
    low = knob.minimum
    high = knob.upper("predict")
    kind = knob.kind
    bad_garbage = _garbage().map(lambda s: (s, True))
    if kind in ("int", "bytes"):
        lo = int(low) if low is not None else 0
        cap = min(CAPS.get(name, 2**40), int(high) if high is not None else 2**40)
        valid = st.integers(lo, max(lo, cap)).map(lambda n: (str(n), False))
        edges = [st.just((str(lo), False)), st.just((str(cap), False))]
        far = [st.just((str(lo - 1), True))] if low is not None else []  # below the bound
        if high is None:  # unbounded above: as far as a Python int goes (past any float)
            far.append(st.sampled_from([("1" + "0" * 30, None), ("1" + "0" * 400, None)]))
        else:
            far += [st.just((str(int(high) + 1), True)), st.just(("1" + "0" * 30, True))]
        options = [valid, valid, valid, *edges, *far, bad_garbage]  # mostly valid
        if kind == "bytes":
            options.append(st.integers(0, 1024).map(lambda n: (f"{n}KiB", None)))
            options.append(st.sampled_from([("1e400", True), ("4 MiB", None), ("1.5KiB", None)]))
        else:
            options.append(st.sampled_from([("2.5", True), ("1e3", True), ("0x10", True)]))
        return st.one_of(*options)
    if kind == "duration":
        return st.one_of(
            st.floats(1e-3, 1e7).map(lambda x: (f"{x:g}s", None)),
            st.sampled_from(["0.5s", "90s", "3h", "19min", "1d", "300ms"]).map(lambda s: (s, None)),
            st.sampled_from(["1e300s", "1.7e308s", "1e-300s", "1e-3s", "0s"]).map(
                lambda s: (s, None)
            ),
            st.sampled_from([("-1s", True), ("1e400s", True), ("3 parsecs", True), ("s", True)]),
            bad_garbage,
        )
    if kind == "choice":
        return st.one_of(
            st.sampled_from(knob.choices).map(lambda c: (c, False)),
            st.sampled_from(knob.choices).map(lambda c: (c, False)),
            st.sampled_from(knob.choices).map(lambda c: (c.upper() + "x", True)),
            st.just((",".join(knob.choices), True)),
            bad_garbage.filter(lambda pair: pair[0] not in knob.choices),
        )
    if kind == "choices":
        picks = st.lists(st.sampled_from(knob.choices), min_size=1, max_size=3, unique=True)
        return st.one_of(
            picks.map(lambda p: (",".join(p), False)),
            picks.map(lambda p: (",".join(p), False)),
            st.sampled_from(knob.choices).map(lambda c: (f"{c},{c}", True)),
            picks.map(lambda p: (",".join([*p, "zigzag<b>"]), True)),
            st.sampled_from([(",", True), ("", True)]),
            bad_garbage.filter(lambda pair: not choices_ok(pair[0], knob.choices)),
        )
    if kind == "float":
        if low is None and high is None:  # any finite number (mixed-precision's `value`)
            return st.one_of(
                st.floats(-1e300, 1e300, allow_nan=False).map(lambda x: (repr(x), False)),
                st.sampled_from(
                    [("1e-5", False), ("65504", False), ("1e400", True), ("-1e400", True)]
                ),
                bad_garbage,
            )
        lo, hi = low if low is not None else 0.0, high if high is not None else 1e6
        return st.one_of(
            st.floats(lo, hi).map(lambda x: (f"{x:g}", False)),
            st.sampled_from([(f"{lo:g}", False), (f"{hi:g}", False), ("0.35", None)]),
            st.sampled_from([("nan", True), ("inf", True), ("1e400", True), ("1,5", True)]),
            st.just((f"{hi * 2 + 1:g}", True)),
            bad_garbage,
        )
    if kind == "text":  # a short syntax (`4h`, `tp8,pp12,dp8`): its own examples, and junk
        examples = ("auto", *getattr(knob, "examples", ()))
        return st.one_of(
            st.sampled_from(examples).map(lambda e: (e, False)),
            st.sampled_from([("tp0", True), ("4x", True), ("0", True), ("-1", True)]),
            bad_garbage.filter(lambda pair: pair[0].replace(" ", "") != "ddp"),
        )
    assert kind == "count", kind
    return st.one_of(
        st.sampled_from([("auto", False), ("7B", False), ("125M", False), ("7e9", False)]),
        st.integers(1, 10**12).map(lambda n: (str(n), False)),
        st.sampled_from([("1000T", None), ("1e15", None), ("999999999999999", None)]),
        st.sampled_from([("1e16", True), ("1e307", True), ("1.7e308", True), ("1e400", True)]),
        st.sampled_from([("0", True), ("-1", True), ("1.5.5B", True), ("7X", True)]),
        bad_garbage,
    )


@st.composite
def cli_params(draw: st.DrawFn, scenario: str) -> tuple[list[str], bool]:
    """(`-p` and `--ranks` arguments, known_bad)."""
    cls = LESSONS[scenario].params
    knobs = dict(cls.knobs())
    names = sorted(knobs) + sorted(cls.aliases)
    args: list[str] = []
    raw: dict[str, tuple[str, bool | None]] = {}  # as scenarios.base.parse_param_args keeps it
    bad = False
    for _ in range(draw(st.integers(0, 4))):
        how = draw(st.sampled_from(["knob"] * 14 + ["unknown", "malformed"]))
        if how == "knob":
            name = draw(st.sampled_from(names))
            text, known = draw(knob_value(name, knobs[cls.aliases.get(name, name)]))
            args += ["-p", f"{name}={text}"]
            raw[name] = (text.strip(), known)
        elif how == "unknown":
            key = draw(st.text(st.characters(exclude_characters="="), min_size=1, max_size=8))
            if key.strip() in names or not key.strip() or key.startswith("-"):
                continue
            args += ["-p", f"{key}=1"]
            bad = True
        else:
            args += ["-p", draw(st.sampled_from(["ranks", "=4", " =4", "", "noequals"]))]
            bad = True
    if draw(st.booleans()):
        field = cls.ranks_field
        low = int(knobs[field].minimum or 0)
        ranks = draw(st.integers(low - 2, CAPS.get(field, 8)) | st.just(10**7))  # past all
        args += ["--ranks", str(ranks)]
        if field in raw and raw[field][0] != str(ranks):
            bad = True
        raw[field] = (str(ranks), knob_value_known_int(knobs[field], ranks))
    for alias, target in cls.aliases.items():
        if alias in raw and target in raw and raw[alias][0] != raw[target][0]:
            bad = True
    return args, bad or any(known is True for _, known in raw.values())


def choices_ok(text: str, allowed: tuple[str, ...]) -> bool:
    """Whether a `choices` knob takes `text` (scenarios.params.Knob.parse's rule)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    return bool(items) and set(items) <= set(allowed) and len(set(items)) == len(items)


def knob_value_known_int(knob: Knob, value: int) -> bool:
    high = knob.upper("predict")
    return (knob.minimum is not None and value < knob.minimum) or (
        high is not None and value > high
    )


def check_cli_outcome(status: int, out: str, err: str, known_bad: bool, as_json: bool) -> None:
    assert status in (0, 2), (status, err)
    if status == 2:
        one_line_error(status, out, err)
        return
    assert not known_bad, f"exit 0 for input known to be wrong; stdout: {out[:300]!r}"
    assert err == ""
    if as_json:
        check_strict_doc(out)
    else:
        assert not control_characters(out), out


@pytest.mark.parametrize("scenario", sorted(LESSONS))
@pytest.mark.parametrize("command", ["predict", "show"])
@settings(max_examples=examples(40), **FAST)
@given(data=st.data())
def test_cli_params_never_crash(command: str, scenario: str, data: st.DataObject) -> None:
    args, known_bad = data.draw(cli_params(scenario), label="args")
    as_json = data.draw(st.booleans(), label="json")
    argv = [command, scenario, *args, *(["--json"] if as_json else [])]
    if command == "predict":
        argv += ["--hardware", "cpu-default"]  # not this machine's calibration
    status, out, err = cli(*argv)
    event(f"exit {status}")
    # A prediction that meets one of the lesson's challenges says so on stderr, once per
    # learner (its progress file: the session's state dir, so whether an earlier test met
    # it first is the order's doing): one printable line each, set apart before the rule
    # that a command which exits 0 writes nothing else there.
    notices = [line for line in err.splitlines() if line.startswith(("✓ ", "✗ "))]
    assert all(line.isprintable() for line in notices), notices
    err = "".join(f"{line}\n" for line in err.splitlines() if line not in notices)
    check_cli_outcome(status, out, err, known_bad, as_json)


@pytest.mark.parametrize(
    "word",
    [
        "extra\x1b[31mred",
        "two\nlines",
        "--no-such-flag",
    ],
)
def test_an_unrecognized_argument_is_one_printable_line(word: str) -> None:
    one_line_error(*cli("predict", "ring-allreduce", word))


# == (b) replay of mutated saved runs ===================================================
def hostile_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(
            [None, True, False, 0, -1, -5, 1 << 20, 1 << 64, 2**31, 1.5, -1e9 - 1, 1e300]
        ),
        st.sampled_from(["", "0", "1", "2", "ring", "NaN", ESC, *MARKUP, "x" * 2500]),
        st.sampled_from(
            ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 40, "1" + "0" * 400]
        ).map(Raw),
        st.integers(1, 6000).map(lambda n: Raw("[" * n + "]" * n)),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(st.sampled_from(HOSTILE_CHARS) | st.characters(), max_size=12),
        st.lists(st.integers(-3, 3), max_size=3),
        st.dictionaries(st.sampled_from(["a", "rank", "<b>"]), st.integers(), max_size=2),
    )


def _pick_path(data: st.DataObject, doc: Any) -> list[Any]:
    """A path into `doc`, usually a few levels down (where the typed fields are)."""
    path: list[Any] = []
    node = doc
    while isinstance(node, dict | list) and node and data.draw(st.integers(0, 3)) > 0:
        key = data.draw(
            st.sampled_from(sorted(node))
            if isinstance(node, dict)
            else st.integers(0, len(node) - 1)
        )
        path.append(key)
        node = node[key]
    return path


def mutate(data: st.DataObject, doc: Any) -> Any:
    """One structural mutation of `doc` (a copy): delete, replace, retype or add a key."""
    doc = copy.deepcopy(doc)
    path = _pick_path(data, doc)
    if not path:
        return data.draw(hostile_values()) if data.draw(st.integers(0, 9)) == 0 else doc
    *parents, last = path
    node = doc
    for key in parents:
        node = node[key]
    how = data.draw(st.sampled_from(["delete", "replace", "replace", "retype", "add"]))
    if how == "delete":
        del node[last]
    elif how == "replace":
        node[last] = data.draw(hostile_values())
    elif how == "retype":
        value = node[last]
        node[last] = data.draw(st.sampled_from([str(value), [value], {"v": value}]))
    elif isinstance(node, dict):
        node[data.draw(st.sampled_from(["rank", "extra", ESC, "<b>", "stage"]))] = data.draw(
            hostile_values()
        )
    else:
        node.insert(last, data.draw(hostile_values()))
    return doc


def mutate_bytes(data: st.DataObject, text: str) -> bytes:
    """The serialized file, maybe truncated or holding bytes that are not UTF-8."""
    raw = text.encode("utf-8")
    how = data.draw(st.sampled_from(["as is"] * 6 + ["truncate", "bad bytes", "bom"]))
    if how == "truncate":
        return raw[: data.draw(st.integers(0, max(0, len(raw) - 1)))]
    if how == "bad bytes":
        at = data.draw(st.integers(0, len(raw)))
        return raw[:at] + data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + raw[at:]
    if how == "bom":
        return b"\xef\xbb\xbf" + raw
    return raw


def is_strict_json(raw: bytes) -> bool:
    try:
        strict_json(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return True


def params_refused(doc: Any) -> bool:
    """True when the lesson's own Params refuses what `doc` holds as its params (or there
    is no lesson or no params to parse): replay must then refuse the file."""
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict):
        return True
    lesson = LESSONS.get(doc.get("scenario")) if isinstance(doc.get("scenario"), str) else None
    if lesson is None:
        return True
    try:
        lesson.parse(doc["params"], "predict")
    except (ValueError, TypeError, OverflowError):
        return True
    return False


def _loads_lenient(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def check_exports(path: Path) -> None:
    """An accepted saved run exports (HTML, trace) without a traceback, escaped and strict."""
    html, trace = path.with_name("out.html"), path.with_name("trace.json")
    status, out, err = cli("replay", str(path), "--export", str(html), "--trace", str(trace))
    assert status == 0, err
    check_html(html.read_text(encoding="utf-8"))
    strict_json(trace.read_text(encoding="utf-8"))


def check_replay(path: Path, raw_doc: Any, export: bool = False) -> None:
    """The replay contract for one saved run; `raw_doc`: the file (or run.json) as Python
    reads it, None when Python cannot; `export`: also write the HTML and the trace."""
    status, out, err = cli("replay", str(path), "--json")
    event(f"exit {status}")
    assert status in (0, 2), (status, err)
    if status == 2:
        one_line_error(status, out, err)
        return
    assert raw_doc is not None, "exit 0 for a file that is not strict JSON"
    assert not params_refused(raw_doc), (
        f"exit 0 though the params are invalid: {raw_doc.get('params')}"
    )
    doc = check_strict_doc(out)
    lesson = LESSONS[raw_doc["scenario"]]
    assert doc["params"] == lesson.parse(raw_doc["params"], "predict").to_dict()
    if export:
        check_exports(path)


BASES = {
    name: json.loads((HOSTILE / f"valid.{name}.json").read_text())
    for name in ("ring", "zero", "pipe", "resume", "ring_run")
}


@settings(max_examples=examples(200), **FAST)
@given(data=st.data())
def test_replay_of_mutated_documents_never_crashes(data: st.DataObject) -> None:
    doc = BASES[data.draw(st.sampled_from(sorted(BASES)), label="base")]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        doc = mutate(data, doc)
    raw = mutate_bytes(data, dumps(doc))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.json"
        path.write_bytes(raw)
        export = data.draw(st.integers(0, 4), label="export") == 0  # exports are slower
        check_replay(path, _loads_lenient(raw) if is_strict_json(raw) else None, export)


TORCHRUN = {
    name: json.loads((HOSTILE / "torchrun.valid" / name).read_text())
    for name in ("run.json", "rank0.json", "rank1.json")
}


@settings(max_examples=examples(150), **FAST)
@given(data=st.data())
def test_replay_of_mutated_torchrun_dirs_never_crashes(data: st.DataObject) -> None:
    files: dict[str, Any] = dict(TORCHRUN)
    target = data.draw(st.sampled_from(sorted(files)), label="file")
    how = data.draw(st.sampled_from(["mutate"] * 8 + ["remove", "directory"]), label="how")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        strict = True
        for name, doc in files.items():
            if name != target:
                (out / name).write_text(json.dumps(doc))
            elif how == "remove":
                strict = False
            elif how == "directory":
                (out / name).mkdir()
                strict = False
            else:
                for _ in range(data.draw(st.integers(1, 2), label="mutations")):
                    doc = mutate(data, doc)
                raw = mutate_bytes(data, dumps(doc))
                (out / name).write_bytes(raw)
                strict = is_strict_json(raw)
                files[name] = _loads_lenient(raw)
        run = files["run.json"] if strict or target != "run.json" else None
        status, stdout, err = cli("replay", str(out), "--json")
        event(f"exit {status}")
        assert status in (0, 2), (status, err)
        if status == 2:
            one_line_error(status, stdout, err)
            return
        assert strict, f"exit 0 though {target} is {how}d or not strict JSON"
        assert not params_refused(run), f"exit 0 though run.json's params are invalid: {run}"
        doc = check_strict_doc(stdout)
        assert doc["params"] == LESSONS[run["scenario"]].parse(run["params"], "predict").to_dict()


# == (c) the HTML export =================================================================
class Labels:
    """Generated strings, each around a unique tag `<Q{i} a="'">` (no generated text holds
    a "Q") that must reach the file escaped or not at all."""

    def __init__(self, data: st.DataObject):
        self.data = data
        self.made: list[tuple[str, str]] = []  # (where, tag)

    def __call__(self, where: str) -> str:
        i = len(self.made)
        tag = f'<Q{i} a="\'">'
        free = st.text(
            st.sampled_from(HOSTILE_CHARS + "abc =") | st.characters(exclude_characters="Q"),
            max_size=6,
        )
        before = self.data.draw(free | st.sampled_from(MARKUP), label=f"{where} before")
        after = self.data.draw(free | st.sampled_from(["size=4MiB", "ranks=<b>4</b>"]))
        self.made.append((where, tag))
        return f"{before}{tag}{after}"


def generated_outcome(data: st.DataObject, label: Labels) -> Outcome:
    lesson = LESSONS["ring-allreduce"]
    kinds = [label("kind") for _ in range(data.draw(st.integers(1, 3)))]

    def spans(row: str) -> list[Span]:
        out = []
        for n in range(data.draw(st.integers(1, 6))):
            start = data.draw(st.floats(0, 10))
            out.append(
                Span(
                    rank=data.draw(st.integers(0, 3)),
                    kind=data.draw(st.sampled_from([*kinds, "F", "B", "barrier"])),
                    label=label(f"{row} label"),
                    start=start,
                    end=start + data.draw(st.floats(0, 1)),
                    action_id=f"a{n}" if data.draw(st.booleans()) else label("action_id"),
                    series=data.draw(st.none() | st.just(label("series"))),
                    bytes=data.draw(st.none() | st.integers(0, 2**40)),
                    peer=data.draw(st.none() | st.integers(0, 3)),
                )
            )
        return out

    measured = None
    if data.draw(st.booleans()):
        marks = [
            Mark(data.draw(st.floats(0, 10)), label("mark kind"), label("mark label"), rank)
            for rank in data.draw(st.lists(st.none() | st.integers(0, 3), max_size=2))
        ]
        measured = Timeline(spans("measured"), [], marks)
    metrics = []
    for _ in range(data.draw(st.integers(1, 4))):
        unit = data.draw(st.sampled_from(UNITS))
        value: Any = data.draw(st.floats(-1e6, 1e6) | st.integers(0, 2**40) | st.none())
        predicted: Any = data.draw(st.none() | st.floats(0, 1e6))
        if unit == "text":
            value, predicted = label("metric text"), None
        category = None
        if unit == "bytes" and data.draw(st.booleans()):
            category = data.draw(st.sampled_from(CATEGORIES) | st.just(label("category")))
            value = data.draw(st.lists(st.integers(0, 2**30), min_size=1, max_size=3))
            predicted = data.draw(st.none() | st.integers(0, 2**30))
        metrics.append(
            Metric(
                label("metric name"),
                unit,
                value,
                predicted,
                series=data.draw(st.none() | st.just(label("metric series"))),
                category=category,
            )
        )
    curves = []
    if data.draw(st.booleans()):
        xs = sorted(data.draw(st.lists(st.floats(1, 1e5), min_size=1, max_size=5)))
        curves.append(
            Curve(
                label("curve title"),
                label("curve x"),
                label("curve y"),
                xs,
                {label("curve line"): [data.draw(st.floats(0, 1)) for _ in xs]},
                {label("curve mark"): data.draw(st.floats(1, 1e5))},
                log_x=data.draw(st.booleans()),
            )
        )
    profile = CostModel(label("profile name"), 1e-5, 1e-9, 1e-10, source=label("profile source"))
    return Outcome(
        lesson,
        lesson.parse({}, "predict"),
        profile,
        Timeline(spans("predicted")),
        measured,
        metrics,
        label("backend") if measured is not None else None,
        curves=curves,
    )


# Where a generated string is always drawn, so its escaped form must be in the file.
ALWAYS_SHOWN = ("predicted label", "measured label", "metric name", "mark label", "kind")


# No shrinking: every example carries a tag in every string, so a dropped escape fails
# the first one, and each example writes a page with plotly.js inline (4.6 MB): shrinking
# one took minutes. The failing example is reported as drawn (its strings are short).
@settings(max_examples=examples(20), phases=(Phase.explicit, Phase.reuse, Phase.generate), **FAST)
@given(data=st.data())
def test_html_export_escapes_every_generated_string(data: st.DataObject) -> None:
    label = Labels(data)
    outcome = generated_outcome(data, label)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.html"
        write_html(outcome, path)
        html = path.read_text(encoding="utf-8")
    check_html(html)
    seen = unescape_json(html)
    used_kinds = {s.kind for t in (outcome.predicted, outcome.measured) if t for s in t.spans}
    for where, tag in label.made:
        opened = tag.split(" ")[0]  # <Q7
        assert opened not in seen, f"the {where} reached the file with its tag unescaped"
        lt = escape(opened)  # &lt;Q7: escaped, but are its quotes?
        assert f'{lt} a="' not in seen and f'{lt} a=\\"' not in seen, f"{where}: raw quotes"
        if where in ALWAYS_SHOWN and (where != "kind" or any(tag in k for k in used_kinds)):
            assert escape(tag) in seen, f"the {where} is missing from the file"


def test_the_html_check_sees_raw_markup() -> None:
    """check_html is not vacuous: markup let through raw, or quotes, are caught."""
    bundle = unescape_json.__globals__["_plotlyjs"]()
    for page in ('<td title="x"><script>PWN(1)</script></td>', '<td title=""\'>PWN">'):
        with pytest.raises(AssertionError):
            check_html(bundle + page)
    check_html(bundle + '<td title="&quot;&#x27;&gt;&lt;svg onload=PWN(3)&gt;">x</td>')


# -- bounded reading, owned files (issue 37) -------------------------------------------
FILE_KINDS = ("regular", "fifo", "socket", "directory", "link-to-device", "link-to-regular")


@settings(max_examples=60, **FAST)
@given(
    kind=st.sampled_from(FILE_KINDS),
    size=st.integers(min_value=0, max_value=4096),
    limit=st.integers(min_value=0, max_value=4096),
)
def test_read_bounded_reads_only_regular_files_and_never_past_its_limit(
    kind: str, size: int, limit: int
) -> None:
    """Whatever the path is, read_bounded returns at once: the bytes of a regular file
    within the limit, else NotRegularFile or TooLarge; it never blocks on a FIFO."""
    import os
    import socket

    from runtime.engine.files import NotRegularFile, TooLarge, read_bounded

    with tempfile.TemporaryDirectory() as folder:
        path, data = Path(folder) / "x.json", b"y" * size
        listener = None
        if kind in ("regular", "link-to-regular"):
            target = path if kind == "regular" else Path(folder) / "target"
            target.write_bytes(data)
            if kind == "link-to-regular":
                path.symlink_to(target)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(str(path))
        elif kind == "directory":
            path.mkdir()
        else:
            path.symlink_to("/dev/zero")
        try:
            if kind in ("regular", "link-to-regular"):
                if size > limit:
                    with pytest.raises(TooLarge):
                        read_bounded(path, limit)
                else:
                    assert read_bounded(path, limit) == data
            else:
                with pytest.raises(NotRegularFile):
                    read_bounded(path, limit)
        finally:
            if listener is not None:
                listener.close()


@settings(max_examples=25, **FAST)
@given(
    n=st.integers(min_value=1, max_value=400),
    series=st.lists(st.sampled_from([None, "a", "b"]), min_size=1, max_size=4),
    listed=st.booleans(),
)
def test_metric_lines_gives_each_metric_its_lines(n: int, series: list, listed: bool) -> None:
    """One line per scalar metric (plus a header and a heading per series): what the
    linear renderer prints is what the quadratic one printed."""
    from playground.formatting import metric_lines

    metrics = [
        Metric(
            f"m{i}",
            "s",
            [1.0, 2.0] if listed and i % 7 == 0 else i * 1e-3,
            predicted=i * 2e-3,
            series=series[i % len(series)],
        )
        for i in range(n)
    ]
    words = {"measured": "measured", "predicted": "predicted", "error": "error"}
    lines = metric_lines(metrics, words, language="en")
    groups = {m.series for m in metrics}
    headings = len(groups - {None})
    assert len(lines) == n + len(groups) + headings
    for metric in metrics:
        if not isinstance(metric.value, list):
            assert any(line.split() and line.split()[0] == metric.name for line in lines)
