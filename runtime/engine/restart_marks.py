"""The timeline the restart supervisor leaves: lost work, fired faults, checkpoint
clean-up before a restart, and progress Marks.

Split out of runtime.engine.supervise (which decides *when* to restart) so each file
reads in one sitting: these helpers say *what the learner sees* of a failure on
the Gantt and in the exports, as Spans relabelled lost (runtime.engine.restart.LOST)
and Marks on the run's one clock.

Engine part, but torch-free (runtime.engine.checkpoint brings numpy and safetensors).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from runtime.engine import checkpoint as ckpt
from runtime.engine.faults import Fault
from runtime.engine.restart import LOST, is_lost
from runtime.sim.trace import Mark, Span

# The kind of span whose end means "this rank finished training step k".
STEP_END_KIND = "opt"
CHECKPOINT_KIND = "checkpoint"


def lost(spans: list[Span], resume_step: int) -> list[Span]:
    """The failed attempt's spans; those of steps after the checkpoint are lost work."""
    out = []
    for span in spans:
        if span.step is not None and span.step > resume_step:
            span = replace(span, label=span.label + LOST)
        out.append(span)
    return out


def fired(fired_dir: Path, pending: list[Fault]) -> dict[int, dict[str, Any]]:
    """Records the ranks wrote just before firing a step fault (index -> record)."""
    out = {}
    for fault in pending:
        path = fired_dir / f"fault{fault.index}.json"
        if path.exists():
            out[fault.index] = json.loads(path.read_text())
    return out


def failure_label(record: dict[str, Any]) -> str:
    what = "killed (SIGKILL)" if record["kind"] == "kill" else "hung (SIGSTOP)"
    where = (
        f"while writing checkpoint {record['step']}"
        if record.get("where") == "checkpoint"
        else f"in step {record['step']}"
    )
    return f"fault: rank {record['rank']} {what} {where}"


def prepare_restart(root: Path, pending: list[Fault], t: float) -> tuple[list[Mark], bool]:
    """Remove unfinished writes; apply a pending corruption to the newest checkpoint
    (once one exists). Returns the marks and whether the corruption was applied."""
    marks = []
    corrupted = False
    for path in ckpt.remove_incomplete(root):
        marks.append(
            Mark(
                t,
                "checkpoint-invalid",
                f"{path.name.lstrip('.')} never finished (its writer died before the rename): removed",
            )
        )
    if any(f.kind == "corrupt" for f in pending):
        newest = ckpt.committed(root)
        if newest:
            step, path = newest[0]
            damaged = ckpt.corrupt(path)
            marks.append(
                Mark(t, "fault", f"fault: flipped bytes of checkpoint step {step} ({damaged})")
            )
            corrupted = True
    return marks, corrupted


def progress_marks(spans: list[Span]) -> list[Mark]:
    """A Mark per step finished and per checkpoint written (rank 0's view)."""
    marks = []
    for span in spans:
        if span.rank != 0 or is_lost(span):
            continue
        if span.kind == STEP_END_KIND:
            marks.append(Mark(span.end, "step", f"step {span.step} done", rank=0))
        elif span.kind == CHECKPOINT_KIND:
            marks.append(Mark(span.end, "checkpoint", f"checkpoint step {span.step} written"))
    return marks
