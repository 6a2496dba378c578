"""Restart like torchrun: on any rank failure, tear everything down and start again from
the newest valid checkpoint, at most `max_restarts` times.

In docs/design.md's picture this sits on top of the real engine's launcher
(runtime.engine.launch), in the parent (UI) process, and never imports torch. It is
what `torchrun --max-restarts` does for an elastic job, made visible:

1. launch every rank (runtime.engine.launch.launch); the launcher detects a dead rank
   at once (its sentinel) and a hung one by its missing heartbeats, kills every
   rank and raises RunFailed;
2. the faults that fired are retired (each fires once per run: a real crash does
   not follow the job around), a pending `corrupt:checkpoint=latest` flips bytes
   of the newest checkpoint now that it is written;
3. the newest checkpoint whose manifest checks out is chosen
   (runtime.engine.checkpoint); newer ones that fail are set aside and the timeline
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
processes of one host. What each failure leaves on that axis (lost spans,
fault and clean-up Marks, progress Marks) is written by runtime.engine.restart_marks.

Engine part, but torch-free.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from runtime.engine import checkpoint as ckpt
from runtime.engine.faults import Fault
from runtime.engine.launch import LaunchResult, LaunchSpec, RunFailed, launch
from runtime.engine.restart import Attempt, FailureReport, RestartPolicy, RestartReport
from runtime.engine.restart_marks import (
    STEP_END_KIND,
    failure_label,
    fired,
    lost,
    prepare_restart,
    progress_marks,
)
from runtime.engine.rundirs import CHECKPOINTS, new_run_dir
from runtime.sim.trace import Counter, Mark, Span


@dataclass
class _Failure:
    """A failure while the run is still going: resumed_t is learnt from the next attempt."""

    rank: int | None
    cause: str
    failed_t: float | None
    detected_t: float
    restart_t: float
    completed_step: int
    resumed_step: int
    resumed_t: float | None = None

    def report(self) -> FailureReport:
        return FailureReport(
            self.rank,
            self.cause,
            self.failed_t,
            self.detected_t,
            self.restart_t,
            self.resumed_t,
            self.completed_step,
            self.resumed_step,
        )


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
    run = _Run(spec, policy)
    while True:
        attempt = _Attempt(on_message)
        try:
            result = launch(run.attempt_spec(), on_message=attempt.listen, cancel=cancel)
        except RunFailed as exc:
            run.failed(exc, attempt)  # raises once the budget is spent
            continue
        return run.finished(result, attempt)


class _Attempt:
    """What one launch streamed: a failed launch has no result, only these."""

    def __init__(self, on_message: Callable[[tuple], None] | None):
        self.spans: list[Span] = []
        self.counters: list[Counter] = []
        self._forward = on_message

    def listen(self, msg: tuple) -> None:
        if msg[0] == "records":
            self.spans.extend(Span.from_dict(s) for s in msg[2])
            self.counters.extend(Counter(**c) for c in msg[3])
        if self._forward is not None:
            self._forward(msg)


class _Run:
    """The state of a supervised run across its attempts, and the Marks it leaves."""

    def __init__(self, spec: LaunchSpec, policy: RestartPolicy):
        self.spec, self.policy = spec, policy
        self.run_dir = spec.run_dir or new_run_dir(spec.name)
        self.root = self.run_dir / CHECKPOINTS
        self.fired_dir = self.run_dir / "faults"
        self.origin_file = self.run_dir / "origin.json"
        for path in (self.root, self.fired_dir):
            path.mkdir(parents=True, exist_ok=True)
        self.started_ns = time.perf_counter_ns()
        # time.monotonic() (the launcher's clock) to perf_counter_ns: both CLOCK_MONOTONIC
        # on Linux, so the offset is ~0; measured anyway for other platforms.
        self.mono_offset_ns = time.perf_counter_ns() - time.monotonic_ns()
        self.pending: list[Fault] = list(spec.faults)
        self.marks: list[Mark] = []
        self.spans: list[Span] = []
        self.counters: list[Counter] = []
        self.failures: list[_Failure] = []
        self.world = spec.world_size
        self.worlds: list[int] = []
        self.resume: Path | None = None
        self.resume_step = 0
        self.origin_ns: int | None = None

    # -- clock ------------------------------------------------------------------------
    def seconds(self, ns: int) -> float:
        origin = self.origin_ns if self.origin_ns is not None else self.started_ns
        return (ns - origin) / 1e9

    def _read_origin(self) -> None:
        """Time zero: the first attempt's start barrier, which its rank 0 wrote down."""
        if self.origin_ns is None and self.origin_file.exists():
            self.origin_ns = int(json.loads(self.origin_file.read_text())["origin_ns"])

    # -- one attempt ---------------------------------------------------------------------
    def attempt_spec(self) -> LaunchSpec:
        self.worlds.append(self.world)
        index = len(self.failures)
        attempt = Attempt(
            index=index,
            world_size=self.world,
            checkpoint_dir=str(self.root),
            fired_dir=str(self.fired_dir),
            origin_file=str(self.origin_file),
            resume=str(self.resume) if self.resume else None,
            resume_step=self.resume_step,
            origin_ns=self.origin_ns,
        )
        return replace(
            self.spec,
            program=self.policy.program_for(self.world),
            attempt=attempt,
            world_size=self.world,
            faults=[f for f in self.pending if f.kind != "corrupt"],
            stream=True,  # a failed attempt has no result: its spans only arrive streamed
            run_dir=self.run_dir / f"attempt{index}",
        )

    def _resumed(self, spans: list[Span]) -> None:
        """Marks of the previous restart seen from this attempt: resumed, caught up."""
        if not self.failures:
            return
        last = self.failures[-1]
        last.resumed_t = _first_step_start(spans, last.resumed_step + 1)
        if last.resumed_t is not None:
            self.marks.append(
                Mark(last.resumed_t, "resume", f"resumed at step {last.resumed_step + 1}")
            )
        caught = [s.end for s in spans if s.kind == STEP_END_KIND and s.step == last.completed_step]
        if last.completed_step > last.resumed_step and caught:
            self.marks.append(
                Mark(
                    max(caught),
                    "recomputed",
                    f"caught up: steps {last.resumed_step + 1}–{last.completed_step} recomputed",
                )
            )

    # -- a failed attempt ------------------------------------------------------------------
    def failed(self, exc: RunFailed, attempt: _Attempt) -> None:
        """Mark the failure and its detection, then get ready to restart (or give up)."""
        self._read_origin()
        self._resumed(attempt.spans)
        self.counters.extend(attempt.counters)
        completed = max(_completed_step(attempt.spans), self.resume_step)
        failed_t, detected_t = self._mark_failure(exc)
        if len(self.failures) >= self.policy.max_restarts:
            raise RunFailed(
                exc.rank,
                f"{exc.cause}; gave up after {len(self.failures)} restart(s) "
                f"(max_restarts={self.policy.max_restarts})",
                exc.log_path,
                exc.detected_at,
            )
        now_t = self.seconds(time.perf_counter_ns())
        self._choose_checkpoint(now_t)
        self.spans.extend(lost(attempt.spans, self.resume_step))
        if self.resume_step < completed:
            self.marks.append(
                Mark(
                    now_t,
                    "lost",
                    f"lost work: steps {self.resume_step + 1}–{completed} "
                    f"({completed - self.resume_step}) must be recomputed",
                )
            )
        self.world = self.policy.resume_world_size or self.world
        restart_t = self.seconds(time.perf_counter_ns())
        source = (
            f"checkpoint step {self.resume_step}" if self.resume else "step 0 (no valid checkpoint)"
        )
        self.marks.append(
            Mark(
                restart_t,
                "restart",
                f"restart {len(self.failures) + 1}/{self.policy.max_restarts}: "
                f"{self.world} ranks from {source}",
            )
        )
        self.failures.append(
            _Failure(
                exc.rank,
                exc.cause,
                failed_t,
                detected_t,
                restart_t,
                completed,
                self.resume_step,
            )
        )

    def _mark_failure(self, exc: RunFailed) -> tuple[float | None, float]:
        """Failure and detection Marks; retire the faults that fired (each fires once per
        run: a step fault left a record, a timed one is retired when its rank failed)."""
        detected_ns = (
            int(exc.detected_at * 1e9) + self.mono_offset_ns
            if exc.detected_at is not None
            else time.perf_counter_ns()
        )
        detected_t = self.seconds(detected_ns)
        records = fired(self.fired_dir, self.pending)
        timed = [f for f in self.pending if f.after_s is not None and f.rank == exc.rank]
        self.pending = [f for f in self.pending if f.index not in records and f not in timed]
        failed_t = None
        if records:
            first = min(records.values(), key=lambda r: r["t_ns"])
            failed_t = self.seconds(first["t_ns"])
            self.marks.append(Mark(failed_t, "failure", failure_label(first), rank=first["rank"]))
        elif timed:
            # A timer fired it (runtime.engine.worker): when exactly is not recorded, so the
            # mark sits at the detection and detection_s stays unknown.
            what = "killed (SIGKILL)" if timed[0].kind == "kill" else "hung (SIGSTOP)"
            label = (
                f"fault: rank {exc.rank} {what} by a timer {timed[0].after_s:g} s after its start"
            )
            self.marks.append(Mark(detected_t, "failure", label, rank=exc.rank))
        delay = f" ({(detected_t - failed_t) * 1e3:.0f} ms later)" if failed_t else ""
        self.marks.append(
            Mark(
                detected_t,
                "detection",
                f"launcher detected: rank {exc.rank} {exc.cause}{delay}",
                rank=exc.rank,
            )
        )
        return failed_t, detected_t

    def _choose_checkpoint(self, t: float) -> None:
        """Clean up, apply a pending corruption, pick the newest valid checkpoint."""
        marks, corrupted = prepare_restart(self.root, self.pending, t)
        self.marks.extend(marks)
        if corrupted:
            self.pending = [f for f in self.pending if f.kind != "corrupt"]
        self.resume, skipped = ckpt.newest_valid(self.root)
        for path, reason in skipped:
            self.marks.append(
                Mark(
                    t,
                    "checkpoint-invalid",
                    f"{path.name} not loaded: {reason}; falling back to an older one",
                )
            )
            ckpt.set_aside(path, "invalid")
        self.resume_step = ckpt.read_meta(self.resume)["step"] if self.resume else 0

    # -- the attempt that finished ---------------------------------------------------------
    def finished(self, result: LaunchResult, attempt: _Attempt) -> LaunchResult:
        self._read_origin()
        final_spans = result.spans or attempt.spans
        self._resumed(final_spans)
        self.spans.extend(final_spans)
        self.counters.extend(result.counters or attempt.counters)
        self.marks.extend(progress_marks(self.spans))
        return LaunchResult(
            spans=sorted(self.spans, key=lambda s: (s.start, s.rank)),
            rank_results=result.rank_results,
            backend=result.backend,
            run_dir=self.run_dir,
            wall_s=(time.perf_counter_ns() - self.started_ns) / 1e9,
            counters=sorted(self.counters, key=lambda c: (c.t, c.rank)),
            marks=sorted(self.marks, key=lambda m: m.t),
            restarts=RestartReport(self.worlds, [f.report() for f in self.failures]),
            t0_ns=self.origin_ns,
        )
