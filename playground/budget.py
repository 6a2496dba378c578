"""`playground budget`: the course's cost sentence, a guard that refuses to overspend, the ledger.

Lesson 0's budget guard as a real tool (issue 17; shared/REFERENCES.md, "Cost
discipline"):

- `budget estimate --gpu rtx4090 --count 2 --hours 3 [--spot] [--setup 0.25h]
  [--price 0.35] [--margin 1.2] [--budget 3]` prints the sentence ("This starts
  2× RTX 4090 spot at ~$0.35/h each = $0.70/h, runs ~3 h including setup = $2.10.
  Budget: $3.00. Accepted, $0.90 to spare.") from the price table shipped in the
  repository (scenarios/why_distribute/prices.toml, its source and date said),
  refusing a table older than 90 days unless --price or --allow-stale;
- `budget guard --budget 3 [the same options] -- CMD…` refuses before starting
  (exit 3, one line) when the estimate exceeds the budget or what is left of the
  unit's ceiling ($5, --ceiling) after the ledger's spend; otherwise runs CMD,
  kills it when its running cost reaches the budget, and records what it cost;
- `budget ledger` shows the spend so far, and every line it did not count.

The hours can come from the why-distribute planner: `--from-plan params=7B,gpus=8`
(its recommended plan's GPUs and predicted training time). Bad input: exit 2 and
one line naming the option. `PLAYGROUND_BUDGET_CLOCK` (billed seconds per real
second, default 1) lets the tests run a guarded command at a fast clock.

Imports: the lesson's pure modules (no torch).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from datetime import date

from playground.i18n import catalog, default_language, t
from playground.session import UsageError
from playground.usage import os_reason, param_error_text
from runtime.units import parse_duration
from scenarios.why_distribute import ledger
from scenarios.why_distribute.budget import CEILING_USD, Estimate, EstimateError, Verdict, sentence
from scenarios.why_distribute.gpus import GPUS, gpu_named
from scenarios.why_distribute.phrases import money, phrase
from scenarios.why_distribute.prices import price_table

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
    book = ledger.read()
    for bad in book.bad:
        print(phrase("ledger_bad", language, line=bad.number, why=bad.why), file=sys.stderr)
    if args.budget_command == "ledger":
        return _show_ledger(book, language)
    estimate = _estimate(args)
    left = args.ceiling - book.spent
    budget = min(args.budget if args.budget is not None else left, left)
    verdict = Verdict(estimate, budget)
    if args.budget is not None and left < args.budget:
        print(phrase("ceiling_note", language, ceiling=money(args.ceiling),
                     spent=money(book.spent), left=money(left)))  # fmt: skip
    print(sentence(verdict, language))
    if args.budget_command == "estimate":
        return 0 if verdict.accepted else REFUSED
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise UsageError.said("budget.guard_needs_cmd", "cmd")
    what = shlex.join(command)
    if not verdict.accepted:
        ledger.append(what, estimate.cost, 0.0, "refused")
        return REFUSED
    return _guard(command, what, estimate, budget, language)


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
        return Estimate(
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

    try:
        raw = parse_param_args([p for p in pairs.split(",") if p])
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


def _guard(command: list[str], what: str, estimate: Estimate, budget: float, lang: str) -> int:
    """Run `command`; kill its process group when its running cost reaches `budget`."""
    clock = float(os.environ.get("PLAYGROUND_BUDGET_CLOCK", "1") or 1)
    rate = estimate.rate * estimate.margin  # $/h, margin included as in the estimate
    start = time.monotonic()

    def cost() -> float:
        billed_h = estimate.setup_hours + (time.monotonic() - start) * clock / 3600
        return rate * billed_h

    try:
        child = subprocess.Popen(command, start_new_session=True)
    except OSError as exc:
        ledger.append(what, estimate.cost, 0.0, "failed")
        raise UsageError(
            t("budget.cannot_start", "en", cmd=command[0], reason=exc.strerror),
            "cmd",
            es=t("budget.cannot_start", "es", cmd=command[0], reason=os_reason(exc, "es")),
        ) from None
    killed = False
    while child.poll() is None:
        if cost() >= budget:
            killed = True
            _kill(child)
            break
        time.sleep(0.05)
    spent = min(cost(), budget) if killed else cost()
    status = "killed" if killed else ("finished" if child.returncode == 0 else "failed")
    ledger.append(what, estimate.cost, spent, status)
    if killed:
        print(phrase("guard_killed", lang, spent=money(spent), budget=money(budget)))
        return REFUSED
    return child.returncode


def _kill(child: subprocess.Popen) -> None:
    """SIGTERM to its process group, SIGKILL two seconds later if still there."""
    for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _show_ledger(book: ledger.Ledger, language: str) -> int:
    for e in book.entries:
        print(
            f"{e.date}  {e.status:<8} {money(e.actual_usd):>9} (est. {money(e.estimate_usd)})  {e.what}"
        )
    print(phrase("ledger_total", language, spent=money(book.spent), ceiling=money(CEILING_USD),
                 left=money(CEILING_USD - book.spent), bad=len(book.bad)))  # fmt: skip
    return 0
