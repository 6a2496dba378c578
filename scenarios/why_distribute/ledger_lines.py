"""The unit's spend ledger: its line format, and how a ledger's bytes are checked and totalled.

Lesson 0's cost discipline (docs/references.md, "Cost discipline": an
append-only spend ledger checked with the estimate before each launch, against
the unit's total ceiling). `playground budget` (playground.budget) reads it and
appends to it through scenarios.why_distribute.ledger (read, append) and
.ledger_lock, which holds the file, its lock, its key and its seal; this module is
pure: bytes in, a Ledger out.

One JSON line per event: a refusal; a reservation (`reserved`, its `id` and the
`reserved_usd` the guard may spend at most, written under the lock together with
the ceiling check); and the line that settles it (`settles` = that id; finished,
killed at its budget, failed, or interrupted by a signal, `how` says which) with
what it really cost. The total counts what was spent plus every reservation not
yet settled, so guards running at once can never promise more than the ceiling.

Each line is authenticated: `mac` = HMAC-SHA256, under the user's key, of the
line's other fields, `prev` (the previous line's mac) among them. An edited line
fails its mac and is not counted; a line removed, added or moved breaks the
chain at the line after it (reported; still counted, its content being
authentic); lines removed from the end are caught by the seal (ledger_lock: the
number of lines and the last mac, authenticated too). Every problem is reported
with its line number (`budget ledger` exits 1).

Legacy lines, written before lines were authenticated (a plain SHA-256 chain in
`checksum`), are still read so that past spend stays counted: while their chain
holds they are counted and reported as unauthenticated (anyone could have
rewritten them); one after an authenticated line is refused. The first
authenticated line chains to the last legacy checksum, so editing the legacy part
afterwards breaks that link.

Reading is bounded: a line longer than MAX_LINE bytes is reported, not parsed; a
line nested too deep for the JSON parser is reported as corrupt.

Imports: stdlib only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SETTLED = ("finished", "killed", "failed", "interrupted")
STATUSES = ("refused", "reserved", *SETTLED)
LEGACY_STATUSES = ("refused", "finished", "killed", "failed")
LEGACY_FIELDS = ("what", "estimate_usd", "actual_usd", "date", "status")
GENESIS = "0" * 64
MAX_LINE = 64 * 1024  # bytes: a line this tool writes is well under 4 KiB
MAX_WHAT = 1000  # characters of the command kept in a line


class LedgerError(ValueError):
    """The ledger cannot be used at all (a folder, too big, its key unreadable…): the
    catalog's `budget.ledger_<key>` says it (playground.budget), `str` in English."""

    def __init__(self, key: str, message: str, **values: object):
        super().__init__(message)
        self.key = key
        self.values = values


def ledger_path() -> Path:
    configured = os.environ.get("PLAYGROUND_LEDGER")
    if configured:
        return Path(configured)
    return default_folder() / "ledger.jsonl"


def default_folder() -> Path:
    """The user's data folder for the ledger (the project's own: kept 0700)."""
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "playground"


@dataclass(frozen=True)
class Entry:
    what: str
    estimate_usd: float
    actual_usd: float  # 0 for a refusal or a reservation: nothing spent yet
    date: str  # ISO 8601, UTC
    status: str
    id: str = ""  # a reservation's id
    reserved_usd: float = 0.0  # what a reservation holds of the ceiling
    settles: str = ""  # the reservation a final line settles
    how: str = ""  # how it ended: "exit 0", "budget", "SIGTERM"…
    legacy: bool = False  # read from an unauthenticated (pre-HMAC) line


