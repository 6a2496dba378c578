"""`playground budget`: the course's cost sentence, a guard that refuses to overspend, the ledger.

Lesson 0's budget guard as a real tool (issue 17; docs/references.md, "Cost
discipline"):

- `budget estimate --gpu rtx4090 --count 2 --hours 3 [--spot] [--setup 0.25h]
  [--price 0.35] [--margin 1.2] [--budget 3]` prints the sentence ("This starts
  2× RTX 4090 spot at ~$0.35/h each = $0.70/h, runs ~3 h including setup = $2.10.
  Budget: $3.00. Accepted, $0.90 to spare.") from the price table shipped in the
  repository (scenarios/why_distribute/prices.toml, its source and date said);
  a table older than 90 days is used with a warning that states its date and age
  (estimating spends nothing);
- `budget guard --budget 3 [the same options] -- CMD…` checks the estimate against
  the budget and what is left of the unit's ceiling ($5, --ceiling) after the
  ledger's spend and open reservations, and reserves the budget, both under the
  ledger's exclusive lock (scenarios.why_distribute.ledger_lock): guards started
  at once can never together promise more than the ceiling. Refused: exit 3, one
  line. Accepted: runs CMD as a job it owns (playground.guard: nothing CMD starts
  outlives the guard), kills it when its running cost reaches the budget, and
  settles the reservation with what it cost and how it ended; SIGINT, SIGTERM or
  SIGHUP end the job first, then the line is written, then exit 130/143/129.
  Because it spends, the guard refuses a stale table unless --price (a fresh
  quote) or --allow-stale is given, and checks that CMD exists before saying
  "Accepted";
- `budget ledger` shows the spend so far and every line it could not vouch for
  (edited, removed, truncated: exit 1, with the line number).

The hours can come from the why-distribute planner: `--from-plan params=7B,gpus=8`
(its recommended plan's GPUs and predicted training time). Bad input (a number
not finite or negative, a count beyond MAX_COUNT, a --budget above the ceiling,
an unusable ledger path): exit 2 and one line naming the option (a budget above
the ceiling names both, never capped in silence). `cloud plan` and `cloud launch`
(playground.cloud_plan, playground.cloud_launch) reuse `estimate`, `stale_note`,
`check_numbers` and the guard's ledger steps. `PLAYGROUND_BUDGET_CLOCK` (billed
seconds per real second, default 1, finite and above 0) lets the tests run a
guarded command at a fast clock. A ledger's text is printed through formatting.plain: a command's
escape sequences never reach the terminal.

The options checked, the estimate and its verdict: playground.budget_estimate (named
here too, as the cloud commands call them). Imports: the lesson's pure modules (no torch).
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import shlex
import shutil
import signal
import sys

from playground.budget_estimate import check_numbers, report_bad, stale_note, verdict_for, with_note
from playground.budget_estimate import estimate as estimate_of
from playground.formatting import plain
from playground.guard import Guard
from playground.i18n import default_language, t
from playground.usage import UsageError, os_reason
from scenarios.why_distribute import ledger, ledger_lock
from scenarios.why_distribute.budget import CEILING_USD, Estimate, sentence
from scenarios.why_distribute.gpus import GPUS
from scenarios.why_distribute.ledger import LedgerError
from scenarios.why_distribute.phrases import money, phrase

REFUSED = 3  # the guard's exit status when it refuses or kills


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("budget", help="cost sentence, budget guard and spend ledger of the unit")
    actions = p.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    for name, text in (
        ("estimate", "print the cost sentence of an experiment"),
        ("guard", "run a command only if it fits the budget; kill it at the budget"),
    ):
        a = actions.add_parser(name, help=text)
        a.add_argument("--gpu", default=None, help=f"one of {', '.join(GPUS)}")
        a.add_argument("--count", type=int, default=None, help="GPUs rented")
        a.add_argument("--hours", default=None, help="hours the experiment runs (3, 90min, 2.5h)")
        a.add_argument("--spot", action="store_true", help="spot (interruptible) prices")
        a.add_argument("--setup", default="0h", help="billed setup time (0.25h, 15min)")
        a.add_argument("--price", type=float, default=None, help="your own $ per GPU-hour")
        a.add_argument("--margin", type=float, default=1.0, help="safety margin (1 or more)")
        a.add_argument("--budget", type=float, default=None, help="this experiment's $")
        a.add_argument("--ceiling", type=float, default=CEILING_USD, help="the unit's total $")
        a.add_argument("--allow-stale", action="store_true", help="accept an old price table")
        a.add_argument("--from-plan", metavar="K=V,…", help="why-distribute params to plan")
        a.add_argument("--lang", choices=("es", "en"), default=None)
        if name == "guard":
            a.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command to run")
    ledger_p = actions.add_parser("ledger", help="the spend so far, from the ledger")
    ledger_p.add_argument("--lang", choices=("es", "en"), default=None)


def cmd_budget(args: argparse.Namespace) -> int:
    language = args.lang or default_language()
    try:
        if args.budget_command == "ledger":
            return _show_ledger(ledger.read(), language)
        check_numbers(args)
        if args.budget_command == "estimate":
            return _estimate_only(args, language)
        return _guard(args, language)
    except LedgerError as exc:
        raise UsageError.said(f"budget.ledger_{exc.key}", "ledger", **exc.values) from None


def _estimate_only(args: argparse.Namespace, language: str) -> int:
    book = ledger.read()
    report_bad(book, language)
    estimate = estimate_of(args, spending=False)
    verdict = verdict_for(args, estimate, book, language)
    print(with_note(sentence(verdict, language), stale_note(args, language)))
    return 0 if verdict.accepted else REFUSED


def billing_clock() -> float:
    """PLAYGROUND_BUDGET_CLOCK: billed seconds per real second (the tests' fast clock)."""
    text = os.environ.get("PLAYGROUND_BUDGET_CLOCK", "") or "1"
    try:
        clock = float(text)
    except ValueError:
        clock = math.nan
    if not (math.isfinite(clock) and clock > 0):
        raise UsageError.said("budget.clock", "clock", value=plain(text)[:40])
    return clock


def _guard(args: argparse.Namespace, language: str) -> int:
    """Reserve under the ledger's lock, run the job it owns, settle what it cost."""
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise UsageError.said("budget.guard_needs_cmd", "cmd")
    clock = billing_clock()
    what = shlex.join(command)
    estimate = estimate_of(args, spending=True)
    check_command(command[0])
    with Guard() as guard:  # signals caught from here on: nothing starts after one
        with ledger_lock.locked() as held:
            report_bad(held.book, language)
            verdict = verdict_for(args, estimate, held.book, language)
            budget = verdict.budget
            print(with_note(sentence(verdict, language), stale_note(args, language)), flush=True)
            if guard.received is not None:
                held.append(ledger_line(what, estimate, "interrupted", signame(guard.received)))
                return stopped(guard.received, 0.0, language)
            if not verdict.accepted or budget <= 0:  # nothing left: not even a start
                held.append(ledger_line(what, estimate, "refused"))
                return REFUSED
            reservation = held.append(ledger_line(what, estimate, "reserved", reserved=budget))
        rate = estimate.rate * estimate.margin  # $/h, margin included as in the estimate

        def cost(elapsed_s: float) -> float:
            return rate * (estimate.setup_hours + elapsed_s * clock / 3600)

        try:
            outcome = guard.run(command, lambda elapsed: cost(elapsed) >= budget)
        except OSError as exc:
            settle(reservation, estimate, "failed", "cannot start", 0.0)
            raise UsageError(
                t("budget.cannot_start", "en", cmd=plain(command[0]), reason=exc.strerror),
                "cmd",
                es=t("budget.cannot_start", "es", cmd=plain(command[0]),
                     reason=os_reason(exc, "es")),
            ) from None  # fmt: skip
        # The guard kills at the budget it reserved: never billed above it.
        spent = min(cost(outcome.elapsed_s), budget) if outcome.started else 0.0
        settle(reservation, estimate, outcome.status, outcome.how, spent)
    if outcome.received is not None:
        return stopped(outcome.received, spent, language)
    if outcome.status == "killed":
        print(phrase("guard_killed", language, spent=money(spent), budget=money(budget)))
        return REFUSED
    return outcome.returncode if outcome.returncode is not None else 1


def check_command(name: str) -> None:
    """The command can be started: a path to an executable file, or a name on PATH
    (exit 2 before the sentence, the reservation and any ledger line)."""
    if "/" in name:
        found = os.path.isfile(name) and os.access(name, os.X_OK)
    else:
        found = shutil.which(name) is not None
    if not found:
        raise UsageError.said("budget.no_command", "cmd", cmd=plain(name)[:200])


def ledger_line(
    what: str, estimate: Estimate, status: str, how: str = "", reserved: float = 0.0
) -> ledger.Entry:
    token = secrets.token_hex(8) if status == "reserved" else ""
    return ledger.Entry(what, round(estimate.cost, 6), 0.0, ledger.now(), status, token,
                        round(reserved, 6), "", how)  # fmt: skip


def settle(reservation: ledger.Entry, estimate: Estimate, status: str, how: str,
            spent: float) -> None:  # fmt: skip
    """The line that closes `reservation` with what was really spent and how it ended."""
    with ledger_lock.locked() as held:
        held.append(ledger.Entry(reservation.what, round(estimate.cost, 6), round(spent, 6),
                                 ledger.now(), status, "", 0.0, reservation.id, how))  # fmt: skip


def signame(signum: int) -> str:
    return signal.Signals(signum).name


def stopped(signum: int, spent: float, language: str) -> int:
    """One line on stderr, and the shell's status for a death by `signum` (130, 143, 129)."""
    print(t("budget.guard_stopped", language, signal=signame(signum), spent=money(spent)),
          file=sys.stderr)  # fmt: skip
    return 128 + signum


def _show_ledger(book: ledger.Ledger, language: str) -> int:
    """Every line, the problems on stderr, the total; exit 1 if anything was tampered with."""
    for e in book.entries:
        dollars = e.reserved_usd if e.status == "reserved" else e.actual_usd
        how = f" [{plain(e.how)}]" if e.how else ""
        legacy = f" ({t('budget.legacy_mark', language)})" if e.legacy else ""
        print(f"{plain(e.date)}  {e.status:<11} {money(dollars):>9} "
              f"(est. {money(e.estimate_usd)}){how}{legacy}  {plain(e.what)}")  # fmt: skip
    report_bad(book, language)
    print(phrase("ledger_total", language, spent=money(book.spent), ceiling=money(CEILING_USD),
                 left=money(round(CEILING_USD - book.committed, 6)),
                 bad=book.not_counted))  # fmt: skip
    if book.reserved:
        count = len(book.open_reservations)
        print(t("budget.ledger_reserved", language, reserved=money(book.reserved), count=count))
    if book.legacy:
        print(t("budget.ledger_legacy", language, count=book.legacy))
    return 1 if book.bad else 0
