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
    from scenarios.params import ParamError, shown
    from scenarios.registry import LESSONS

    for pair in args.param:  # what parse_param_args refuses, said in the learner's language
        key, eq, _ = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError.said("cli.malformed_param", pair=shown(pair))
    try:
        raw = parse_param_args(args.param)
    except ParamError as exc:
        raise param_usage_error(exc) from None
    keys = [pair.partition("=")[0].strip() for pair in args.param]
    if twice := next((k for i, k in enumerate(keys) if k in keys[:i]), None):
        raise UsageError.said("cli.duplicate_param", twice, name=shown(twice))  # not last-wins
    if args.ranks is not None and args.scenario in LESSONS:
        name = LESSONS[args.scenario].params.ranks_field
        if name in raw and raw[name] != str(args.ranks):
            raise UsageError.said(
                "cli.ranks_disagree", name, ranks=args.ranks, name=name, value=plain(raw[name])
            )
        raw[name] = str(args.ranks)
    return raw