@dataclass(frozen=True)
class BadLine:
    number: int  # 1-based
    why: str  # English; `key` + `values` say it in the catalogs (budget.why_<key>)
    key: str = "corrupt"
    counted: bool = False  # chain breaks: the line is authentic and counted, but reported
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Ledger:
    entries: list[Entry]
    bad: list[BadLine]
    last_mac: str  # what the next line chains to
    lines: int = 0  # physical lines in the file
    authenticated: int = 0  # lines with a mac (checked or not)
    ends_open: bool = False  # the file does not end with a newline (a torn write)

    @property
    def spent(self) -> float:
        """Dollars spent by the entries that count."""
        return sum(e.actual_usd for e in self.entries)

    @property
    def open_reservations(self) -> list[Entry]:
        settled = {e.settles for e in self.entries if e.settles}
        return [e for e in self.entries if e.status == "reserved" and e.id not in settled]

    @property
    def reserved(self) -> float:
        """Dollars held by guards still running (or killed before they could settle)."""
        return sum(e.reserved_usd for e in self.open_reservations)

    @property
    def committed(self) -> float:
        """What the ceiling has lost: spent plus reserved."""
        return self.spent + self.reserved

    @property
    def legacy(self) -> int:
        return sum(1 for e in self.entries if e.legacy)

    @property
    def not_counted(self) -> int:
        return sum(1 for b in self.bad if not b.counted)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def body(entry: Entry, prev: str) -> dict[str, Any]:
    """The fields a line stores (and its mac covers), `legacy` aside."""
    data = {k: v for k, v in asdict(entry).items() if k != "legacy"}
    return {"v": 2, **data, "prev": prev}


