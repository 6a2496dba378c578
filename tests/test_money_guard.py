"""The budget guard as a money guard (issue 37, items 3, 4, 9's budget part, 10): it owns its
job and ends it on a signal before writing the ledger; the ledger is locked, reserved,
authenticated and bounded; numbers that mean nothing are refused with exit 2, one line."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cli_server import CliProcess

from playground.cli import main
from scenarios.why_distribute import ledger, ledger_lock
from scenarios.why_distribute.ledger import Entry, legacy_checksum

ONE = ["--gpu", "rtx4090", "--count", "1", "--hours", "0.1", "--allow-stale"]
# $1 an hour, one billed hour per real second: a $0.30 budget is spent in 0.3 s
FAST = ["--gpu", "rtx4090", "--count", "1", "--hours", "0.0001", "--price", "1"]


@pytest.fixture
def book(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "state" / "ledger.jsonl"
    monkeypatch.setenv("PLAYGROUND_LEDGER", str(path))
    monkeypatch.setenv("PLAYGROUND_LANG", "en")
    monkeypatch.setenv("PLAYGROUND_BUDGET_CLOCK", "1")
    return path


def said(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["budget", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


# -- item 9 (budget) and item 4's clocks: exit 2, one line, no traceback -----------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--count", "9" * 41], "--count"),
        (["--budget", "nan"], "--budget"),
        (["--budget", "-1"], "--budget"),
        (["--ceiling", "inf"], "--ceiling"),
        (["--ceiling", "1e400"], "--ceiling"),
        (["--from-plan", "x"], "--from-plan"),
        (["--from-plan", ",,,"], "--from-plan"),
        (["--hours", "nan"], "--hours"),
        (["--hours", "1e300", "--count", "100000", "--price", "1e300"], "too large"),
    ],
)
def test_numbers_that_mean_nothing_exit_2_in_one_line(book, capsys, args, needle):
    status, out, err = said(capsys, "estimate", *ONE, *args)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


@pytest.mark.parametrize("clock", ["nan", "-1000", "inf", "0", "soon"])
def test_a_clock_that_would_disable_the_guard_is_refused(book, capsys, monkeypatch, clock):
    monkeypatch.setenv("PLAYGROUND_BUDGET_CLOCK", clock)
    status, _, err = said(capsys, "guard", *ONE, "--budget", "0.05", "--", "true")
    assert status == 2 and "PLAYGROUND_BUDGET_CLOCK" in err
    assert not book.exists()  # refused before anything was reserved


def test_a_ledger_that_is_a_folder_is_one_line(book, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_LEDGER", str(tmp_path))
    for argv in (["ledger"], ["estimate", *ONE], ["guard", *ONE, "--", "true"]):
        status, _, err = said(capsys, *argv)
        assert status == 2 and len(err.strip().splitlines()) == 1
        assert "not a regular file" in err


def test_a_deeply_nested_line_is_reported_not_a_recursion_error(book, capsys):
    ledger.append("earlier", 1.0, 1.0, "finished", book)
    with book.open("a") as handle:
        handle.write("[" * 100_000 + "\n")
    status, out, err = said(capsys, "ledger")
    assert status == 1 and "ledger line 2: not counted" in err
    assert "Spent: $1.00" in out
    assert said(capsys, "estimate", *ONE)[0] == 0  # every command still works


def test_reading_is_bounded(book, capsys, monkeypatch):
    ledger.append("earlier", 1.0, 1.0, "finished", book)
    monkeypatch.setattr(ledger_lock, "MAX_BYTES", 100)
    status, _, err = said(capsys, "ledger")
    assert status == 2 and "over 100 bytes" in err


# -- item 10: a command's escape sequences never reach the terminal ----------------------


def test_escape_sequences_in_a_guarded_command_are_not_printed(book, capsys):
    evil = "\033]0;PWNED\007\033[2J"
    assert said(capsys, "guard", *ONE, "--budget", "0.05", "--", "true", evil)[0] == 0
    status, out, err = said(capsys, "ledger")
    assert status == 0 and "PWNED" in out
    assert not any(ch in out + err for ch in "\033\007")


# -- item 4: reservations, authentication, truncation, files -----------------------------


def test_a_running_guards_reservation_counts_against_the_ceiling(book, capsys):
    with ledger_lock.locked(book) as held:
        held.append(Entry("other guard", 4.5, 0.0, ledger.now(), "reserved", "abc", 4.5))
    dollar = ["--gpu", "rtx4090", "--count", "1", "--hours", "0.8", "--price", "1"]
    status, out, _ = said(capsys, "guard", *dollar, "--budget", "1", "--", "true")
    assert status == 3 and "$0.50 is left" in out  # only $0.50 of the $5 is not promised
    shown = said(capsys, "ledger")
    assert shown[0] == 0 and "Reserved by guards not settled" in shown[1] and "$4.50" in shown[1]


def test_an_edited_line_is_reported_with_its_line_number(book, capsys):
    for cost in (1.0, 2.0, 0.5):
        ledger.append("run", cost, cost, "finished", book)
    lines = book.read_text().splitlines()
    edited = json.loads(lines[1])
    edited["actual_usd"] = 0.0  # someone hides $2 of spend
    lines[1] = json.dumps(edited)
    book.write_text("\n".join(lines) + "\n")
    status, _, err = said(capsys, "ledger")
    assert status == 1 and "ledger line 2: not counted (its mac does not match: edited)" in err


def test_recomputing_the_old_sha256_chain_no_longer_hides_spend(book, capsys):
    for cost in (1.0, 2.0):
        ledger.append("run", cost, cost, "finished", book)
    rows = [json.loads(x) for x in book.read_text().splitlines()]
    previous = ledger.GENESIS
    forged = []
    for row in rows:  # the audit's attack: rewrite as legacy lines, $0 spent
        entry = Entry(row["what"], row["estimate_usd"], 0.0, row["date"], row["status"])
        fields = {k: getattr(entry, k) for k in ledger.LEGACY_FIELDS}
        previous = legacy_checksum(previous, entry)
        forged.append(json.dumps({**fields, "checksum": previous}))
    book.write_text("\n".join(forged) + "\n")
    status, _, err = said(capsys, "ledger")
    assert status == 1 and "seal" in err  # the seal still says 2 authenticated lines


@pytest.mark.parametrize("removed", ["last", "last two", "middle"])
def test_removed_lines_are_reported(book, capsys, removed):
    for cost in (1.0, 2.0, 0.5):
        ledger.append("run", cost, cost, "finished", book)
    lines = book.read_text().splitlines()
    kept = {"last": lines[:2], "last two": lines[:1], "middle": [lines[0], lines[2]]}[removed]
    book.write_text("\n".join(kept) + "\n")
    status, _, err = said(capsys, "ledger")
    assert status == 1
    expected = {"last": "line 3", "last two": "line 2", "middle": "line 2"}[removed]
    assert f"ledger {expected}:" in err


def test_legacy_ledgers_stay_counted_and_are_said_unauthenticated(book, capsys):
    book.parent.mkdir(mode=0o700)
    previous, rows = ledger.GENESIS, []
    for cost in (1.0, 0.5):  # what the code before issue 37 wrote
        at = datetime(2025, 1, 1, tzinfo=UTC).isoformat()  # an ISO time, as the guard writes
        entry = Entry("old run", cost, cost, at, "finished")
        previous = legacy_checksum(previous, entry)
        fields = {k: getattr(entry, k) for k in ledger.LEGACY_FIELDS}
        rows.append(json.dumps({**fields, "checksum": previous}))
    book.write_text("\n".join(rows) + "\n")
    status, out, err = said(capsys, "ledger")
    assert status == 0 and "Spent: $1.50" in out and "2 legacy lines" in out and err == ""
    ledger.append("new run", 0.25, 0.25, "finished", book)  # chains onto the legacy part
    status, out, err = said(capsys, "ledger")
    assert status == 0 and "Spent: $1.75" in out and err == ""
    lines = book.read_text().splitlines()
    old = json.loads(lines[0])
    old["actual_usd"] = 0.0
    old["checksum"] = legacy_checksum(ledger.GENESIS, Entry("old run", 1.0, 0.0, old["date"],
                                                            "finished"))  # fmt: skip
    lines[0] = json.dumps(old)
    book.write_text("\n".join(lines) + "\n")
    assert said(capsys, "ledger")[0] == 1  # the edit breaks the legacy chain or its link


def test_the_ledger_its_key_and_folder_are_private(book, capsys):
    assert said(capsys, "guard", *ONE, "--budget", "0.05", "--", "true")[0] == 0
    assert stat.S_IMODE(book.parent.stat().st_mode) == 0o700
    for path in (book, ledger_lock.key_path(book), ledger_lock.seal_path(book)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


# -- item 3: the guard owns its job ------------------------------------------------------


def _env(path: Path, marker: str, clock: str = "3600") -> dict[str, str]:
    return {
        **os.environ,
        "PLAYGROUND_LEDGER": str(path),
        "PLAYGROUND_BUDGET_CLOCK": clock,
        "PLAYGROUND_LANG": "en",
        "MONEY_GUARD_MARKER": marker,
    }


def _guard(path: Path, marker: str, budget: str, *job: str) -> CliProcess:
    """`playground budget guard … -- JOB` started as its own process, as Popen would start
    it (tests/cli_server.py: forked from one that has the CLI imported, so that fifty of
    them start at once without fifty interpreters' imports). Its job, and anything the job
    starts, carries the marker in its environment; the guard itself is never looked for
    by it (`_marked` leaves it out)."""
    # A budget above the $5 ceiling ("never killed here") is given a ceiling to match:
    # above it, --budget is an error (exit 2), not a cap.
    ceiling = ["--ceiling", budget] if float(budget) > 5 else []
    argv = ["budget", "guard", *FAST, *ceiling, "--budget", budget, "--", *job]
    return CliProcess(argv, env=_env(path, marker))


def _marked(marker: str, guard: CliProcess | None = None) -> list[int]:
    """Live processes carrying the marker in their environment (the guard's own aside)."""
    needle = f"MONEY_GUARD_MARKER={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        mine = guard is not None and int(name) == guard.pid
        if needle in environ.split(b"\0") and state != b"Z" and not mine:
            found.append(int(name))
    return found


def _wait_for(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _catches(pid: int, sig: int) -> bool:
    """Whether `pid` has a handler for `sig` (the guard's are installed together)."""
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("SigCgt:"):
            return bool(int(row.split()[1], 16) >> (sig - 1) & 1)
    return False


def _nothing_left(marker: str) -> None:
    deadline = time.monotonic() + 3.0
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _marked(marker)
    for pid in left:  # don't leave the test's own mess behind either
        os.kill(pid, signal.SIGKILL)
    assert left == [], "processes outlived the guard"


def _last(path: Path) -> Entry:
    return ledger.read(path).entries[-1]


DAEMON = "setsid sleep 317 & sleep 317"  # a `setsid` grandchild, and the job itself
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl")


@linux
@pytest.mark.ranks
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_while_the_job_runs_ends_it_and_is_recorded(tmp_path, sig):
    path, marker = tmp_path / "ledger.jsonl", uuid.uuid4().hex
    guard = _guard(path, marker, "1000", "sh", "-c", DAEMON)
    _wait_for(lambda: len(_marked(marker, guard)) >= 3)  # sh, its sleep and the setsid one
    guard.send_signal(sig)
    _, err = guard.communicate(timeout=20)
    assert guard.returncode == 128 + sig, err
    assert f"stopped by {sig.name}" in err
    _nothing_left(marker)
    last = _last(path)
    assert (last.status, last.how) == ("interrupted", sig.name) and last.actual_usd > 0
    assert not ledger.read(path).bad and not ledger.read(path).open_reservations


@linux
@pytest.mark.ranks
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_before_the_job_starts_starts_nothing(tmp_path, sig):
    path, marker = tmp_path / "ledger.jsonl", uuid.uuid4().hex
    ledger.append("earlier", 0.1, 0.1, "finished", path)
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the guard waits for the ledger, its handlers set
    try:
        guard = _guard(path, marker, "1", "sh", "-c", DAEMON)
        _wait_for(lambda: _catches(guard.pid, signal.SIGHUP))
        guard.send_signal(sig)
        time.sleep(0.1)
    finally:
        os.close(fd)
    _, err = guard.communicate(timeout=20)
    assert guard.returncode == 128 + sig, err
    _nothing_left(marker)
    last = _last(path)
    assert (last.status, last.how, last.actual_usd) == ("interrupted", sig.name, 0.0)


@linux
@pytest.mark.ranks
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signal_during_the_budget_kill_finishes_it(tmp_path, sig):
    path, marker = tmp_path / "ledger.jsonl", uuid.uuid4().hex
    stubborn = f"trap '' TERM; {DAEMON}"  # ignores SIGTERM: the guard waits its grace
    guard = _guard(path, marker, "0.3", "sh", "-c", stubborn)
    _wait_for(lambda: len(_marked(marker, guard)) >= 3)
    time.sleep(1.0)  # the budget is reached at 0.3 s: the guard is in its 2 s grace
    guard.send_signal(sig)
    _, err = guard.communicate(timeout=20)
    assert guard.returncode == 128 + sig, err
    _nothing_left(marker)
    last = _last(path)
    assert (last.status, last.how) == ("killed", f"budget, {sig.name}")
    assert last.actual_usd == pytest.approx(0.3)


@linux
@pytest.mark.ranks
def test_the_budget_kill_leaves_no_setsid_grandchild(tmp_path):
    path, marker = tmp_path / "ledger.jsonl", uuid.uuid4().hex
    guard = _guard(path, marker, "0.3", "sh", "-c", DAEMON)
    out, err = guard.communicate(timeout=20)
    assert guard.returncode == 3 and "Killed: its spend reached $0.30" in out, err
    _nothing_left(marker)


@linux
@pytest.mark.ranks
def test_a_job_that_ends_leaves_no_daemon_behind(tmp_path):
    path, marker = tmp_path / "ledger.jsonl", uuid.uuid4().hex
    guard = _guard(path, marker, "1000", "sh", "-c", "setsid sleep 317 & exit 0")
    guard.communicate(timeout=20)
    assert guard.returncode == 0
    _nothing_left(marker)
    assert (_last(path).status, _last(path).how) == ("finished", "exit 0")


@linux
@pytest.mark.ranks
def test_sigkill_of_the_guard_kills_its_job(tmp_path):
    path, marker = tmp_path / "ledger.jsonl", uuid.uuid4().hex
    guard = _guard(path, marker, "1000", "sleep", "317")
    _wait_for(lambda: len(_marked(marker, guard)) >= 1)
    guard.kill()
    guard.communicate(timeout=20)
    _nothing_left(marker)  # PR_SET_PDEATHSIG
    assert ledger.read(path).open_reservations  # not settled: still held against the ceiling


@linux
@pytest.mark.ranks
def test_fifty_guards_at_once_never_exceed_the_ceiling_nor_lose_a_line(tmp_path):
    path, marker = tmp_path / "ledger.jsonl", uuid.uuid4().hex
    # each accepted guard reserves $0.20 and is killed at it: at most 25 of 50 fit $5
    guards = [_guard(path, marker, "0.2", "sleep", "5") for _ in range(50)]
    codes = [g.communicate(timeout=120) and g.returncode for g in guards]
    assert set(codes) <= {3}, codes  # killed at the budget, or refused
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    book = ledger.read(path)
    assert not book.bad and not book.open_reservations
    assert len(rows) == len(book.entries) == 50 + sum(r["status"] == "reserved" for r in rows)
    assert sum(r["actual_usd"] for r in rows) == pytest.approx(book.spent)
    assert book.spent <= 5.0 + 1e-6
    assert sum(r["status"] == "killed" for r in rows) >= 20  # the ceiling was really used
    _nothing_left(marker)
