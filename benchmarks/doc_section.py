"""A benchmark script's own section of docs/benchmarks.md: one current table per script.

docs/benchmarks.md holds the table of each script's last `--write` run, in a section
headed `## <script>.py: <what it measures>` and, on the next line, the command, the
date and the machine. A `--write` replaces its own section whole (from its heading to
the next `## ` heading) and keeps everything else as it is, the block between
`<!-- suite:start -->` and `<!-- suite:end -->` above all (benchmarks/suite_time.py
writes it, `write_suite`, and no section is ever looked for or written inside it).
Older tables move to docs/lab-notebook.md by hand, dated, when they are worth keeping.

Imports: stdlib only.
"""

from __future__ import annotations

import datetime
import os
import platform
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
SUITE_START, SUITE_END = "<!-- suite:start -->", "<!-- suite:end -->"


def machine() -> str:
    """This machine in one line: OS, architecture, cores, CPU model, Python, torch."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        model = f" ({names[0].partition(':')[2].strip()})" if names else ""
    try:
        torch = f", torch {metadata.version('torch')}"
    except metadata.PackageNotFoundError:
        torch = ""
    cores = os.cpu_count() or 0
    return (
        f"{platform.system()} {platform.machine()}, {cores} cores{model}, "
        f"Python {platform.python_version()}{torch}"
    )


def header(script: str, what: str, command: str) -> list[str]:
    """The first lines of a section: its heading, then the command, the date and the machine."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [f"## {script}: {what}", "", f"`{command}` · {now} · {machine()}", ""]


def _outside_suite(lines: list[str]) -> list[bool]:
    """For each line, whether it lies outside the suite's block."""
    out, inside = [], False
    for line in lines:
        if line.strip() == SUITE_START:
            inside = True
        out.append(not inside)
        if line.strip() == SUITE_END:
            inside = False
    return out


def write_section(script: str, section: list[str], doc: Path = DOC) -> None:
    """Replace the section of `script` (its heading `## <script>:`) with `section`, or add
    it at the end; every other line of `doc` is kept."""
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    lines = text.splitlines()
    free = _outside_suite(lines)
    prefix = f"## {script}:"
    start = next((i for i, line in enumerate(lines) if free[i] and line.startswith(prefix)), None)
    if start is None:
        lines += ["", *section]
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if not free[i] or lines[i].startswith("## ")),
            len(lines),
        )
        lines[start:end] = [*section, ""]
    _write(doc, lines)


def write_suite(section: list[str], doc: Path = DOC) -> None:
    """Replace what lies between the suite's markers with `section` (the markers are
    added at the end where `doc` has none); every other line of `doc` is kept."""
    lines = doc.read_text().splitlines() if doc.exists() else ["# Benchmarks"]
    stripped = [line.strip() for line in lines]
    if SUITE_START in stripped and SUITE_END in stripped:
        start, end = stripped.index(SUITE_START), stripped.index(SUITE_END)
        lines[start + 1 : end] = section
    else:
        lines += ["", SUITE_START, *section, SUITE_END]
    _write(doc, lines)


def _write(doc: Path, lines: list[str]) -> None:
    doc.write_text("\n".join(lines).rstrip("\n") + "\n")
