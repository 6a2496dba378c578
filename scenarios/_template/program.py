"""The template lesson's Program: per step, one compute and one all-reduce on every rank.

`build(params)` returns each rank's Actions in order (runtime.sim.program): the real
ranks (rank.py) execute them and the simulator predicts them, and both record one Span
per Action under the same id. An id is an opaque key (nothing parses it); what the UI
groups by travels in fields: `step`, `phase` (the narrative step shown for it).

Imports: runtime's pure part and this package's params.
"""

from __future__ import annotations

from runtime.sim.program import Action, Program

from .params import MATMUL, TemplateParams

# The phases of the Actions: texts.toml's narrative steps name them.
COMPUTE = "compute"
ALL_REDUCE = "all-reduce"


def build(params: TemplateParams) -> Program:
    n = params.ranks
    members = tuple(range(n))  # one shared tuple: the simulator keys collectives by it
    program = Program(n)
    for step in range(params.steps):
        for rank in members:
            program.add(
                Action(
                    f"s{step}.matmul@r{rank}",
                    rank,
                    "compute",
                    "G = tanh(X·W)",
                    cost_key=MATMUL,
                    step=step,
                    phase=COMPUTE,
                )
            )
            program.add(
                Action(
                    f"s{step}.all_reduce@r{rank}",
                    rank,
                    "all_reduce",
                    "all_reduce(G)",
                    bytes=params.buffer_bytes,
                    group=members,
                    algorithm="builtin",  # torch.distributed.all_reduce
                    step=step,
                    phase=ALL_REDUCE,
                )
            )
    return program
