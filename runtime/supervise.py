"""Restart like torchrun: on any rank failure, tear everything down and start again from
the newest valid checkpoint, at most `max_restarts` times.

In DESIGN.md's picture this sits on top of the real engine's launcher
(runtime.launch), in the parent (UI) process, and never imports torch. It is
what `torchrun --max-restarts` does for an elastic job, made visible:

1. launch every rank (runtime.launch.launch); the launcher detects a dead rank
   at once (its sentinel) and a hung one by its missing heartbeats, kills every
   rank and raises RunFailed;
2. the faults that fired are retired (each fires once per run: a real crash does
   not follow the job around), a pending `corrupt:checkpoint=latest` flips bytes
   of the newest checkpoint now that it is written;
3. the newest checkpoint whose manifest checks out is chosen
   (runtime.checkpoint); newer ones that fail are set aside and the timeline
   says why; directories of writes that never finished are removed;
4. all ranks are started again (possibly on a different number of ranks) with
   the checkpoint to resume from; they recompute the steps done since it (the
   lost work).

Why restart *every* rank rather than only the dead one: the survivors are
blocked inside a collective with a peer that is gone, their communicator is
broken, and their state has moved past the checkpoint; starting all of them
from one consistent state is the simple thing that is always correct.

The attempts share one clock: time zero is the first attempt's start barrier
(the ranks of later attempts are handed that origin), and the failure,
detection, restart, resume and lost-work Marks are placed on the same axis.
CLOCK_MONOTONIC (perf_counter_ns and time.monotonic on Linux) is shared by all
processes of one host.

Engine part, but torch-free.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runtime import checkpoint as ckpt
from runtime.launch import LaunchResult, LaunchSpec, RunFailed, default_run_dir, launch
from runtime.trace import Counter, Mark, Span

# The kind of span whose end means "this rank finished training step k".
STEP_END_KIND = "opt"
CHECKPOINT_KIND = "checkpoint"


@dataclass(frozen=True)
class RestartPolicy:
    """How a scenario wants to be restarted."""

    max_restarts: int
    resume_world_size: int | None = None  # ranks of every relaunch; None: the same


@dataclass
class _Failure:
    rank: int | None
    cause: str
    failed_t: float | None
    detected_t: float
    restart_t: float
    completed_step: int
    resumed_step: int
    resumed_t: float | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "cause": self.cause,
            "failed_t": self.failed_t,
            "detected_t": self.detected_t,
            "restart_t": self.restart_t,
            "resumed_t": self.resumed_t,
            "completed_step": self.completed_step,
            "resumed_from_step": self.resumed_step,
            "lost_steps": max(0, self.completed_step - self.resumed_step),
            "detection_s": None if self.failed_t is None else self.detected_t - self.failed_t,
            "restart_s": None if self.resumed_t is None else self.resumed_t - self.detected_t,
        }


def _completed_step(spans: list[Span]) -> int:
    return max((s.step or 0 for s in spans if s.kind == STEP_END_KIND), default=0)


def _first_step_start(spans: list[Span], step: int) -> float | None:
    starts = [s.start for s in spans if s.step == step]
    return min(starts) if starts else None


def supervise(
    spec: LaunchSpec,
    policy: RestartPolicy,
    on_message: Callable[[tuple], None] | None = None,
    cancel: threading.Event | None = None,
) -> LaunchResult:
    """Run `spec` to the end through failures; RunFailed once max_restarts is spent."""
    run_dir = spec.run_dir or default_run_dir(spec.scenario)
    root = run_dir / "checkpoints"
    fired_dir = run_dir / "faults"
    origin_file = run_dir / "origin.json"
    for path in (root, fired_dir):
        path.mkdir(parents=True, exist_ok=True)
    started_ns = time.perf_counter_ns()
    # time.monotonic() (the launcher's clock) to perf_counter_ns: both CLOCK_MONOTONIC
    # on Linux, so the offset is ~0; measured anyway for other platforms.
    mono_offset_ns = time.perf_counter_ns() - time.monotonic_ns()
    pending = [{**fault, "index": i} for i, fault in enumerate(spec.faults)]
    marks: list[Mark] = []
    spans: list[Span] = []
    counters: list[Counter] = []
    failures: list[_Failure] = []
    world = spec.world_size
    worlds: list[int] = []
    resume: Path | None = None
    resume_step = 0
    origin_ns: int | None = None

    def seconds(ns: int) -> float:
        return (ns - (origin_ns if origin_ns is not None else started_ns)) / 1e9

    while True:
        attempt = len(failures)
        worlds.append(world)
        got_spans: list[Span] = []
        got_counters: list[Counter] = []

        def listen(msg: tuple, got_spans=got_spans, got_counters=got_counters) -> None:
            if msg[0] == "records":
                got_spans.extend(Span.from_dict(s) for s in msg[2])
                got_counters.extend(Counter(**c) for c in msg[3])
            if on_message is not None:
                on_message(msg)

        params = {
            **spec.params,
            "_supervisor": {
                "attempt": attempt,
                "world_size": world,
                "checkpoint_dir": str(root),
                "resume": str(resume) if resume else None,
                "resume_step": resume_step,
                "fired_dir": str(fired_dir),
                "origin_ns": origin_ns,
                "origin_file": str(origin_file),
            },
        }
        attempt_spec = replace(
            spec,
            params=params,
            world_size=world,
            faults=[f for f in pending if f["kind"] != "corrupt"],
            stream=True,  # a failed attempt has no result: its spans only arrive streamed
            run_dir=run_dir / f"attempt{attempt}",
        )
        try:
            result = launch(attempt_spec, on_message=listen, cancel=cancel)
        except RunFailed as exc:
            if origin_ns is None and origin_file.exists():
                origin_ns = int(json.loads(origin_file.read_text())["origin_ns"])
            detected_ns = (
                int(exc.detected_at * 1e9) + mono_offset_ns
                if exc.detected_at is not None
                else time.perf_counter_ns()
            )
            if failures:
                failures[-1].resumed_t = _first_step_start(got_spans, failures[-1].resumed_step + 1)
            completed = max(_completed_step(got_spans), resume_step)
            counters.extend(got_counters)
            fired = _fired(fired_dir, pending)
            failed_ns = min((r["t_ns"] for r in fired.values()), default=None)
            timed = [f for f in pending if f.get("after_s") is not None and f["rank"] == exc.rank]
            # Each fault fires once per run: step faults left a record; a timed one
            # is retired when its rank is the one that failed.
            pending = [f for f in pending if f["index"] not in fired and f not in timed]
            failed_t = seconds(failed_ns) if failed_ns is not None else None
            if failed_t is not None:
                first = min(fired.values(), key=lambda r: r["t_ns"])
                marks.append(Mark(failed_t, "failure", _failure_label(first), rank=first["rank"]))
            detected_t = seconds(detected_ns)
            if failed_t is None and timed:
                # A timer fired it (runtime.worker): when exactly is not recorded, so the
                # mark sits at the detection and detection_s stays unknown.
                what = "killed (SIGKILL)" if timed[0]["kind"] == "kill" else "hung (SIGSTOP)"
                label = f"fault: rank {exc.rank} {what} by a timer {timed[0]['after_s']:g} s after its start"
                marks.append(Mark(detected_t, "failure", label, rank=exc.rank))
            delay = f" ({(detected_t - failed_t) * 1e3:.0f} ms later)" if failed_t else ""
            marks.append(
                Mark(
                    detected_t,
                    "detection",
                    f"launcher detected: rank {exc.rank} {exc.cause}{delay}",
                    rank=exc.rank,
                )
            )
            if attempt >= policy.max_restarts:
                raise RunFailed(
                    exc.rank,
                    f"{exc.cause}; gave up after {attempt} restart(s) (max_restarts={policy.max_restarts})",
                    exc.log_path,
                    exc.detected_at,
                ) from None
            now_t = seconds(time.perf_counter_ns())
            new_marks, corrupted = _prepare_restart(root, pending, now_t)
            marks.extend(new_marks)
            if corrupted:
                pending = [f for f in pending if f["kind"] != "corrupt"]
            resume, skipped = ckpt.newest_valid(root)
            for path, reason in skipped:
                marks.append(
                    Mark(
                        now_t,
                        "checkpoint-invalid",
                        f"{path.name} not loaded: {reason}; falling back to an older one",
                    )
                )
                ckpt.set_aside(path, "invalid")
            resume_step = ckpt.read_meta(resume)["step"] if resume else 0
            spans.extend(_lost(got_spans, resume_step))
            if resume_step < completed:
                marks.append(
                    Mark(
                        now_t,
                        "lost",
                        f"lost work: steps {resume_step + 1}–{completed} "
                        f"({completed - resume_step}) must be recomputed",
                    )
                )
            world = policy.resume_world_size or world
            restart_t = seconds(time.perf_counter_ns())
            source = f"checkpoint step {resume_step}" if resume else "step 0 (no valid checkpoint)"
            marks.append(
                Mark(
                    restart_t,
                    "restart",
                    f"restart {attempt + 1}/{policy.max_restarts}: {world} ranks from {source}",
                )
            )
            failures.append(
                _Failure(
                    exc.rank, exc.cause, failed_t, detected_t, restart_t, completed, resume_step
                )
            )
            continue
        if origin_ns is None and origin_file.exists():
            origin_ns = int(json.loads(origin_file.read_text())["origin_ns"])
        final_spans = result.spans or got_spans
        if failures:
            last = failures[-1]
            last.resumed_t = _first_step_start(final_spans, last.resumed_step + 1)
            if last.resumed_t is not None:
                marks.append(
                    Mark(last.resumed_t, "resume", f"resumed at step {last.resumed_step + 1}")
                )
            if last.completed_step > last.resumed_step:
                caught = [
                    s.end
                    for s in final_spans
                    if s.kind == STEP_END_KIND and s.step == last.completed_step
                ]
                if caught:
                    marks.append(
                        Mark(
                            max(caught),
                            "recomputed",
                            f"caught up: steps {last.resumed_step + 1}–{last.completed_step} recomputed",
                        )
                    )
        spans.extend(final_spans)
        counters.extend(result.counters or got_counters)
        marks.extend(_progress_marks(spans))
        summary = {
            "restarts": len(failures),
            "world_sizes": worlds,
            "failures": [f.summary() for f in failures],
            "lost_steps": sum(f.summary()["lost_steps"] for f in failures),
        }
        for rank_result in result.rank_results:
            rank_result["supervisor"] = summary
        return LaunchResult(
            spans=sorted(spans, key=lambda s: (s.start, s.rank)),
            rank_results=result.rank_results,
            backend=result.backend,
            run_dir=run_dir,
            wall_s=(time.perf_counter_ns() - started_ns) / 1e9,
            counters=sorted(counters, key=lambda c: (c.t, c.rank)),
            marks=sorted(marks, key=lambda m: m.t),
        )


def _lost(spans: list[Span], resume_step: int) -> list[Span]:
    """The failed attempt's spans; those of steps after the checkpoint are lost work."""
    out = []
    for span in spans:
        if span.step is not None and span.step > resume_step:
            span = replace(span, label=f"{span.label} (lost)")
        out.append(span)
    return out


