"""What `-p KEY=VALUE` and `--ranks N` say: the lesson's raw params, checked as typed.

playground.cli's part that reads the scenario arguments of `predict`, `run` and
`show`: a malformed pair, a parameter given twice (never silently last-wins) and
`--ranks N` against a different `-p ranks=M` are refused as a UsageError, one line
in the learner's language; the values themselves are the lesson's to check
(scenarios.params).
"""

from __future__ import annotations

import argparse

from playground.formatting import plain
from playground.usage import UsageError, param_usage_error


def raw_params(args: argparse.Namespace) -> dict[str, str]:
    """The -p pairs, with --ranks N as the lesson's ranks field (refused if both disagree)."""
    from scenarios.base import parse_param_args
    from scenarios.params import ParamError
    from scenarios.registry import LESSONS

    try:  # a malformed pair, or one given twice, in the learner's language
        raw = parse_param_args(args.param)
    except ParamError as exc:
        raise param_usage_error(exc) from None
    if args.ranks is not None and args.scenario in LESSONS:
        name = LESSONS[args.scenario].params.ranks_field
        if name in raw and raw[name] != str(args.ranks):
            raise UsageError.said(
                "cli.ranks_disagree", name, ranks=args.ranks, name=name, value=plain(raw[name])
            )
        raw[name] = str(args.ranks)
    return raw
