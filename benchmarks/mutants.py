"""Mutation check (issue 43, item 4): would the fast tests notice if the mechanism broke?

Each mutant is one small edit a slip could make in the code the lessons teach with: the
ring's all-gather chunk offset, ZeRO's shard rounding, the saved-run schema's rank
bound, Daly's formula, an `html.escape` of the HTML export. The working tree is copied
once into a temporary directory (never touched in place; git is not used); each edit is
applied to the copy, the fast subset's test files that concern it run there (`pytest -m
"not ranks"`, the copy first on PYTHONPATH, this interpreter), and the edit is undone. A
mutant is caught when at least one test fails; the table names the tests that did. The
same files run once unmutated first: a test failing there is reported and never counted
as a catch.

    python benchmarks/mutants.py [--only NAME] [--all] [--write]

`--all` runs the whole fast subset for each mutant instead of its files (minutes per
mutant on a 2-core machine); `--write` puts the table into its own section of
docs/benchmarks.md (benchmarks.doc_section). Where it sits: a benchmark script (the top
layer), reading the tree as files; it imports nothing of the project but doc_section.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.doc_section import header, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "mutants.py"
WHAT = "five mutants of the mechanism, each caught by the fast tests"
# What a copy of the tree leaves out: the interpreter (used in place), git, caches.
IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache",
    ".mypy_cache", "*.egg-info", "node_modules", ".import_linter_cache",
)  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the tree
    before: str  # must occur exactly once in the file
    after: str
    tests: tuple[str, ...]  # the fast subset's files that concern it


MUTANTS = (
    Mutant(
        "ring all-gather offset",
        "runtime/engine/collectives.py",
        "offset = 1 if reduce else 0",
        "offset = 1",
        ("tests/test_ring_program_numbers.py", "tests/test_shards_and_rings.py"),
    ),
    Mutant(
        "ZeRO shard rounding",
        "scenarios/zero/memory.py",
        "(r < numel % n)",
        "(r <= numel % n)",
        ("tests/test_zero.py", "tests/test_shards_and_rings.py"),
    ),
    Mutant(
        "schema rank bound",
        "playground/saved_types.py",
        "Rank = Annotated[int, Meta(ge=0, lt=1 << 20)]",
        "Rank = Annotated[int, Meta(ge=0, lt=1 << 62)]",
        ("tests/test_hostile_replay.py",),
    ),
    Mutant(
        "Daly formula",
        "scenarios/failure_resume/interval.py",
        "(1 + math.sqrt(x) / 3 + x / 9)",
        "(1 + math.sqrt(x) / 3 + x / 3)",
        ("tests/test_checkpoint.py", "tests/test_predict_scale.py"),
    ),
    Mutant(
        "HTML escaping (span hover)",
        "playground/export/timeline.py",
        'f"<b>{escape(span.label)}</b>",',
        'f"<b>{span.label}</b>",',
        (
            "tests/test_html_escaping.py",
            "tests/test_fuzz.py::test_html_export_escapes_every_generated_string",
        ),
    ),
)

FAILED = re.compile(r"^(FAILED|ERROR) (\S+)")


def copy_tree(dest: Path) -> Path:
    """The working tree as it is now (uncommitted files included) under `dest`."""
    tree = dest / "tree"
    shutil.copytree(ROOT, tree, ignore=IGNORED, symlinks=True)
    return tree


def mutate(tree: Path, mutant: Mutant) -> str:
    """Apply `mutant` in `tree`; returns the file's text before, to put back."""
    path = tree / mutant.path
    text = path.read_text(encoding="utf-8")
    found = text.count(mutant.before)
    if found != 1:
        raise SystemExit(f"{mutant.name}: {mutant.before!r} is in {mutant.path} {found} times")
    path.write_text(text.replace(mutant.before, mutant.after), encoding="utf-8")
    return text


