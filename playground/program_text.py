"""A Program as text the learner reads and diffs: `playground show`.

docs/design.md: schedules are data, printed like torch.distributed.pipelining's
`_Action` lists. Each rank's Actions become short tokens in order:

    F0 B3 W1     compute of microbatch 0, 3, 1 (F forward, B backward, W weight grad)
    F·u2         compute of a unit (a ZeRO unit: embedding, a block, the head)
    F0@s5        the same on stage 5, when a rank holds several stages (interleaved)
    →1  ←3       send to rank 1, receive from rank 3
    →1←3         a ring step: send to 1 while receiving from 3
    AR RS AG BC  all-reduce, reduce-scatter, all-gather, broadcast (·uK: of unit K;
                 each collective kind's token: runtime.sim.collective_kinds)
    |            a barrier

grouped by series (a schedule, a ZeRO stage) and, when the Program repeats
steps, one line per rank and step, headed in the learner's language
("rank 0 step 1:", "rango 0 paso 1:"; the tokens are notation, one for both).
"""

from __future__ import annotations

import textwrap
from itertools import groupby
from typing import Any

from playground.i18n import default_language, t
from runtime.sim.collective_kinds import lookup
from runtime.sim.program import Action, Program


def token(action: Action, several_stages: bool = False) -> str:
    """The short text of one action (see the module docstring)."""
    if action.kind == "send":
        return f"→{action.dst}"
    if action.kind == "recv":
        return f"←{action.src}"
    if action.kind == "sendrecv":
        return f"→{action.dst}←{action.src}"
    unit = f"·u{action.chunk}" if action.chunk is not None and action.microbatch is None else ""
    if action.is_collective:  # its kind's token (runtime.sim.collective_kinds)
        return lookup(action.kind).token + (unit if action.kind != "barrier" else "")
    name = action.label.split()[0] if action.kind == "compute" and action.label else action.kind
    if action.microbatch is not None:
        stage = f"@s{action.stage}" if several_stages and action.stage is not None else ""
        return f"{name}{action.microbatch}{stage}"
    return name + unit


def several_stages(program: Program) -> bool:
    """True when some rank runs more than one stage (tokens then name the stage)."""
    return any(
        len({a.stage for a in actions if a.stage is not None}) > 1 for actions in program.ranks
    )


def program_lines(program: Program, width: int = 100, language: str | None = None) -> list[str]:
    """Per series, per rank (and step, when steps repeat): the tokens in order, each row
    headed in `language` (default: the learner's)."""
    language = language or default_language()
    several = several_stages(program)
    series_order = list(dict.fromkeys(a.series for a in program.actions()))
    lines: list[str] = []
    for series in series_order:
        if series is not None:
            lines.append(f"{series}:")
        for rank, actions in enumerate(program.ranks):
            mine = [a for a in actions if a.series == series]
            steps = {a.step for a in mine}
            for step, group in groupby(mine, key=lambda a: a.step if len(steps) > 1 else None):
                if step is None:
                    said = t("show.rank", language, rank=rank)
                else:
                    said = t("show.rank_step", language, rank=rank, step=step)
                head = f"  {said}: "
                text = " ".join(token(a, several) for a in group)
                lines.extend(
                    textwrap.wrap(
                        text,
                        width=max(40, width),
                        initial_indent=head,
                        subsequent_indent=" " * len(head),
                        break_on_hyphens=False,
                    )
                )
    return lines


def program_doc(program: Program) -> dict[str, Any]:
    """The Program as JSON: per rank, its actions in order, each with its token."""
    several = several_stages(program)
    ranks = []
    for actions in program.ranks:
        entries = []
        for action in actions:
            entry = {"token": token(action, several), "kind": action.kind, "label": action.label}
            entry.update(action.span_fields())
            entries.append(entry)
        ranks.append(entries)
    return {"world_size": program.world_size, "ranks": ranks}
