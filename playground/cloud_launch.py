"""`playground cloud launch LABDIR` and `cloud results LABDIR`: the budget guard around SkyPilot.

Issue 41, item 2. A lab folder (playground.cloud_plan) is launched the way
`budget guard` runs a command (playground.budget, playground.guard), with what a
cloud adds: killing the local `sky` process does not stop the bill, so every way
out ends with `sky down -y CLUSTER`, waited for.

1. plan.json read back (bounded, strict), task.yaml checked against its digest,
   `sky` looked up on PATH; prices: a stale table needs --price (a fresh quote) or
   --allow-stale, as for any command that spends;
   (after the reservation, `sky api start`: SkyPilot's local server is started outside
   the guarded job, which would otherwise end it with the job);
2. under the ledger's exclusive lock: the sentence, then refused (exit 3, a
   `refused` line, no `sky` call at all) or the budget reserved;
3. `sky launch -y -c CLUSTER task.yaml` runs as a job the guard owns; it is ended
   when its running cost reaches the budget, when the planned hours (setup
   included) and a quarter more have passed, or on SIGINT/SIGTERM/SIGHUP;
4. after a launch that finished well, the run is brought back from the head node
   (`rsync -a CLUSTER:~/playground-run/ LABDIR/run/`, through the ssh alias SkyPilot
   writes for the cluster), still under the guard;
5. always, once `sky launch` was started: `sky down -y CLUSTER`, waited for (signals
   meanwhile are noted, not obeyed: the bill stops only when it is done); if it
   fails, one line says the cluster may still be billing and how to end it;
6. the ledger line settles the reservation with the real duration's cost and how
   it ended ("exit 0, down ok", "budget, down ok", "time limit, down failed",
   "SIGTERM, down ok").
Exit: 0 a finished lab; 3 ended at its budget or time limit (or refused); 1 a
failed launch or a failed `sky down`; 128 + the signal when stopped by one.

`cloud results LABDIR` shows the run that launch brought back (LABDIR/run, as
`playground replay` would), fetching it first from a cluster still up if it is not
there yet. PLAYGROUND_BUDGET_CLOCK speeds the guard's clock (the tests').

Front-end part (playground): no torch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from playground import budget, budget_estimate
from playground.cloud_plan import REMOTE_OUT, Plan, check_task, read_plan, sky_command
from playground.formatting import plain
from playground.guard import Guard, Outcome
from playground.i18n import t
from playground.usage import UsageError
from scenarios.why_distribute import ledger, ledger_lock
from scenarios.why_distribute.budget import Estimate, sentence
from scenarios.why_distribute.phrases import money

DOWN_TIMEOUT_S = 20 * 60  # `sky down` of a cluster that cannot be reached gives up itself
RUN_DIR = "run"


@dataclass
class _Limits:
    """What ended the job, when the guard ended it (budget, time limit)."""

    why: str = ""


def add_launch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("labdir", help="a folder written by `playground cloud plan`")
    p.add_argument("--price", type=float, default=None, help="a fresh $ per GPU-hour")
    p.add_argument("--allow-stale", action="store_true", help="accept an old price table")
    p.add_argument("--lang", choices=("es", "en"), default=None)


def add_results_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("labdir", help="a folder written by `playground cloud plan`")
    p.add_argument("--lang", choices=("es", "en"), default=None)


def _estimate_args(plan: Plan, args: argparse.Namespace) -> argparse.Namespace:
    """The plan's experiment as `budget`'s options (the price: --price, the plan's own
    quote, or the table's)."""
    price = args.price if args.price is not None else (plan.price if plan.price_given else None)
    return argparse.Namespace(
        gpu=plan.gpu, count=plan.count, hours=plan.hours, spot=plan.spot,
        setup=plan.setup_hours, price=price, margin=plan.margin, budget=plan.budget,
        ceiling=plan.ceiling, allow_stale=args.allow_stale, from_plan=None,
    )  # fmt: skip


def launch(args: argparse.Namespace, language: str) -> int:
    folder = Path(args.labdir)
    plan = read_plan(folder)
    task = check_task(folder, plan)
    sky = sky_command()
    options = _estimate_args(plan, args)
    budget_estimate.check_numbers(options)
    clock = budget.billing_clock()
    estimate = budget_estimate.estimate(options, spending=True)
    what = f"cloud launch {plan.cluster}: {plan.lesson} on {plan.count}x {plan.gpu}"
    with Guard() as guard:
        with ledger_lock.locked() as held:
            budget_estimate.report_bad(held.book, language)
            verdict = budget_estimate.verdict_for(options, estimate, held.book, language)
            limit = verdict.budget
            note = budget_estimate.stale_note(options, language)
            print(budget_estimate.with_note(sentence(verdict, language), note), flush=True)
            if guard.received is not None:
                held.append(budget.ledger_line(what, estimate, "interrupted",
                                               budget.signame(guard.received)))  # fmt: skip
                return budget.stopped(guard.received, 0.0, language)
            if not verdict.accepted or limit <= 0:
                held.append(budget.ledger_line(what, estimate, "refused"))
                return budget.REFUSED
            reservation = held.append(
                budget.ledger_line(what, estimate, "reserved", reserved=limit)
            )
        return _launched(guard, sky, task, folder, plan, estimate, limit, clock, reservation,
                         language)  # fmt: skip


def _launched(guard: Guard, sky: str, task: Path, folder: Path, plan: Plan,
              estimate: Estimate, limit: float, clock: float, reservation: ledger.Entry,
              language: str) -> int:  # fmt: skip
    """`sky launch` under the guard, the results, `sky down` on every way out, the line."""
    rate = estimate.rate * estimate.margin
    start = time.monotonic()
    ended = _Limits()

    def billed_h(since_start_s: float) -> float:
        return since_start_s * clock / 3600

    def over(_elapsed_s: float) -> bool:
        elapsed_h = billed_h(time.monotonic() - start)
        if rate * elapsed_h >= limit:
            ended.why = "budget"
        elif elapsed_h >= plan.time_limit_h:
            ended.why = "time limit"
        return ended.why != ""

    _start_api(sky)
    try:
        outcome = guard.run([sky, "launch", "-y", "-c", plan.cluster, str(task)], over)
    except OSError as exc:  # `sky` gone or not executable since it was looked up
        budget.settle(reservation, estimate, "failed", "cannot start sky", 0.0)
        raise UsageError.said("budget.cannot_start", "sky", cmd=plain(sky),
                              reason=plain(exc.strerror or str(exc))) from None  # fmt: skip
    fetched = False
    if outcome.status == "finished":
        fetched = _fetch(guard, folder, plan, over)
    down_ok = _down(sky, plan.cluster)
    spent = rate * billed_h(time.monotonic() - start)  # until the bill stopped
    status, how = _how(outcome, ended.why, down_ok)
    budget.settle(reservation, estimate, status, how, spent)
    if not down_ok:
        print(t("cloud.down_failed", language, cluster=plan.cluster), file=sys.stderr)
    if outcome.received is not None:
        budget.stopped(outcome.received, spent, language)
        return 128 + outcome.received
    if ended.why:
        key = "cloud.ended_budget" if ended.why == "budget" else "cloud.ended_time"
        print(t(key, language, spent=money(spent), budget=money(limit),
                hours=f"{plan.time_limit_h:.3g}"))  # fmt: skip
        return budget.REFUSED
    if outcome.status != "finished":
        print(t("cloud.launch_failed", language, how=outcome.how, spent=money(spent)),
              file=sys.stderr)  # fmt: skip
        return 1
    where = shlex.quote(str(folder / RUN_DIR))
    key = "cloud.finished" if fetched else "cloud.finished_no_results"
    print(t(key, language, spent=money(spent), run=where))
    return 0 if down_ok else 1


def _how(outcome: Outcome, why: str, down_ok: bool) -> tuple[str, str]:
    """The ledger's status and how it ended, with how `sky down` went."""
    down = "down ok" if down_ok else "down failed"
    if outcome.received is not None:
        return "interrupted", f"{budget.signame(outcome.received)}, {down}"
    if why:
        return "killed", f"{why}, {down}"
    return outcome.status, f"{outcome.how}, {down}"


def _fetch(guard: Guard, folder: Path, plan: Plan, over: Callable[[float], bool]) -> bool:
    """The run from the head node into LABDIR/run (rank 0 wrote all of it there)."""
    rsync = shutil.which("rsync")
    if rsync is None:
        return False
    target = folder / RUN_DIR
    target.mkdir(mode=0o700, exist_ok=True)
    outcome = guard.run([rsync, "-a", f"{plan.cluster}:{REMOTE_OUT}/", f"{target}/"], over)
    return outcome.status == "finished"


def _start_api(sky: str) -> None:
    """SkyPilot's local API server (0.10 and later) started before the guarded job, so that
    it is not one of the job's processes: the guard ends everything its job leaves
    behind, and `sky down` needs the server afterwards. An older SkyPilot without one
    says so and is fine: the launch then works as it always did."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run([sky, "api", "start"], start_new_session=True, timeout=120,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)  # fmt: skip


def _down(sky: str, cluster: str) -> bool:
    """`sky down -y CLUSTER`, waited for. It runs in its own session (a signal to the
    terminal's group must not stop it half-way) while the Guard, still entered, notes
    any signal instead of dying of it."""
    try:
        done = subprocess.run([sky, "down", "-y", cluster], start_new_session=True,
                              timeout=DOWN_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def results(args: argparse.Namespace, language: str) -> int:
    """The run that launch brought back, shown as `replay` shows it (fetched first from a
    cluster still up when it is not there)."""
    folder = Path(args.labdir)
    plan = read_plan(folder)
    run = folder / RUN_DIR
    if not (run / "run.json").is_file():
        sky_command()
        rsync = shutil.which("rsync")
        if rsync is None:
            raise UsageError.said("cloud.no_rsync", "rsync")
        run.mkdir(mode=0o700, exist_ok=True)
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([rsync, "-a", f"{plan.cluster}:{REMOTE_OUT}/", f"{run}/"],
                           timeout=DOWN_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
        if not (run / "run.json").is_file():
            with contextlib.suppress(OSError):
                run.rmdir()  # left empty: nothing came back
            print(t("cloud.no_results", language, cluster=plan.cluster,
                    folder=plain(str(folder))), file=sys.stderr)  # fmt: skip
            return 1
    from playground.report import report
    from playground.saved import replay

    shown = argparse.Namespace(json=False, compact=False, export=None, trace=None)
    print(t("cloud.results_at", language, run=plain(os.fspath(run))))
    return report(replay(run), shown)
