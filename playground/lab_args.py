"""What `playground lab nodes` is told: the link's rate, the command after `--`, the host.

Split off playground.lab_nodes (the `lab` command: its parser, the lab built, the nodes
run and everything removed), which checks its input here before it builds anything:
`link_bits` reads `--link`, `inner_command` reads what comes after `--` (`run LESSON
[-p K=V]… [--json]`, its params checked by the lesson with the ranks of both nodes, or
`calibrate [--json]`), and `check_host` says whether this machine can build a lab at
all. Each refusal is a UsageError: one line, exit 2, in the learner's language.

Imports: argparse, playground.formatting, playground.usage, and (when the command is
read) playground.cli_params and playground.session. Front-end part (playground): no
torch here.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from dataclasses import dataclass

from playground.formatting import plain
from playground.usage import UsageError

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g)bit$", re.IGNORECASE)
_UNITS = {"k": 1e3, "m": 1e6, "g": 1e9}


def link_bits(text: str) -> float:
    """`500Mbit` -> 5e8 bits a second, from 1 Mbit to 100 Gbit (UsageError otherwise)."""
    match = _RATE.match(text.strip())
    bits = float(match[1]) * _UNITS[match[2].lower()] if match else 0.0
    if not 1e6 <= bits <= 100e9:
        raise UsageError.said("lab.bad_link", "link", link=plain(text)[:40])
    return bits


@dataclass(frozen=True)
class Inner:
    """The `run LESSON …` to run across the nodes."""

    lesson: str
    params: list[str]
    json: bool


@dataclass(frozen=True)
class Calibrate:
    """`calibrate [--json]`: both links measured into one profile (playground.lab_calibrate)."""

    json: bool


def inner_command(cmd: list[str], ranks: int) -> Inner | Calibrate:
    """What comes after `--`: `run LESSON [-p K=V]… [--json]`, the params checked by the
    lesson with its ranks = nodes × ranks per node; or `calibrate [--json]`."""
    from playground.cli_params import raw_params
    from playground.session import resolve

    words = cmd[1:] if cmd[:1] == ["--"] else cmd
    if not words:
        raise UsageError.said("lab.needs_run", "cmd")
    if words[0] == "calibrate":
        if set(words[1:]) - {"--json"}:
            raise UsageError.said("lab.only_run_calibrate", "cmd",
                                  got=plain(" ".join(words))[:80])  # fmt: skip
        return Calibrate("--json" in words[1:])
    if words[0] != "run" or len(words) < 2:
        raise UsageError.said("lab.only_run_calibrate", "cmd", got=plain(" ".join(words))[:80])
    inner = argparse.ArgumentParser(prog="lab nodes -- run", add_help=False)
    inner.add_argument("scenario")
    inner.add_argument("-p", "--param", action="append", default=[])
    inner.add_argument("--json", action="store_true")
    parsed, unknown = inner.parse_known_args(words[1:])
    if unknown:
        raise UsageError.said("lab.only_run_calibrate", "cmd", got=plain(" ".join(unknown))[:80])
    parsed.ranks = None
    raw = raw_params(parsed)
    lesson, _ = resolve(parsed.scenario, {}, "run")
    field_ = lesson.params.ranks_field
    raw.setdefault(field_, str(ranks))
    _, params = resolve(parsed.scenario, raw, "run")
    if params.world_size != ranks:
        raise UsageError.said("lab.ranks_count", field_, name=field_, value=raw[field_],
                              count=ranks)  # fmt: skip
    pairs = [f"{k}={v}" for k, v in raw.items() if k != field_]
    return Inner(parsed.scenario, pairs, parsed.json)


def check_host() -> None:
    """Linux, root, iproute2: or one line saying which is missing (exit 2)."""
    if not sys.platform.startswith("linux"):
        raise UsageError.said("lab.not_linux", "host", system=sys.platform)
    if os.geteuid() != 0:
        raise UsageError.said("lab.not_root", "host")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise UsageError.said("lab.no_tool", "host", tool=tool)
