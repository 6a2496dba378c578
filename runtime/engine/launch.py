"""The launcher: start N rank processes, stream their Spans, detect failures, tear down.

The parent side of docs/design.md's real engine. It never imports torch: the UI
process calls it, and its spawn target (runtime.engine.bootstrap) imports the rank
code inside the child. The caller hands it the lesson's rank entry, typed
params and Program as data (LaunchSpec); each rank gets its own Actions.

- spawn context; one one-way pipe per rank (a rank killed mid-write can only
  break its own pipe, never the others' channel, as a shared Queue's lock would);
- loopback only, by construction: a local run rendezvouses through a FileStore
  in its private run directory (no TCP listener at all) and its ranks bind
  gloo/NCCL to the loopback interface; asking for a `host` is the explicit way
  to rendezvous over TCP and listen beyond this machine (torchrun is the other);
- every message from a rank (`ready`, `records` (spans and counters, batched),
  `heartbeat`, `done`, `error`) is
  handed to `on_message` as it arrives, so a UI can draw spans live. A rank ships its
  records packed (runtime.engine.span_buffer: Action indices and clock readings): they
  stay packed until the run is over, and become the `records` message (Span dicts)
  only for a listener, as they arrive;
- failure detection: a rank process that exits without `done` (SIGKILL, crash,
  exception) is seen at once through its sentinel; a rank whose heartbeat stops
  for `hang_timeout_s` (SIGSTOP, a wedged call) is declared hung. After the first
  failure the launcher listens `grace_s` longer so it can name the root cause
  (the killed rank, not its peers that lost their connection), then kills
  every rank and waits for each to be gone before raising RunFailed;
- `cancel` (a threading.Event) stops a run the same way, raising RunCancelled.

`runtime.engine.spawn.start` (spawn the ranks) and `watch` (stream, detect, name the
root cause) are the two halves of `launch`; runtime.engine.pool reuses both for warm
ranks that run one job after another, so a warm run is watched exactly like a
cold one.

Engine part, but torch-free.
"""

from __future__ import annotations

import multiprocessing.connection as mpc
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.engine.files import make_private_dir
from runtime.engine.launch_spec import LaunchSpec
from runtime.engine.restart import RestartReport
from runtime.engine.rundirs import new_run_dir
from runtime.engine.span_buffer import PACKED, as_records, spans_of
from runtime.engine.spawn import Ranks, start
from runtime.sim.trace import Counter, Mark, Span


class RunFailed(RuntimeError):
    """A run that did not finish; names the rank and the cause."""

    def __init__(
        self,
        rank: int | None,
        cause: str,
        log_path: Path | None = None,
        detected_at: float | None = None,
    ):
        self.rank = rank
        self.cause = cause
        self.log_path = log_path
        # time.monotonic() when the launcher first saw the failure (before its grace
        # period and teardown): what a restart supervisor reports as detection.
        self.detected_at = detected_at
        who = f"rank {rank}" if rank is not None else "the run"
        where = f" (log: {log_path})" if log_path else ""
        super().__init__(f"{who} failed: {cause}{where}")


class RunCancelled(RuntimeError):
    pass


@dataclass
class LaunchResult:
    spans: list[Span]
    rank_results: list[dict[str, Any]]
    backend: str
    run_dir: Path
    wall_s: float
    counters: list[Counter] = field(default_factory=list)
    # Failures, restarts, checkpoints (runtime.engine.supervise fills them; a plain launch has none).
    marks: list[Mark] = field(default_factory=list)
    restarts: RestartReport | None = None
    # True when the job ran on ranks kept from an earlier one (runtime.engine.pool).
    warm: bool = False
    # Time zero of the spans (rank 0's perf_counter_ns as its start barrier released):
    # span times are seconds after it. CLOCK_MONOTONIC, shared by the processes of a host.
    t0_ns: int | None = None

    def first_action_ns(self) -> int | None:
        """When the first action of any rank started (perf_counter_ns), if known."""
        if self.t0_ns is None or not self.spans:
            return None
        return self.t0_ns + round(min(s.start for s in self.spans) * 1e9)


def prepare() -> None:
    """Start multiprocessing's resource tracker now, before a UI replaces sys.stderr.

    Textual swaps sys.stderr; a tracker started later fails with
    "bad value(s) in fds_to_keep" (docs/design.md).
    """
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code} before finishing"


def launch(
    spec: LaunchSpec,
    on_message: Callable[[tuple], None] | None = None,
    cancel: threading.Event | None = None,
) -> LaunchResult:
    run_dir = spec.run_dir or new_run_dir(spec.name)
    make_private_dir(run_dir)  # 0700, whatever the umask; never through a symlink
    started = time.monotonic()
    try:
        ranks = start(spec, run_dir)
        try:
            result = watch(spec, ranks, run_dir, on_message, cancel, started)
            ranks.stop(patience_s=3.0)  # ranks exit by themselves after `done`
            return result
        finally:
            ranks.stop()
    finally:
        # The FileStore of the rendezvous: torch removes it after a clean exit, but a
        # failed or cancelled run leaves it (the ranks are gone: nobody reads it now).
        (run_dir / "rendezvous.store").unlink(missing_ok=True)