def run_tests(tree: Path, files: list[str], timeout: float) -> tuple[set[str], int, float]:
    """The fast tests of `files` in `tree`: (the ids that failed or errored, exit status,
    seconds)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),  # before the editable install's finder: the copy's code
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = [sys.executable, "-m", "pytest", "-m", "not ranks", "-q", "-rfE", "--no-header"]
    command += ["-p", "no:cacheprovider", *files]
    started = time.perf_counter()
    result = subprocess.run(
        command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout
    )
    seconds = time.perf_counter() - started
    failed = {m.group(2) for line in result.stdout.splitlines() if (m := FAILED.match(line))}
    if result.returncode not in (0, 1) and not failed:  # a crash, not a test failing
        sys.stderr.write(result.stdout[-2000:] + result.stderr[-2000:])
    return failed, result.returncode, seconds


def short(test_id: str) -> str:
    """`tests/test_x.py::test_y[a-b]` as `test_x::test_y`: the case's parameters dropped."""
    path, _, name = test_id.partition("::")
    return f"{Path(path).stem}::{name.split('[')[0]}"


def caught_by(failed: set[str]) -> str:
    """The tests that failed, each once, with how many of its cases failed."""
    counts: dict[str, int] = {}
    for test_id in sorted(failed):
        counts[short(test_id)] = counts.get(short(test_id), 0) + 1
    return ", ".join(f"`{name}`" + (f" ×{n}" if n > 1 else "") for name, n in counts.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only the mutants whose name holds this")
    parser.add_argument("--all", action="store_true", help="the whole fast subset per mutant")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per pytest run")
    parser.add_argument("--write", action="store_true", help="write into docs/benchmarks.md")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if args.only in m.name]
    files_of = {m.name: ["tests"] if args.all else list(m.tests) for m in chosen}
    invoked = f"python benchmarks/{SCRIPT}" + (" --all" if args.all else "")
    invoked += f" --only {args.only}" if args.only else ""
    table = [
        *header(SCRIPT, WHAT, invoked),
        'Each mutant applied to a copy of the tree; `pytest -m "not ranks"` on '
        + ("the whole fast subset" if args.all else "the test files that concern it")
        + " there. Caught: at least one test fails (none fails unmutated). Seconds: one"
        " pytest run each, start included, on whatever else the machine runs.",
        "",
        "| mutant | edit | tests run | caught by | seconds |",
        "|---|---|---|---|---:|",
    ]
    with tempfile.TemporaryDirectory(prefix="playground-mutants-") as tmp:
        tree = copy_tree(Path(tmp))
        everything = sorted({f for files in files_of.values() for f in files})
        baseline, status, seconds = run_tests(tree, everything, args.timeout)
        print(f"unmutated: exit {status} in {seconds:.0f} s; failing: {sorted(baseline)}")
        survived = []
        for mutant in chosen:
            # One copy for all (what others change in the working tree meanwhile does not
            # reach it): each mutant applied, its tests run, the file put back.
            original = mutate(tree, mutant)
            try:
                failed, status, seconds = run_tests(tree, files_of[mutant.name], args.timeout)
            finally:
                (tree / mutant.path).write_text(original, encoding="utf-8")
            failed -= baseline
            if not failed:
                survived.append(mutant.name)
            edit = f"`{mutant.path}`: `{mutant.before}` → `{mutant.after}`".replace("|", "\\|")
            ran = ", ".join(f"`{Path(f).name}`" for f in files_of[mutant.name])
            verdict = caught_by(failed) if failed else "**survived**"
            row = f"| {mutant.name} | {edit} | {ran} | {verdict} | {seconds:.0f} |"
            table.append(row)
            print(row, flush=True)
    if baseline:
        table += ["", f"Failing unmutated (not counted): {caught_by(baseline)}."]
    print("\n".join(table))
    if args.write:
        write_section(SCRIPT, table)
    if survived:
        print(f"survived: {', '.join(survived)}", file=sys.stderr)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
