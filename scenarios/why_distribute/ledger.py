"""The unit's spend ledger: every cloud experiment, appended as one JSON line, never rewritten.

Lesson 0's cost discipline (shared/REFERENCES.md, "Cost discipline": an
append-only spend ledger checked with the estimate before each launch, against
the unit's total ceiling). `playground budget` (playground.budget) reads it
before a launch and appends to it: a refusal, or a run's estimate and, once it
ends, what it really cost.

Each line holds one entry: what ran, its estimate and actual dollars, the
date, its status (refused, finished, killed at its budget, failed) and a
checksum chained to the line before it (SHA-256 of the previous checksum and
this entry). A line that is not JSON, lacks a field, or whose checksum does not
match (hand-edited, or the chain broken by a line removed before it) is
reported and not counted: the total says how many lines it left out. The file
is only ever opened to append (O_APPEND); nothing here rewrites or truncates it.

Where: `$PLAYGROUND_LEDGER` if set, else the user's data directory
(`$XDG_DATA_HOME/playground/ledger.jsonl`, by default ~/.local/share/...).

Imports: stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

STATUSES = ("refused", "finished", "killed", "failed")
FIELDS = ("what", "estimate_usd", "actual_usd", "date", "status")
GENESIS = "0" * 64


def ledger_path() -> Path:
    configured = os.environ.get("PLAYGROUND_LEDGER")
    if configured:
        return Path(configured)
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "playground" / "ledger.jsonl"


@dataclass(frozen=True)
class Entry:
    what: str
    estimate_usd: float
    actual_usd: float  # 0 for a refusal: nothing ran
    date: str  # ISO 8601, UTC
    status: str


@dataclass(frozen=True)
class BadLine:
    number: int  # 1-based
    why: str


@dataclass(frozen=True)
class Ledger:
    entries: list[Entry]
    bad: list[BadLine]
    last_checksum: str

    @property
    def spent(self) -> float:
        """Dollars spent by the entries that check out."""
        return sum(e.actual_usd for e in self.entries)


def checksum(previous: str, entry: Entry) -> str:
    body = json.dumps(asdict(entry), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{previous}\n{body}".encode()).hexdigest()


def read(path: Path | None = None) -> Ledger:
    """Every line: the entries that check out, and the others with why not."""
    path = path or ledger_path()
    entries: list[Entry] = []
    bad: list[BadLine] = []
    previous = GENESIS
    if not path.exists():
        return Ledger(entries, bad, previous)
    with path.open(encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        entry, stated, why = _parse(line)
        if entry is None:
            bad.append(BadLine(number, why))
            previous = stated or previous
            continue
        if stated != checksum(previous, entry):
            bad.append(BadLine(number, "checksum does not match: hand-edited, or a line removed"))
        else:
            entries.append(entry)
        previous = stated
    return Ledger(entries, bad, previous)


def _parse(line: str) -> tuple[Entry | None, str, str]:
    try:
        data = json.loads(line)
    except ValueError:
        return None, "", "not JSON"
    if not isinstance(data, dict):
        return None, "", "not a JSON object"
    stated = data.get("checksum")
    stated = stated if isinstance(stated, str) else ""
    missing = [f for f in FIELDS if f not in data]
    if missing:
        return None, stated, f"missing {', '.join(missing)}"
    money = [data["estimate_usd"], data["actual_usd"]]
    if any(
        isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0
        for v in money
    ):
        return None, stated, "dollars must be numbers of 0 or more"
    if data["status"] not in STATUSES or not isinstance(data["what"], str):
        return None, stated, f"status must be one of {', '.join(STATUSES)}"
    entry = Entry(
        str(data["what"]),
        float(data["estimate_usd"]),
        float(data["actual_usd"]),
        str(data["date"]),
        str(data["status"]),
    )
    return entry, stated, ""


def append(
    what: str, estimate_usd: float, actual_usd: float, status: str, path: Path | None = None
) -> Entry:
    """Append one entry, chained to the last line's checksum; O_APPEND, never a rewrite."""
    path = path or ledger_path()
    if status not in STATUSES:
        raise ValueError(f"status {status!r}")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    entry = Entry(what, round(estimate_usd, 6), round(actual_usd, 6), _now(), status)
    line = {**asdict(entry), "checksum": checksum(read(path).last_checksum, entry)}
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    return entry


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