def mac(key: bytes, fields: dict[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()


def line(key: bytes, entry: Entry, prev: str) -> tuple[str, str]:
    """The JSON line for `entry` chained to `prev`, and its mac."""
    fields = body(entry, prev)
    tag = mac(key, fields)
    return json.dumps({**fields, "mac": tag}, ensure_ascii=False) + "\n", tag


def legacy_checksum(previous: str, entry: Entry) -> str:
    """The chain lines carried before they were authenticated (plain SHA-256)."""
    fields = {k: getattr(entry, k) for k in LEGACY_FIELDS}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{previous}\n{text}".encode()).hexdigest()


def seal_tag(key: bytes, lines: int, last: str) -> str:
    return mac(key, {"seal": 1, "lines": lines, "mac": last})


def verify(data: bytes, key: bytes | None, seal: dict[str, Any] | None) -> Ledger:
    """Every line of `data` checked: the entries that count, and each problem with its line."""
    entries: list[Entry] = []
    bad: list[BadLine] = []
    macs: dict[int, str] = {}
    previous = GENESIS
    seen_mac = False
    raw_lines = data.split(b"\n")
    ends_open = bool(raw_lines and raw_lines[-1])
    if not ends_open:
        raw_lines.pop()  # the empty piece after the final newline
    authenticated = 0
    for number, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        parsed = _parse(raw)
        if isinstance(parsed, BadLine):
            bad.append(BadLine(number, parsed.why, parsed.key, False, parsed.values))
            continue
        if "mac" in parsed:
            authenticated += 1
            seen_mac = True
            previous = _authenticated(parsed, number, key, previous, entries, bad, macs)
        elif seen_mac:
            bad.append(
                BadLine(number, "unauthenticated line after authenticated ones", "legacy_after")
            )
        else:
            previous = _legacy(parsed, number, previous, entries, bad)
    lines = len(raw_lines)
    if authenticated or seal is not None:  # a seal over a ledger now all legacy: rewritten
        bad.extend(_check_seal(key, seal, lines, macs))
    bad.sort(key=lambda b: b.number)
    return Ledger(entries, bad, previous, lines, authenticated, ends_open)


def _parse(raw: bytes) -> dict[str, Any] | BadLine:
    if len(raw) > MAX_LINE:
        return BadLine(0, f"longer than {MAX_LINE} bytes", "too_long", values={"max": MAX_LINE})
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):  # RecursionError: `[[[[…` nested beyond the parser
        return BadLine(0, "not JSON", "not_json")
    if not isinstance(data, dict):
        return BadLine(0, "not a JSON object", "not_object")
    return data


def _entry(data: dict[str, Any], statuses: tuple[str, ...], legacy: bool) -> Entry | BadLine:
    """The entry a parsed line states, or why it states none."""
    missing = [f for f in LEGACY_FIELDS if f not in data]
    if missing:
        return BadLine(
            0, f"missing {', '.join(missing)}", "missing", values={"fields": ", ".join(missing)}
        )
    dollars = [data["estimate_usd"], data["actual_usd"], data.get("reserved_usd", 0.0)]
    if any(
        isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0
        for v in dollars
    ):
        return BadLine(0, "dollars must be numbers of 0 or more", "dollars")
    texts = [data["what"], data["date"], *(data.get(k, "") for k in ("id", "settles", "how"))]
    if data["status"] not in statuses or not all(isinstance(v, str) for v in texts):
        return BadLine(0, f"status must be one of {', '.join(statuses)}", "status",
                       values={"statuses": ", ".join(statuses)})  # fmt: skip
    return Entry(
        data["what"],
        float(data["estimate_usd"]),
        float(data["actual_usd"]),
        data["date"],
        data["status"],
        data.get("id", ""),
        float(data.get("reserved_usd", 0.0)),
        data.get("settles", ""),
        data.get("how", ""),
        legacy,
    )


def _authenticated(
    data: dict[str, Any],
    number: int,
    key: bytes | None,
    previous: str,
    entries: list[Entry],
    bad: list[BadLine],
    macs: dict[int, str],
) -> str:
    """Check one authenticated line; returns what the next line chains to."""
    stated, prev = data.get("mac"), data.get("prev")
    if not isinstance(stated, str) or not isinstance(prev, str):
        bad.append(BadLine(number, "mac or prev is not text", "edited"))
        return previous
    macs[number] = stated
    if key is None:
        bad.append(BadLine(number, "the ledger's key is missing: cannot authenticate", "no_key"))
        return stated
    fields = {k: v for k, v in data.items() if k != "mac"}
    if not hmac.compare_digest(stated, mac(key, fields)):
        bad.append(BadLine(number, "its mac does not match: edited", "edited"))
        return stated
    entry = _entry(data, STATUSES, legacy=False)
    if isinstance(entry, BadLine):  # authentic yet meaningless: written by another version
        bad.append(BadLine(number, entry.why, entry.key, False, entry.values))
        return stated
    entries.append(entry)
    if prev != previous:
        why = "the line before it was removed, added or moved"
        bad.append(BadLine(number, why, "chain", counted=True))
    return stated


def _legacy(
    data: dict[str, Any], number: int, previous: str, entries: list[Entry], bad: list[BadLine]
) -> str:
    """Check one legacy (SHA-256-chained) line; returns what the next line chains to."""
    stated = data.get("checksum")
    stated = stated if isinstance(stated, str) else ""
    entry = _entry(data, LEGACY_STATUSES, legacy=True)
    if isinstance(entry, BadLine):
        bad.append(BadLine(number, entry.why, entry.key, False, entry.values))
        return stated or previous
    if stated != legacy_checksum(previous, entry):
        why = "checksum does not match: hand-edited, or a line removed"
        bad.append(BadLine(number, why, "checksum"))
    else:
        entries.append(entry)
    return stated


def _check_seal(
    key: bytes | None, seal: dict[str, Any] | None, lines: int, macs: dict[int, str]
) -> list[BadLine]:
    """Lines removed from the end leave a chain that holds: the seal (the count of lines
    and the last mac, written under the lock after each append) catches them."""
    last = max(macs) if macs else lines
    if key is None:  # every authenticated line is already reported as such
        return [] if macs else [BadLine(last, "the ledger's key is missing", "no_key", True)]
    if seal is None:
        return [BadLine(last, "the seal is missing: lines may have been removed", "no_seal", True)]
    count, tag = seal.get("lines"), seal.get("mac")
    if (
        not isinstance(count, int)
        or isinstance(count, bool)
        or not isinstance(tag, str)
        or not isinstance(seal.get("tag"), str)
        or not hmac.compare_digest(seal["tag"], seal_tag(key, count, tag))
    ):
        return [BadLine(last, "the seal was edited", "seal_edited", True)]
    if count > lines:
        why = f"lines removed from the end: {count} were written, {lines} remain"
        return [BadLine(lines + 1, why, "truncated", True, {"written": count, "left": lines})]
    if macs.get(count) != tag:
        return [BadLine(count, "not the line the seal recorded: replaced", "replaced", True)]
    return []
