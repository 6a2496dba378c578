"""`playground budget`'s arithmetic from the command line: the options checked, the estimate, the verdict.

Split off playground.budget (the command: its parser, `estimate`, `guard` and
`ledger`), which reads its numbers through here, as `cloud plan` and `cloud launch`
(playground.cloud_plan, playground.cloud_launch) do through playground.budget's
names. This module turns the options (`--gpu --count --hours --spot --setup --price
--margin`, or `--from-plan` through the why-distribute planner) into the lesson's
`Estimate` from the dated price table, refuses a stale table when the caller spends
(unless --price or --allow-stale), says its age otherwise, holds it against the
budget and what the ceiling has left (`verdict_for`), and says each ledger line it
could not vouch for. Bad input: a UsageError naming the option (exit 2).

Imports: the lesson's pure modules (no torch).
"""

from __future__ import annotations

import argparse
import math
import sys
from datetime import date

from playground.i18n import catalog, t
from playground.usage import UsageError, param_error_text
from runtime.sim.units import parse_duration
from scenarios.why_distribute import ledger
from scenarios.why_distribute.budget import Estimate, EstimateError, Verdict
from scenarios.why_distribute.gpus import GPUS, gpu_named
from scenarios.why_distribute.phrases import money, phrase
from scenarios.why_distribute.prices import price_table

MAX_COUNT = 100_000  # GPUs in one experiment: more than any course will rent


def check_numbers(args: argparse.Namespace) -> None:
    """Every number finite, none negative, the count a count, the budget within the
    ceiling (exit 2 before anything)."""
    for name in ("budget", "ceiling"):  # price and margin: the estimate's own rules
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError.said("budget.not_a_number", name, name=name, value=value)
    if args.budget is not None and args.budget > args.ceiling:
        raise UsageError.said("budget.over_ceiling", "budget", budget=money(args.budget),
                              ceiling=money(args.ceiling))  # fmt: skip
    if args.count is not None and not 1 <= args.count <= MAX_COUNT:
        shown = str(args.count) if len(str(args.count)) <= 20 else f"{str(args.count)[:20]}…"
        raise UsageError.said("budget.count_range", "count", value=shown, most=MAX_COUNT)


def verdict_for(
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


def report_bad(book: ledger.Ledger, language: str) -> None:
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


def with_note(text: str, note: str | None) -> str:
    """The sentence, and the stale table's warning after it on the same line."""
    return text if note is None else f"{text} {note}"


def stale_note(args: argparse.Namespace, language: str) -> str | None:
    """The warning for prices taken from a table older than MAX_AGE_DAYS (its date and
    age, and how to give a fresh price); None when --price was given or it is fresh."""
    table = price_table()
    today = date.today()
    if args.price is not None or not table.stale(today):
        return None
    source = table.source_es if language == "es" and table.source_es else table.source
    return t("budget.stale_note", language, date=table.as_of.isoformat(),
             days=table.age_days(today), source=source)  # fmt: skip


def estimate(args: argparse.Namespace, *, spending: bool) -> Estimate:
    """The estimate of `args` (gpu, count, hours, spot, setup, price, margin, from_plan,
    allow_stale). `spending` (a guard): a stale table is refused unless --price or
    --allow-stale; otherwise it is used and `stale_note` says how old it is."""
    return _estimate(args, spending=spending)


def _estimate(args: argparse.Namespace, *, spending: bool = True) -> Estimate:
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
        if spending and table.stale(date.today()) and not args.allow_stale:
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
