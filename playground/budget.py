"""`playground budget`: the course's cost sentence, a guard that refuses to overspend, the ledger.

Lesson 0's budget guard as a real tool (issue 17; docs/references.md, "Cost
discipline"):

- `budget estimate --gpu rtx4090 --count 2 --hours 3 [--spot] [--setup 0.25h]
  [--price 0.35] [--margin 1.2] [--budget 3]` prints the sentence ("This starts
  2× RTX 4090 spot at ~$0.35/h each = $0.70/h, runs ~3 h including setup = $2.10.
  Budget: $3.00. Accepted, $0.90 to spare.") from the price table shipped in the
  repository (scenarios/why_distribute/prices.toml, its source and date said),
  refusing a table older than 90 days unless --price or --allow-stale;
- `budget guard --budget 3 [the same options] -- CMD…` checks the estimate against
  the budget and what is left of the unit's ceiling ($5, --ceiling) after the
  ledger's spend and open reservations, and reserves the budget, both under the
  ledger's exclusive lock (scenarios.why_distribute.ledger_lock): guards started
  at once can never together promise more than the ceiling. Refused: exit 3, one
  line. Accepted: runs CMD as a job it owns (playground.guard: nothing CMD starts
  outlives the guard), kills it when its running cost reaches the budget, and
  settles the reservation with what it cost and how it ended; SIGINT, SIGTERM or
  SIGHUP end the job first, then the line is written, then exit 130/143/129;
- `budget ledger` shows the spend so far and every line it could not vouch for
  (edited, removed, truncated: exit 1, with the line number).

The hours can come from the why-distribute planner: `--from-plan params=7B,gpus=8`
(its recommended plan's GPUs and predicted training time). Bad input (a number
not finite or negative, a count beyond MAX_COUNT, an unusable ledger path): exit
2 and one line naming the option. `PLAYGROUND_BUDGET_CLOCK` (billed seconds per
real second, default 1, finite and above 0) lets the tests run a guarded command
at a fast clock. A ledger's text is printed through formatting.plain: a command's
escape sequences never reach the terminal.

Imports: the lesson's pure modules (no torch).
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import shlex
import signal
import sys
from datetime import date

from playground.formatting import plain
from playground.guard import Guard
from playground.i18n import catalog, default_language, t
from playground.session import UsageError
from playground.usage import os_reason, param_error_text
from runtime.sim.units import parse_duration
from scenarios.why_distribute import ledger, ledger_lock
from scenarios.why_distribute.budget import CEILING_USD, Estimate, EstimateError, Verdict, sentence
from scenarios.why_distribute.gpus import GPUS, gpu_named
from scenarios.why_distribute.ledger import LedgerError
from scenarios.why_distribute.phrases import money, phrase
from scenarios.why_distribute.prices import price_table

REFUSED = 3  # the guard's exit status when it refuses or kills
MAX_COUNT = 100_000  # GPUs in one experiment: more than any course will rent


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
        _check_numbers(args)
        if args.budget_command == "estimate":
            return _estimate_only(args, language)
        return _guard(args, language)
    except LedgerError as exc:
        raise UsageError.said(f"budget.ledger_{exc.key}", "ledger", **exc.values) from None


def _check_numbers(args: argparse.Namespace) -> None:
    """Every number finite, none negative, the count a count (exit 2 before anything)."""
    for name in ("budget", "ceiling"):  # price and margin: the estimate's own rules
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError.said("budget.not_a_number", name, name=name, value=value)
    if args.count is not None and not 1 <= args.count <= MAX_COUNT:
        shown = str(args.count) if len(str(args.count)) <= 20 else f"{str(args.count)[:20]}…"
        raise UsageError.said("budget.count_range", "count", value=shown, most=MAX_COUNT)


def _estimate_only(args: argparse.Namespace, language: str) -> int:
    book = ledger.read()
    _report(book, language)
    estimate = _estimate(args)
    verdict = _verdict(args, estimate, book, language)
    print(sentence(verdict, language))
    return 0 if verdict.accepted else REFUSED


def _verdict(
    args: argparse.Namespace, estimate: Estimate, book: ledger.Ledger, language: str
) -> Verdict:
    """The estimate against this experiment's budget and what the ceiling has left (spent
    and reserved by guards still running taken off); its budget is what the guard enforces."""
    left = args.ceiling - book.committed
    budget = max(min(args.budget if args.budget is not None else left, left), 0.0)
    if args.budget is not None and left < args.budget:
        print(phrase("ceiling_note", language, ceiling=money(args.ceiling),
                     spent=money(book.committed), left=money(left)))  # fmt: skip
    return Verdict(estimate, budget)


def _report(book: ledger.Ledger, language: str) -> None:
    """Each line the ledger could not vouch for, one line on stderr each."""
    for bad in book.bad:
        why = _why(bad, language)
        if bad.counted:
            print(t("budget.ledger_problem", language, line=bad.number, why=why), file=sys.stderr)
        else:
            print(phrase("ledger_bad", language, line=bad.number, why=why), file=sys.stderr)


def _why(bad: ledger.BadLine, language: str) -> str:
    said = catalog(language).get(f"budget.why_{bad.key}")
    try:
        return said.format(**bad.values) if said else bad.why
    except (KeyError, IndexError):
        return bad.why


def _clock() -> float:
    """PLAYGROUND_BUDGET_CLOCK: billed seconds per real second (the tests' fast clock)."""
    text = os.environ.get("PLAYGROUND_BUDGET_CLOCK", "") or "1"
    try:
        clock = float(text)
    except ValueError:
        clock = math.nan
    if not (math.isfinite(clock) and clock > 0):
        raise UsageError.said("budget.clock", "clock", value=plain(text)[:40])
    return clock


def _estimate(args: argparse.Namespace) -> Estimate:
    gpu, count, hours = args.gpu, args.count, args.hours
    if args.from_plan:
        gpu, count, hours = _from_plan(args.from_plan, gpu)
    if gpu is None or count is None or hours is None:
        raise UsageError.said("budget.give_gpu", "gpu")
    try:
        spec = gpu_named(gpu)
    except KeyError:
        raise UsageError.said("budget.unknown_gpu", "gpu", gpu=gpu, names=", ".join(GPUS)) from None
    table = price_table()
    price = args.price
    if price is None:
        if table.stale(date.today()) and not args.allow_stale:
            today = date.today()
            dated = dict(date=table.as_of.isoformat(), days=table.age_days(today))
            raise UsageError(
                t("budget.stale", "en", source=table.source, **dated),
                "price",
                es=t("budget.stale", "es", source=table.source_es or table.source, **dated),
            )
        price = table.price(gpu, args.spot)
        if price is None:
            raise UsageError.said("budget.not_priced", "price", gpu=gpu)
    try:
        estimate = Estimate(
            spec.label,
            count,
            price,
            args.spot,
            _hours(hours, "hours"),
            _hours(args.setup, "setup"),
            args.margin,
        )
    except EstimateError as exc:
        raise _estimate_error(exc) from None
    if not math.isfinite(estimate.cost):  # finite inputs, yet beyond a float's range
        raise UsageError.said("budget.too_large", "hours")
    return estimate


def _estimate_error(exc: EstimateError) -> UsageError:
    """`--count: count=0: must be at least 1`, the rule said in both languages (the
    catalog's `budget.rule_<field>`, the English one as the estimate says it)."""
    said, _, rule = str(exc).partition(": ")
    rule_es = catalog("es").get(f"budget.rule_{exc.field}", rule)
    return UsageError(
        f"--{exc.field}: {exc}",
        exc.field,
        es=t("budget.bad_estimate", "es", field=exc.field, said=said, rule=rule_es),
    )


def _hours(text: str | float, name: str) -> float:
    """`3` is three hours; `90min`, `0.25h`, `900s` as typed."""
    if isinstance(text, int | float):
        return float(text)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration(text) / 3600
    except ValueError:
        raise UsageError.said("budget.hours", name, name=name, text=text) from None


def _from_plan(pairs: str, gpu: str | None) -> tuple[str, int, float]:
    """The why-distribute planner's recommended plan: its GPU, how many, its hours."""
    from scenarios.base import parse_param_args
    from scenarios.params import ParamError
    from scenarios.registry import get_lesson
    from scenarios.why_distribute import report

    given = [p for p in pairs.split(",") if p.strip()]
    if not given:  # `,,,`: nothing to plan, not the planner's defaults
        raise UsageError.said("budget.from_plan_empty", "from_plan")
    try:
        raw = parse_param_args(given)
        if gpu is not None:
            raw.setdefault("gpu", gpu)
        params = get_lesson("why-distribute").parse(raw, "predict")
    except ParamError as exc:
        raise UsageError(
            t("budget.from_plan", "en", error=exc),
            "from_plan",
            es=t("budget.from_plan", "es", error=param_error_text(exc, "es")),
        ) from None
    best = report.planning(params).recommended
    if best is None:
        raise UsageError.said("budget.no_layout", "from_plan")
    return params.gpu, best.gpus, best.train_s / 3600


def _guard(args: argparse.Namespace, language: str) -> int:
    """Reserve under the ledger's lock, run the job it owns, settle what it cost."""
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise UsageError.said("budget.guard_needs_cmd", "cmd")
    clock = _clock()
    what = shlex.join(command)
    estimate = _estimate(args)
    with Guard() as guard:  # signals caught from here on: nothing starts after one
        with ledger_lock.locked() as held:
            _report(held.book, language)
            verdict = _verdict(args, estimate, held.book, language)
            budget = verdict.budget
            print(sentence(verdict, language), flush=True)
            if guard.received is not None:
                held.append(_line(what, estimate, "interrupted", signame(guard.received)))
                return _stopped(guard.received, 0.0, language)
            if not verdict.accepted or budget <= 0:  # nothing left: not even a start
                held.append(_line(what, estimate, "refused"))
                return REFUSED
            reservation = held.append(_line(what, estimate, "reserved", reserved=budget))
        rate = estimate.rate * estimate.margin  # $/h, margin included as in the estimate

        def cost(elapsed_s: float) -> float:
            return rate * (estimate.setup_hours + elapsed_s * clock / 3600)

        try:
            outcome = guard.run(command, lambda elapsed: cost(elapsed) >= budget)
        except OSError as exc:
            _settle(reservation, estimate, "failed", "cannot start", 0.0)
            raise UsageError(
                t("budget.cannot_start", "en", cmd=plain(command[0]), reason=exc.strerror),
                "cmd",
                es=t("budget.cannot_start", "es", cmd=plain(command[0]),
                     reason=os_reason(exc, "es")),
            ) from None  # fmt: skip
        # The guard kills at the budget it reserved: never billed above it.
        spent = min(cost(outcome.elapsed_s), budget) if outcome.started else 0.0
        _settle(reservation, estimate, outcome.status, outcome.how, spent)
    if outcome.received is not None:
        return _stopped(outcome.received, spent, language)
    if outcome.status == "killed":
        print(phrase("guard_killed", language, spent=money(spent), budget=money(budget)))
        return REFUSED
    return outcome.returncode if outcome.returncode is not None else 1


def _line(
    what: str, estimate: Estimate, status: str, how: str = "", reserved: float = 0.0
) -> ledger.Entry:
    token = secrets.token_hex(8) if status == "reserved" else ""
    return ledger.Entry(what, round(estimate.cost, 6), 0.0, ledger.now(), status, token,
                        round(reserved, 6), "", how)  # fmt: skip


def _settle(reservation: ledger.Entry, estimate: Estimate, status: str, how: str,
            spent: float) -> None:  # fmt: skip
    """The line that closes `reservation` with what was really spent and how it ended."""
    with ledger_lock.locked() as held:
        held.append(ledger.Entry(reservation.what, round(estimate.cost, 6), round(spent, 6),
                                 ledger.now(), status, "", 0.0, reservation.id, how))  # fmt: skip


def signame(signum: int) -> str:
    return signal.Signals(signum).name


def _stopped(signum: int, spent: float, language: str) -> int:
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
    _report(book, language)
    print(phrase("ledger_total", language, spent=money(book.spent), ceiling=money(CEILING_USD),
                 left=money(round(CEILING_USD - book.committed, 6)),
                 bad=book.not_counted))  # fmt: skip
    if book.reserved:
        count = len(book.open_reservations)
        print(t("budget.ledger_reserved", language, reserved=money(book.reserved), count=count))
    if book.legacy:
        print(t("budget.ledger_legacy", language, count=book.legacy))
    return 1 if book.bad else 0