def watch(
    spec: LaunchSpec,
    ranks: Ranks,
    run_dir: Path,
    on_message: Callable[[tuple], None] | None,
    cancel: threading.Event | None,
    started: float,
    *,
    warm: bool = False,
) -> LaunchResult:
    """Stream every message of one job until each rank says `done`; RunFailed naming the
    root cause, or RunCancelled. `warm`: ranks that already beat (runtime.engine.pool), so
    silence is judged by `hang_timeout_s` from the start."""
    n = spec.world_size
    procs, conns = ranks.procs, ranks.conns
    # The records as they came (`records` and `packed` messages): made Spans once the
    # run is over, so the parent, which shares the cores with the ranks, does the least
    # while they are timed. A rank's packed records name its Actions in the Program.
    records: list[tuple] = []
    tables = spec.program.ranks if spec.program is not None else [[] for _ in range(n)]
    counters: list[dict[str, Any]] = []
    results: list[dict[str, Any] | None] = [None] * n
    last_beat = [time.monotonic()] * n
    beating = [warm] * n
    t0_ns: int | None = None
    errors: dict[int, str] = {}
    dead: dict[int, str] = {}
    hung: dict[int, str] = {}
    backend = spec.backend
    open_conns = {conn: rank for rank, conn in enumerate(conns)}
    first_failure: float | None = None

    def handle(rank: int, msg: tuple) -> None:
        nonlocal backend, t0_ns
        kind = msg[0]
        last_beat[rank] = time.monotonic()
        beating[rank] = True
        if kind in ("records", PACKED):
            records.append(msg)
            counters.extend(msg[3])
            if kind == PACKED and on_message is not None:  # a listener reads Span dicts
                msg = as_records(msg, tables[rank])
        elif kind == "ready":
            backend = msg[2]
        elif kind == "done":
            envelope = msg[2]
            records.append(("records", rank, envelope.get("spans", [])))
            counters.extend(envelope.get("counters", []))
            results[rank] = envelope["result"]
            if rank == 0:
                t0_ns = envelope.get("t0_ns")
        elif kind == "error":
            errors[rank] = msg[2]
        if on_message is not None and kind != "heartbeat":
            on_message(msg)

    while True:
        if cancel is not None and cancel.is_set():
            raise RunCancelled("run cancelled")
        waitables = list(open_conns) + [p.sentinel for p in procs if p.exitcode is None]
        for ready in mpc.wait(waitables, timeout=0.1):
            if ready in open_conns:
                rank = open_conns[ready]
                try:
                    while ready.poll():
                        handle(rank, ready.recv())
                except (EOFError, OSError):
                    del open_conns[ready]
        now = time.monotonic()
        for rank, proc in enumerate(procs):
            if proc.exitcode is not None and results[rank] is None and rank not in dead:
                # Drain what the rank managed to say before it went.
                conn = conns[rank]
                try:
                    while conn.poll():
                        handle(rank, conn.recv())
                except (EOFError, OSError):
                    pass
                if results[rank] is None:
                    dead[rank] = _describe_exit(proc.exitcode)
            limit = spec.hang_timeout_s if beating[rank] else spec.start_timeout_s
            if results[rank] is None and rank not in dead and now - last_beat[rank] > limit:
                hung[rank] = f"stopped answering: no heartbeat for {now - last_beat[rank]:.1f} s"
        if all(r is not None for r in results):
            spans = [s for m in records for s in spans_of(m, tables[m[1]])]
            return LaunchResult(
                spans=sorted(spans, key=lambda s: (s.start, s.rank)),
                rank_results=results,  # type: ignore[arg-type]
                backend=backend,
                run_dir=run_dir,
                wall_s=time.monotonic() - started,
                counters=sorted((Counter(**c) for c in counters), key=lambda c: (c.t, c.rank)),
                warm=warm,
                t0_ns=t0_ns,
            )
        if (dead or hung or errors) and first_failure is None:
            first_failure = now
        if first_failure is not None and now - first_failure >= spec.grace_s:
            rank, cause = _root_cause(dead, hung, errors)
            raise RunFailed(rank, cause, run_dir / f"rank{rank}.log", detected_at=first_failure)


def _root_cause(
    dead: dict[int, str], hung: dict[int, str], errors: dict[int, str]
) -> tuple[int, str]:
    """The failure to report: a rank killed by a signal or hung is the cause; the
    connection errors of its peers are consequences."""
    killed = {r: c for r, c in dead.items() if "killed by" in c}
    for table in (killed, hung):
        if table:
            rank = min(table)
            return rank, table[rank]
    peer_trouble = ("Connection", "connection", "closed", "reset", "Broken pipe", "timed out")
    first_hand = {r: e for r, e in errors.items() if not any(w in e for w in peer_trouble)}
    for table in (first_hand, errors):
        if table:
            rank = min(table)
            return rank, f"raised {table[rank]}"
    rank = min(dead)
    return rank, dead[rank]
