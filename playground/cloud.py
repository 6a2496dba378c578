"""`playground cloud`: the unit's lab on rented GPUs, planned, launched under the guard, shown.

The command's front door (issue 41): `cloud plan` writes a lab folder
(playground.cloud_plan), `cloud launch` runs it under the budget guard with
`sky down` on every way out, and `cloud results` shows the run it brought back
(playground.cloud_launch). Its parser is declared here for playground.cli_parser,
and `cmd_cloud` is what playground.cli calls; bad input is a UsageError (exit 2,
one line in the learner's language).

Front-end part (playground): no torch, no SkyPilot needed to import it.
"""

from __future__ import annotations

import argparse
import sys

from playground import cloud_launch, cloud_plan
from playground.i18n import default_language, t
from playground.usage import UsageError
from scenarios.why_distribute.ledger import LedgerError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cloud", help="a lesson on rented GPUs (SkyPilot) under the budget guard")
    actions = p.add_subparsers(dest="cloud_command", metavar="ACTION", required=True)
    cloud_plan.add_arguments(
        actions.add_parser("plan", help="write a lab folder: SkyPilot task, estimate, README")
    )
    cloud_launch.add_launch_arguments(
        actions.add_parser("launch", help="sky launch under the budget guard; sky down always")
    )
    cloud_launch.add_results_arguments(
        actions.add_parser("results", help="show the run a launch brought back")
    )


def cmd_cloud(args: argparse.Namespace) -> int:
    language = args.lang or default_language()
    try:
        if args.cloud_command == "plan":
            return cloud_plan.plan(args, language)
        if args.cloud_command == "launch":
            return cloud_launch.launch(args, language)
        return cloud_launch.results(args, language)
    except LedgerError as exc:
        raise UsageError.said(f"budget.ledger_{exc.key}", "ledger", **exc.values) from None
    except cloud_plan.CloudSchemaError as exc:  # our YAML, refused by SkyPilot: a bug here
        print(f"playground: {t('cloud.schema_refused', language, error=exc)}", file=sys.stderr)
        return 1
