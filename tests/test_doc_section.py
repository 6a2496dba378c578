"""docs/benchmarks.md's sections: each script replaces its own, the suite's block is kept apart.

benchmarks/doc_section.py writes a script's table (`write_section`) and the test suite's
timings between their markers (`write_suite`, benchmarks/suite_time.py); neither touches
anything else in the file.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# benchmarks/ is the repository's folder of scripts, not an installed package: loaded by path.
_SPEC = importlib.util.spec_from_file_location(
    "doc_section", Path(__file__).resolve().parents[1] / "benchmarks" / "doc_section.py"
)
assert _SPEC is not None and _SPEC.loader is not None
doc_section = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(doc_section)
SUITE_START, SUITE_END = doc_section.SUITE_START, doc_section.SUITE_END
write_section, write_suite = doc_section.write_section, doc_section.write_suite

DOC = f"""# Benchmarks

intro

## a.py: first

old a

{SUITE_START}
## suite_time.py: old suite
## a.py: a heading inside the block is never taken for a's section
{SUITE_END}

## b.py: second

old b
"""


def test_a_section_replaces_its_own_and_keeps_the_suites_block(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    write_section("a.py", ["## a.py: first", "", "new a"], doc)
    text = doc.read_text()
    assert "new a" in text and "old a" not in text and "old b" in text
    assert "## a.py: a heading inside the block" in text and text.count(SUITE_START) == 1


def test_the_suite_replaces_what_lies_between_its_markers_only(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    write_suite(["## suite_time.py: new suite", "", "| a | table |"], doc)
    lines = doc.read_text().splitlines()
    start, end = lines.index(SUITE_START), lines.index(SUITE_END)
    assert lines[start + 1 : end] == ["## suite_time.py: new suite", "", "| a | table |"]
    assert "old a" in lines and "old b" in lines and "old suite" not in doc.read_text()


def test_a_doc_without_markers_gets_the_suite_at_its_end(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## a.py: first\n")
    write_suite(["## suite_time.py: suite"], doc)
    assert doc.read_text().endswith(f"{SUITE_START}\n## suite_time.py: suite\n{SUITE_END}\n")
    assert "## a.py: first" in doc.read_text()
