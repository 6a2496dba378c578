"""LaunchSpec: one launch as data, handed to the launcher (runtime.engine.launch) and
to the code that starts the ranks (runtime.engine.spawn, runtime.engine.pool).

A module of its own so that both take it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.engine.faults import Fault
from runtime.engine.restart import Attempt
from runtime.sim.program import Program


@dataclass
class LaunchSpec:
    """One launch: which rank entry, on how many ranks, with what params and Program."""

    entry: str  # "package.module:function" taking a RankContext
    world_size: int
    params: Any = None  # the lesson's typed params, handed to every rank as they are
    program: Program | None = None  # rank r runs program.ranks[r]
    name: str = "job"  # names the run directory
    backend: str = "auto"
    faults: list[Fault] = field(default_factory=list)
    attempt: Attempt | None = None
    stream: bool = True
    run_dir: Path | None = None
    host: str | None = None  # None: loopback only (FileStore + lo); else TCP on this address
    threads_per_rank: int | None = None
    hang_timeout_s: float = 4.0
    start_timeout_s: float = 60.0
    grace_s: float = 0.5