def _fired(fired_dir: Path, pending: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Records the ranks wrote just before firing a step fault (index -> record)."""
    out = {}
    for fault in pending:
        path = fired_dir / f"fault{fault['index']}.json"
        if path.exists():
            out[fault["index"]] = json.loads(path.read_text())
    return out


def _failure_label(record: dict[str, Any]) -> str:
    what = "killed (SIGKILL)" if record["kind"] == "kill" else "hung (SIGSTOP)"
    where = (
        f"while writing checkpoint {record['step']}"
        if record.get("where") == "checkpoint"
        else f"in step {record['step']}"
    )
    return f"fault: rank {record['rank']} {what} {where}"


def _prepare_restart(
    root: Path, pending: list[dict[str, Any]], t: float
) -> tuple[list[Mark], bool]:
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
    if any(f["kind"] == "corrupt" for f in pending):
        newest = ckpt.committed(root)
        if newest:
            step, path = newest[0]
            damaged = ckpt.corrupt(path)
            marks.append(
                Mark(t, "fault", f"fault: flipped bytes of checkpoint step {step} ({damaged})")
            )
            corrupted = True
    return marks, corrupted


def _progress_marks(spans: list[Span]) -> list[Mark]:
    """A Mark per step finished and per checkpoint written (rank 0's view)."""
    marks = []
    for span in spans:
        if span.rank != 0 or "(lost)" in span.label:
            continue
        if span.kind == STEP_END_KIND:
            marks.append(Mark(span.end, "step", f"step {span.step} done", rank=0))
        elif span.kind == CHECKPOINT_KIND:
            marks.append(Mark(span.end, "checkpoint", f"checkpoint step {span.step} written"))
    return marks
