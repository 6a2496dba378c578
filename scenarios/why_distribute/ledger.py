"""The unit's spend ledger, as its users read and append to it.

Lesson 0's cost discipline (docs/references.md, "Cost discipline"). Two modules
hold it, one below the other: scenarios.why_distribute.ledger_lines says what a
line is and checks and totals a ledger's bytes (pure: bytes in, a Ledger out), and
.ledger_lock, built on it, is the only module that opens the files (the ledger
under its lock, its key, its seal). This one puts them together for their users
(playground.budget, the tests): the names of a line, and `read` and `append` under
the lock.

Imports: the two ledger modules (stdlib only below them).
"""

from __future__ import annotations

from scenarios.why_distribute.ledger_lines import (
    GENESIS,
    LEGACY_FIELDS,
    LEGACY_STATUSES,
    MAX_LINE,
    MAX_WHAT,
    SETTLED,
    STATUSES,
    BadLine,
    Entry,
    Ledger,
    LedgerError,
    body,
    default_folder,
    ledger_path,
    legacy_checksum,
    line,
    mac,
    now,
    seal_tag,
    verify,
)
from scenarios.why_distribute.ledger_lock import append, read

__all__ = [
    "GENESIS",
    "LEGACY_FIELDS",
    "LEGACY_STATUSES",
    "MAX_LINE",
    "MAX_WHAT",
    "SETTLED",
    "STATUSES",
    "BadLine",
    "Entry",
    "Ledger",
    "LedgerError",
    "append",
    "body",
    "default_folder",
    "ledger_path",
    "legacy_checksum",
    "line",
    "mac",
    "now",
    "read",
    "seal_tag",
    "verify",
]
