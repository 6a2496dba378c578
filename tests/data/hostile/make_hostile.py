"""Writes the hostile corpus of `playground replay` (issue 11, "Trust boundaries").

Every entry starts from a valid saved run and breaks one thing: missing keys,
wrong types, string ranks, NaN/Infinity/1e400, huge and negative numbers,
deep nesting, terminal escape sequences and HTML markup in strings, truncated
files, bytes that are not UTF-8, params a lesson refuses; and torchrun `--out`
directories with a broken `run.json` or rank file. tests/test_hostile_replay.py
replays each one (text, `--json`, `--export`) and checks the outcome MANIFEST.json
gives it:

- "refuse": exit 2 with one line on stderr that contains `says` (what is wrong);
- "accept": exit 0 with a correct rendering;
- "any": either of those (hostile-looking but legal content, e.g. markup in a label:
  if accepted, the HTML export must escape it).

The valid starting points: `playground predict <lesson> --json` of every lesson
at a small size (cpu-default profile, so the output does not depend on this
machine's calibration), and the real runs tests/data/ring-allreduce-2ranks.json
and tests/data/pipeline-2stages.json (format 2). The torchrun directories are
fabricated in the shape runtime.engine.torchrun_rank writes (run.json from rank
0; rank<R>.json = {"rank", "result", "backend", "torch_version", "spans",
"counters"}) from the real ring-allreduce run's measured spans.

Regenerate (from the repository root, in the venv), then commit the result:

    python tests/data/hostile/make_hostile.py

It removes every generated entry first, so a renamed case leaves nothing behind;
the test reads the committed files and never regenerates them.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: the shared helpers
from jsonraw import Raw, dumps  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
ROOT = DATA.parent.parent

# Terminal escapes: set the window title, ring the bell, clear the screen.
ESC = "\x1b]0;pwned\x07\x1b[2J"
C1 = "csi\x9b31m"  # the 8-bit CSI
BIDI = "abc\u202edcba"  # right-to-left override: printable to JSON, not to a terminal
# Markup, each with a marker the test looks for unescaped in the HTML export.
SCRIPT = "<script>PWN(1)</script>"
IMG = "<img src=x onerror=PWN(2)>"
ATTR = "\"'><svg onload=PWN(3)>"
CLOSE = "</script><script>PWN(4)</script>"

MANIFEST: dict[str, dict[str, str]] = {}


# -- the valid starting points -------------------------------------------------------
def predict(lesson: str, *params: str) -> dict[str, Any]:
    args = ["predict", lesson, "--hardware", "cpu-default", "--json"]
    for p in params:
        args += ["-p", p]
    out = subprocess.run(
        [sys.executable, "-m", "playground.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def bases() -> dict[str, dict[str, Any]]:
    return {
        "ring": predict("ring-allreduce", "ranks=2", "repeat=1"),
        "zero": predict("zero", "ranks=2", "stage=zero1,zero3", "steps=1"),
        "pipe": predict("pipeline", "stages=2", "microbatches=2", "layers=2"),
        "resume": predict(
            "failure-resume",
            "ranks=2",
            "steps=4",
            "checkpoint_every=2",
            "microbatches=2",
            "batch=4",
        ),
        "ring_run": json.loads((DATA / "ring-allreduce-2ranks.json").read_text()),
        "pipe_run": json.loads((DATA / "pipeline-2stages.json").read_text()),
    }


# -- writing ----------------------------------------------------------------------
def entry(name: str, expect: str, says: str | tuple[str, ...] = ()) -> Path:
    """Record what `name` must do; `says`: what its one line of refusal must contain."""
    assert name not in MANIFEST, name
    assert expect in ("refuse", "accept", "any"), expect
    words = [says] if isinstance(says, str) else list(says)
    MANIFEST[name] = {"expect": expect, "says": [w for w in words if w]}
    return HERE / name


def write(name: str, content: Any, expect: str, says: str | tuple[str, ...] = ()) -> None:
    path = entry(name, expect, says)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(dumps(content), encoding="utf-8")


def mutated(doc: dict[str, Any], path: str, value: Any = ..., *, delete: bool = False) -> Any:
    """A copy of `doc` with the value at `path` ("predicted.0.rank") replaced or deleted."""
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node: Any = out
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    key: Any = int(last) if isinstance(node, list) else last
    if delete:
        del node[key]
    else:
        node[key] = value
    return out


def deep(levels: int) -> Raw:
    return Raw("[" * levels + "]" * levels)


# -- the `--json` documents ----------------------------------------------------------
def documents(b: dict[str, dict[str, Any]]) -> None:
    ring, run, pipe = b["ring"], b["ring_run"], b["pipe_run"]
    text = dumps(run)

    # Valid controls: each must replay.
    for key, doc in b.items():
        write(f"valid.{key}.json", doc, "accept")

    # Not JSON, or not a document at all.
    write("syntax.empty.json", b"", "refuse", "not JSON")
    write("syntax.whitespace.json", b" \n\t ", "refuse", "not JSON")
    write("syntax.truncated-half.json", text[: len(text) // 2], "refuse", "not JSON")
    write("syntax.truncated-last-byte.json", text[:-1], "refuse", "not JSON")
    latin1 = dumps(mutated(run, "measured.0.label", "@@")).encode().replace(b"@@", b"\xff\xfe")
    write("syntax.not-utf8.json", latin1, "refuse", "")
    skipped = dumps({**run, "extra": "@@"}).encode().replace(b"@@", b"\xff")
    write("syntax.not-utf8-in-unknown-key.json", skipped, "refuse", "UTF-8")
    write("syntax.utf8-bom.json", b"\xef\xbb\xbf" + text.encode(), "any")
    write("syntax.top-level-array.json", [run], "refuse", "")
    write("syntax.top-level-null.json", "null", "refuse", "")
    write("syntax.top-level-string.json", '"format 2"', "refuse", "")
    write("syntax.two-documents.json", text + "\n" + text, "refuse", "not JSON")
    garbage = bytes((i * 7919 + 13) % 256 for i in range(4096))
    write("syntax.binary-garbage.bin", garbage, "refuse", "")
    write("syntax.nan-literal-top.json", "NaN", "refuse", "not JSON")

    # Deep nesting (a recursive decoder overflows its stack).
    write("nesting.top-level.json", deep(10_000), "refuse", "")
    write("nesting.params-value.json", mutated(run, "params.size", deep(5_000)), "refuse", "")
    write("nesting.metric-value.json", mutated(run, "metrics.0.value", deep(5_000)), "refuse", "")
    write("nesting.unknown-key.json", {**run, "extra": deep(5_000)}, "any")
    write("nesting.span-label.json", mutated(run, "measured.0.label", deep(5_000)), "refuse", "")

    # The format and the scenario.
    old = {k: v for k, v in run.items() if k != "format"}
    old["metrics"] = {"time_s": {"measured_s": 0.001, "predicted_s": 0.001}}
    write("format.v1-document.json", old, "refuse", "format 1")
    write("format.string-2.json", mutated(run, "format", "2"), "refuse", "format")
    write("format.three.json", mutated(run, "format", 3), "refuse", "format")
    write("format.missing.json", mutated(run, "format", delete=True), "refuse", "format")
    write("scenario.missing.json", mutated(run, "scenario", delete=True), "refuse", "scenario")
    write("scenario.unknown.json", mutated(run, "scenario", "nope"), "refuse", "nope")
    write("scenario.escape.json", mutated(run, "scenario", ESC), "refuse", "scenario")
    write("scenario.integer.json", mutated(run, "scenario", 7), "refuse", "scenario")
    write("scenario.markup.json", mutated(run, "scenario", SCRIPT), "refuse", "unknown")

    # Params: parsed like the CLI's (predict's bounds), never trusted.
    write("params.missing.json", mutated(run, "params", delete=True), "refuse", "params")
    write("params.list.json", mutated(run, "params", [["ranks", 2]]), "refuse", "params")
    for what, value in [
        ("negative", -5),
        ("zero", 0),
        ("huge-int", Raw("1" + "0" * 30)),
        ("above-predict-max", 4097),
        ("word", "many"),
        ("fraction", 2.5),
        ("bool", True),
        ("nan", float("nan")),
        ("infinity", float("inf")),
        ("1e400", Raw("1e400")),
        ("null", None),
        ("dict", {"value": 2}),
    ]:
        says = "not JSON" if what in ("nan", "infinity") else "ranks"
        write(f"params.ranks-{what}.json", mutated(run, "params.ranks", value), "refuse", says)
    write("params.size-negative.json", mutated(run, "params.size", -1), "refuse", "size")
    write("params.size-not-whole.json", mutated(run, "params.size", 65535), "refuse", "size")
    write(
        "params.unknown-key.json",
        {**run, "params": {**run["params"], "rankz": 2}},
        "refuse",
        "rankz",
    )
    write(
        "params.key-escape.json",
        {**run, "params": {**run["params"], ESC: 2}},
        "refuse",
        "params",
    )
    write(
        "params.choice-markup.json",
        mutated(run, "params.algorithm", SCRIPT),
        "refuse",
        "algorithm",
    )
    write("params.choice-escape.json", mutated(run, "params.dtype", ESC), "refuse", "params")
    write(
        "params.pipeline-stages-1000.json",
        mutated(pipe, "params.stages", 1000),
        "refuse",
        "stages",
    )
    write(
        "params.pipeline-schedule-unknown.json",
        mutated(pipe, "params.schedule", ["gpipe", "zigzag"]),
        "refuse",
        "schedule",
    )
    write(
        "params.zero-dp-disagrees.json",
        {**b["zero"], "params": {**b["zero"]["params"], "dp": 64}},
        "refuse",
        "dp",
    )
    write(
        "params.zero-ranks-2pow40.json",
        mutated(b["zero"], "params.ranks", 1 << 40),
        "refuse",
        "ranks",
    )
    write(
        "params.resume-microbatches-3.json",
        mutated(b["resume"], "params.microbatches", 3),
        "refuse",
        "microbatches",
    )
    write("params.empty.json", mutated(ring, "params", {}), "any")  # every default

    # The predicted timeline and its spans.
    write("spans.predicted-missing.json", mutated(run, "predicted", delete=True), "refuse")
    write("spans.predicted-null.json", mutated(run, "predicted", None), "refuse", "predicted")
    write("spans.predicted-dict.json", mutated(run, "predicted", {"0": []}), "refuse")
    write("spans.predicted-empty.json", mutated(run, "predicted", []), "any")
    write("spans.measured-empty.json", mutated(run, "measured", []), "any")
    write("spans.missing-rank.json", mutated(run, "measured.0.rank", delete=True), "refuse")
    write("spans.missing-start.json", mutated(run, "predicted.3.start", delete=True), "refuse")
    for what, value, says in [
        ("string", "0", "rank"),
        ("markup", SCRIPT, "rank"),
        ("negative", -1, "rank"),
        ("2pow64", 1 << 64, "rank"),
        ("fraction", 1.5, "rank"),
        ("bool", True, "rank"),
        ("null", None, "rank"),
    ]:
        write(f"spans.rank-{what}.json", mutated(run, "measured.0.rank", value), "refuse", says)
    mixed = copy.deepcopy(run)
    for s in mixed["measured"]:
        if s["rank"] == 1:
            s["rank"] = "1"
    write("spans.rank-mixed-string-and-int.json", mixed, "refuse", "rank")
    write("spans.rank-outside-world.json", mutated(run, "measured.0.rank", 9), "any")
    write("spans.peer-outside-world.json", mutated(run, "predicted.0.peer", 9), "any")
    for what, value, says in [
        ("nan", float("nan"), "not JSON"),
        ("infinity", float("inf"), "not JSON"),
        ("1e400", Raw("1e400"), ""),
        ("string", "0.1", "start"),
        ("huge", 1e300, "start"),
    ]:
        write(f"spans.start-{what}.json", mutated(run, "measured.1.start", value), "refuse", says)
    span = run["measured"][1]
    write(
        "spans.end-before-start.json",
        mutated(run, "measured.1.end", span["start"] - 1),
        "refuse",
        "ends before",
    )
    write("spans.bytes-negative.json", mutated(run, "measured.1.bytes", -1), "refuse", "bytes")
    write("spans.peer-negative.json", mutated(run, "predicted.0.peer", -5), "refuse", "peer")
    write("spans.step-2pow40.json", mutated(run, "measured.1.step", 1 << 40), "refuse", "step")
    write("spans.kind-null.json", mutated(run, "measured.1.kind", None), "refuse", "kind")
    write("spans.label-escape.json", mutated(run, "measured.1.label", ESC), "refuse", "label")
    write("spans.label-c1.json", mutated(run, "measured.1.label", C1), "refuse", "label")
    write("spans.label-long.json", mutated(run, "measured.1.label", "x" * 10_000), "refuse")
    write("spans.label-bidi.json", mutated(run, "measured.1.label", BIDI), "any")
    write("spans.label-markup.json", mutated(run, "measured.1.label", SCRIPT), "any")
    write("spans.kind-markup.json", mutated(run, "measured.1.kind", IMG), "any")
    write("spans.series-markup.json", mutated(run, "measured.1.series", ATTR), "any")
    write("spans.action-id-markup.json", mutated(run, "measured.1.action_id", CLOSE), "any")
    zero_length = copy.deepcopy(run)
    for s in zero_length["measured"] + zero_length["predicted"]:
        s["end"] = s["start"] = 0.0
    write("spans.all-zero-length.json", zero_length, "any")
    wide = mutated(mutated(run, "measured.0.start", -1e9), "measured.0.end", 1e9)
    write("spans.wide-range.json", wide, "any")

    # Metrics.
    write(
        "metrics.format1-dict.json",
        mutated(run, "metrics", {"time_s": {"measured_s": 1}}),
        "refuse",
        "metrics",
    )
    write("metrics.name-escape.json", mutated(run, "metrics.0.name", ESC), "refuse", "name")
    write("metrics.name-markup.json", mutated(run, "metrics.0.name", SCRIPT), "any")
    write("metrics.name-missing.json", mutated(run, "metrics.0.name", delete=True), "refuse")
    write("metrics.unit-unknown.json", mutated(run, "metrics.0.unit", "furlongs"), "refuse")
    write("metrics.value-nan.json", mutated(run, "metrics.0.value", float("nan")), "refuse")
    write(
        "metrics.predicted-infinity.json",
        mutated(run, "metrics.0.predicted", float("-inf")),
        "refuse",
        "not JSON",
    )
    write("metrics.value-1e400.json", mutated(run, "metrics.0.value", Raw("1e400")), "refuse")
    huge = Raw("1" + "0" * 400)  # an integer no float holds
    write("metrics.value-int-10e400.json", mutated(run, "metrics.0.value", huge), "refuse", "value")
    write(
        "metrics.predicted-int-10e400.json",
        mutated(run, "metrics.0.predicted", huge),
        "refuse",
        "predicted",
    )
    write(
        "metrics.list-item-int-10e400.json",
        mutated(run, "metrics.6.value", [65536, huge]),
        "refuse",
        "value",
    )
    write("metrics.value-int-2pow62.json", mutated(run, "metrics.0.value", 1 << 62), "any")
    write(
        "params.resume-checkpoint-every-huge.json",
        mutated(b["resume"], "params.checkpoint_every", huge),
        "any",
    )
    write(
        "params.zero-params-10e400.json",
        mutated(b["zero"], "params.params", huge),
        "refuse",
        "params",
    )
    write("params.resume-mtbf-1e300.json", mutated(b["resume"], "params.mtbf", 1e300), "any")
    write("metrics.value-dict.json", mutated(run, "metrics.0.value", {"a": 1}), "refuse", "value")
    write("metrics.value-text-escape.json", mutated(run, "metrics.0.value", ESC), "refuse")
    write(
        "metrics.value-text-markup.json",
        mutated(mutated(run, "metrics.0.value", SCRIPT), "metrics.0.unit", "text"),
        "any",
    )
    write("metrics.error-lies.json", mutated(run, "metrics.0.error", 123.0), "accept")
    write("metrics.error-nan.json", mutated(run, "metrics.0.error", float("nan")), "refuse")
    write("metrics.category-markup.json", mutated(run, "metrics.0.category", IMG), "refuse")
    write("metrics.series-escape.json", mutated(run, "metrics.0.series", ESC), "refuse", "series")
    write("metrics.series-markup.json", mutated(run, "metrics.0.series", ATTR), "any")
    write("metrics.per-unknown.json", mutated(run, "metrics.0.per", "node"), "refuse", "per")
    write(
        "metrics.list-of-lists.json",
        mutated(run, "metrics.6.value", [[1, 2], [3]]),
        "refuse",
        "value",
    )
    write(
        "metrics.mismatched-lists.json",
        mutated(run, "metrics.6.predicted", [1, 2, 3]),
        "any",
    )

    # The profile.
    write("profile.missing.json", mutated(run, "profile", delete=True), "accept")
    write("profile.alpha-negative.json", mutated(run, "profile.alpha", -1.0), "refuse", "alpha")
    write("profile.alpha-nan.json", mutated(run, "profile.alpha", float("nan")), "refuse")
    write("profile.alpha-string.json", mutated(run, "profile.alpha", "fast"), "refuse", "alpha")
    write("profile.beta-zero.json", mutated(run, "profile.beta", 0.0), "any")
    write("profile.name-escape.json", mutated(run, "profile.name", ESC), "refuse", "name")
    write("profile.name-markup.json", mutated(run, "profile.name", SCRIPT), "any")
    write("profile.source-markup.json", mutated(run, "profile.source", ATTR), "any")
    write(
        "profile.compute-string.json",
        mutated(run, "profile.compute", {"F": "slow"}),
        "refuse",
        "compute",
    )
    write("profile.cores-zero.json", mutated(run, "profile.cores", 0), "refuse", "cores")

    # Counters and marks (the pipeline run has counters; marks are added).
    write("counters.rank-string.json", mutated(pipe, "counters.0.rank", "0"), "refuse", "rank")
    write(
        "counters.value-infinity.json",
        mutated(pipe, "counters.0.value", float("inf")),
        "refuse",
        "not JSON",
    )
    write("counters.category-markup.json", mutated(pipe, "counters.0.category", IMG), "any")
    write("counters.rank-outside-world.json", mutated(pipe, "counters.0.rank", 40), "any")
    mark = {"t": 0.001, "kind": "failure", "label": "rank 1 killed", "rank": 1}
    write("marks.valid.json", {**run, "marks": [mark]}, "accept")
    write("marks.label-markup.json", {**run, "marks": [{**mark, "label": SCRIPT}]}, "any")
    write("marks.kind-markup.json", {**run, "marks": [{**mark, "kind": CLOSE}]}, "any")
    write("marks.label-escape.json", {**run, "marks": [{**mark, "label": ESC}]}, "refuse")
    write(
        "marks.t-infinity.json",
        {**run, "marks": [{**mark, "t": float("inf")}]},
        "refuse",
        "not JSON",
    )
    write("marks.rank-string.json", {**run, "marks": [{**mark, "rank": "1"}]}, "refuse", "rank")
    write("marks.rank-outside-world.json", {**run, "marks": [{**mark, "rank": 999}]}, "any")
    write("marks.no-measured.json", {**ring, "marks": [mark]}, "any")

    # Curves (the failure-resume prediction draws one).
    resume = b["resume"]
    write("curves.x-strings.json", mutated(resume, "curves.0.x", ["1", "2"]), "refuse", "x")
    write("curves.x-nan.json", mutated(resume, "curves.0.x.0", float("nan")), "refuse")
    write("curves.title-markup.json", mutated(resume, "curves.0.title", SCRIPT), "any")
    write("curves.title-escape.json", mutated(resume, "curves.0.title", ESC), "refuse", "title")
    line = next(iter(resume["curves"][0]["lines"]))
    write(
        "curves.line-name-markup.json",
        mutated(resume, "curves.0.lines", {IMG: resume["curves"][0]["lines"][line]}),
        "any",
    )
    write("curves.line-too-short.json", mutated(resume, f"curves.0.lines.{line}", [0.5]), "any")
    write("curves.empty-x.json", mutated(resume, "curves.0.x", []), "any")
    write(
        "curves.mark-negative.json",
        mutated(resume, "curves.0.marks", {ATTR: -5.0, "zero": 0.0}),
        "any",
    )
    write("curves.y-unit-unknown.json", mutated(resume, "curves.0.y_unit", "parsec"), "refuse")

    # The backend.
    write("backend.escape.json", mutated(run, "backend", ESC), "refuse", "backend")
    write("backend.markup.json", mutated(run, "backend", SCRIPT), "any")
    write("backend.integer.json", mutated(run, "backend", 1), "refuse", "backend")


# -- torchrun --out directories ----------------------------------------------------------
def torchrun_base(run: dict[str, Any]) -> dict[str, Any]:
    """{file name: document} of a 2-rank ring-allreduce torchrun --out dir."""
    files: dict[str, Any] = {
        "run.json": {
            "scenario": run["scenario"],
            "params": run["params"],
            "world_size": 2,
            "backend": "gloo",
            "launcher": "torchrun",
        }
    }
    sent = run["params"]["size"]  # 2S(n-1)/n on 2 ranks
    for rank in range(2):
        files[f"rank{rank}.json"] = {
            "rank": rank,
            "result": {
                "compute_costs": {},
                "p2p": [],
                "bytes_sent_per_iteration": sent,
                "max_abs_diff_vs_builtin": 0.0,
                "equals_builtin": True,
            },
            "backend": "gloo",
            "torch_version": "2.13.0+cpu",
            "spans": [s for s in run["measured"] if s["rank"] == rank],
            "counters": [],
        }
    return files


def torchrun_dir(
    name: str, files: dict[str, Any], expect: str, says: str | tuple[str, ...] = ()
) -> None:
    path = entry(name, expect, says)
    path.mkdir()
    for file, content in files.items():
        target = path / file
        if content is None:  # a directory where a file should be (not empty: git keeps it)
            target.mkdir()
            (target / "keep").write_text("a directory where a file should be\n")
        elif isinstance(content, bytes):
            target.write_bytes(content)
        elif isinstance(content, str):
            target.write_text(content, encoding="utf-8")
        else:
            target.write_text(dumps(content), encoding="utf-8")


def torchrun_dirs(b: dict[str, dict[str, Any]]) -> None:
    base = torchrun_base(b["ring_run"])
    meta, r0, r1 = base["run.json"], base["rank0.json"], base["rank1.json"]

    def with_(file: str, doc: Any) -> dict[str, Any]:
        return {**base, file: doc}

    def without(file: str) -> dict[str, Any]:
        return {k: v for k, v in base.items() if k != file}

    torchrun_dir("torchrun.valid", base, "accept")
    torchrun_dir("torchrun.extra-rank2-file", with_("rank2.json", r1), "any")
    torchrun_dir("torchrun.no-run-json", without("run.json"), "refuse", "run.json")
    torchrun_dir("torchrun.run-json-is-a-dir", with_("run.json", None), "refuse", "run.json")
    torchrun_dir(
        "torchrun.run-json-empty", with_("run.json", b""), "refuse", ("run.json", "not JSON")
    )
    text = dumps(meta)
    torchrun_dir(
        "torchrun.run-json-truncated",
        with_("run.json", text[: len(text) // 2]),
        "refuse",
        ("run.json", "not JSON"),
    )
    torchrun_dir(
        "torchrun.run-json-not-utf8",
        with_("run.json", text.encode().replace(b"gloo", b"gl\xff\xfeo")),
        "refuse",
        ("run.json", "UTF-8"),
    )
    torchrun_dir(
        "torchrun.run-json-not-utf8-in-unknown-key",
        with_("run.json", dumps({**meta, "note": "@@"}).encode().replace(b"@@", b"\xff")),
        "refuse",
        ("run.json", "UTF-8"),
    )
    torchrun_dir("torchrun.run-json-list", with_("run.json", [meta]), "refuse", "run.json")
    for what, value, says in [
        ("missing", ..., "world_size"),
        ("string", "2", "world_size"),
        ("zero", 0, "world_size"),
        ("negative", -1, "world_size"),
        ("huge", 10**9, "world_size"),
        ("disagrees", 3, "3 ranks"),
        ("nan", float("nan"), "not JSON"),
    ]:
        doc = mutated(meta, "world_size", delete=True) if value is ... else {**meta}
        if value is not ...:
            doc["world_size"] = value
        torchrun_dir(
            f"torchrun.world-size-{what}", with_("run.json", doc), "refuse", ("run.json", says)
        )
    torchrun_dir(
        "torchrun.params-ranks-negative",
        with_("run.json", mutated(meta, "params.ranks", -5)),
        "refuse",
        ("run.json", "ranks"),
    )
    torchrun_dir(
        "torchrun.params-missing",
        with_("run.json", mutated(meta, "params", delete=True)),
        "refuse",
        ("run.json", "params"),
    )
    torchrun_dir(
        "torchrun.scenario-unknown",
        with_("run.json", {**meta, "scenario": "nope"}),
        "refuse",
        ("run.json", "nope"),
    )
    torchrun_dir(
        "torchrun.backend-escape",
        with_("run.json", {**meta, "backend": ESC}),
        "refuse",
        ("run.json", "backend"),
    )
    torchrun_dir("torchrun.backend-markup", with_("run.json", {**meta, "backend": SCRIPT}), "any")
    torchrun_dir("torchrun.no-rank1", without("rank1.json"), "refuse", "rank1.json")
    torchrun_dir("torchrun.rank1-is-a-dir", with_("rank1.json", None), "refuse", "rank1.json")
    torchrun_dir("torchrun.rank1-holds-rank0", with_("rank1.json", r0), "refuse", "another rank")
    torchrun_dir(
        "torchrun.rank1-span-of-rank0",
        with_("rank1.json", mutated(r1, "spans.0.rank", 0)),
        "refuse",
        "another rank",
    )
    torchrun_dir(
        "torchrun.rank1-rank-string",
        with_("rank1.json", mutated(r1, "rank", "1")),
        "refuse",
        ("rank1.json", "rank"),
    )
    torchrun_dir(
        "torchrun.rank1-span-rank-string",
        with_("rank1.json", mutated(r1, "spans.0.rank", "1")),
        "refuse",
        ("rank1.json", "rank"),
    )
    rank_text = dumps(r1)
    torchrun_dir(
        "torchrun.rank1-truncated",
        with_("rank1.json", rank_text[: len(rank_text) // 3]),
        "refuse",
        ("rank1.json", "not JSON"),
    )
    torchrun_dir(
        "torchrun.rank1-empty", with_("rank1.json", b""), "refuse", ("rank1.json", "not JSON")
    )
    torchrun_dir(
        "torchrun.rank1-span-nan",
        with_("rank1.json", mutated(r1, "spans.0.end", float("nan"))),
        "refuse",
        ("rank1.json", "not JSON"),
    )
    torchrun_dir(
        "torchrun.rank1-span-label-escape",
        with_("rank1.json", mutated(r1, "spans.0.label", ESC)),
        "refuse",
        ("rank1.json", "label"),
    )
    torchrun_dir(
        "torchrun.rank1-span-label-markup",
        with_("rank1.json", mutated(r1, "spans.0.label", SCRIPT)),
        "any",
    )
    torchrun_dir(
        "torchrun.rank1-counter-infinity",
        with_(
            "rank1.json",
            {**r1, "counters": [{"rank": 1, "category": "x", "t": 0.0, "value": float("inf")}]},
        ),
        "refuse",
        "not JSON",
    )
    result = "result"
    for what, field, value, says in [
        ("missing-field", "equals_builtin", ..., "equals_builtin"),
        ("bool-as-string", "equals_builtin", "yes", "equals_builtin"),
        ("diff-1e400", "max_abs_diff_vs_builtin", Raw("1e400"), ""),
        ("diff-nan", "max_abs_diff_vs_builtin", float("nan"), "not JSON"),
        ("bytes-string", "bytes_sent_per_iteration", "65536", "bytes_sent_per_iteration"),
        ("deep-nesting", "max_abs_diff_vs_builtin", deep(5_000), ""),
        ("unknown-deep-nesting", "notes", deep(5_000), ""),
        ("unknown-key-escape", ESC, 1, ""),
        ("unknown-text-escape", "notes", ESC, ""),
        ("compute-costs-string", "compute_costs", {"reduce": "fast"}, "compute_costs"),
        ("compute-costs-nested", "compute_costs", {"reduce": {"a": 1}}, "compute_costs"),
        ("p2p-string", "p2p", [["a", "b"]], "p2p"),
    ]:
        doc = copy.deepcopy(r1)
        if value is ...:
            del doc[result][field]
        else:
            doc[result][field] = value
        expect = "any" if what == "unknown-text-escape" else "refuse"
        torchrun_dir(
            f"torchrun.result-{what}", with_("rank1.json", doc), expect, ("rank1.json", says)
        )
    # Finite but absurd: the prediction is refined with them (runtime.fit.refine.refine).
    for what, field, value in [
        ("p2p-1e308", "p2p", [[0, 1e308], [1, 1e308]]),
        ("p2p-negative", "p2p", [[-1, -1.0]]),
        ("compute-costs-1e308", "compute_costs", {"reduce": 1e308, "all_reduce": 1e308}),
        ("compute-costs-negative", "compute_costs", {"reduce": -1.0}),
    ]:
        files = dict(base)
        for rank, doc in (("rank0.json", r0), ("rank1.json", r1)):
            files[rank] = {**doc, result: {**doc[result], field: value}}
        torchrun_dir(f"torchrun.result-{what}", files, "refuse", ("rank0.json", field))
    bounded = dict(base)
    for rank, doc in (("rank0.json", r0), ("rank1.json", r1)):
        costs = {"compute_costs": {"reduce": 1e6}, "p2p": [[65536, 1e6]]}
        bounded[rank] = {**doc, result: {**doc[result], **costs}}
    torchrun_dir("torchrun.result-costs-at-the-bound", bounded, "any")


def main() -> None:
    for old in HERE.iterdir():
        if old.name in (Path(__file__).name, "__pycache__"):
            continue
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
    b = bases()
    documents(b)
    torchrun_dirs(b)
    (HERE / "MANIFEST.json").write_text(json.dumps(MANIFEST, indent=1, sort_keys=True) + "\n")
    refuse = sum(1 for v in MANIFEST.values() if v["expect"] == "refuse")
    print(f"{len(MANIFEST)} entries ({refuse} to refuse) in {HERE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
