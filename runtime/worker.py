"""The rank process: rendezvous, run a scenario's rank code, record a Span per Action.

The real engine of DESIGN.md's picture. Two ways in, one rank code:

- launched by runtime.launch (via runtime.bootstrap): rendezvous on
  tcp://127.0.0.1:<free port>, spans streamed to the parent over the rank's
  pipe as each Action finishes, heartbeats watched by the parent;
- under torchrun: `torchrun --standalone --nproc-per-node N -m runtime.worker
  SCENARIO [-p key=value]... --out DIR` rendezvous through env://, and each
  rank writes its spans and results to DIR (read back by `playground replay`).

Every rank builds the same Program from the same params (it is pure data), runs
its own list with the scenario's rank handler, and reports its Spans and
Counters (memory, microbatches in flight) in batches every 50 ms (`records`)
and at the end (`done` with the handler's result dict).

Time zero is rank 0's CLOCK_MONOTONIC reading when all ranks left the start
barrier (perf_counter_ns is CLOCK_MONOTONIC on Linux, shared by the processes
of one host). Across hosts the offsets are not corrected yet.

Engine part: imports torch, only ever inside rank processes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from runtime.files import write_text_atomic
from runtime.program import Action, Program
from runtime.simulate import span_for
from runtime.trace import Counter

JOBS = {"calibrate": "runtime.calibration_rank:run_rank"}
# Scenarios are plug-ins the runtime loads by name: the layer above (scenarios/)
# depends on runtime, never the other way round (DESIGN.md's layer rule).
SCENARIO_REGISTRY = "scenarios.registry"
STREAM_INTERVAL_S = 0.05


class RankContext:
    """What a scenario's rank handler gets: who it is, its Program, and the recorder."""

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        scenario: str,
        params: dict[str, Any],
        program: Program | None,
        backend: str,
        device: torch.device,
        emit: Callable[[tuple], None],
        stream: bool,
        channel: Any = None,
        faults: list[dict[str, Any]] | None = None,
    ):
        self.rank = rank
        self.world_size = world_size
        self.scenario = scenario
        self.params = params
        self.program = program
        self.backend = backend
        self.device = device
        self._emit = emit
        self._stream = stream
        self._channel = channel
        # Parsed --fault dicts (runtime.faults): rank code fires the step-based ones.
        self.faults = list(faults or [])
        self.t0_ns = time.perf_counter_ns()
        self.spans: list[dict[str, Any]] = []
        self.counters: list[dict[str, Any]] = []
        self._last_flush_ns = time.perf_counter_ns()

    @property
    def actions(self) -> list[Action]:
        return self.program.ranks[self.rank] if self.program else []

    def start_clock(self) -> None:
        """Barrier, then agree on time zero: rank 0's clock as the barrier released it."""
        dist.barrier()
        t0 = torch.tensor([time.perf_counter_ns()], dtype=torch.int64)
        dist.broadcast(t0, src=0)
        self.t0_ns = int(t0.item())

    def now(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9

    def record(self, action: Action, start_ns: int, end_ns: int) -> None:
        span = span_for(
            action, (start_ns - self.t0_ns) / 1e9, (end_ns - self.t0_ns) / 1e9
        ).to_dict()
        self.spans.append(span)
        if self._stream:
            self._flush_soon()

    def sample(self, category: str, value: float) -> None:
        """A Counter sample now (memory in bytes, microbatches in flight, ...)."""
        counter = Counter(self.rank, category, self.now(), float(value)).to_dict()
        self.counters.append(counter)
        if self._stream:
            self._flush_soon()

    def _flush_soon(self) -> None:
        # Batches of records, at most STREAM_INTERVAL_S old: one message per span
        # would wake the parent (which shares the cores) hundreds of times a second.
        if time.perf_counter_ns() - self._last_flush_ns >= STREAM_INTERVAL_S * 1e9:
            self.flush()

    def flush(self) -> None:
        """Send the records not yet streamed to the parent."""
        if self._stream and (self.spans or self.counters):
            self._emit(("records", self.rank, self.spans, self.counters))
            self.spans, self.counters = [], []
        self._last_flush_ns = time.perf_counter_ns()

    def execute(self, actions: Iterable[Action], handler: Callable[[Action], None]) -> None:
        """Run each action with `handler`, timing it into a Span."""
        for action in actions:
            if self._channel is not None:
                self._channel.current_action = action.id
            start = time.perf_counter_ns()
            handler(action)
            self.record(action, start, time.perf_counter_ns())
        if self._channel is not None:
            self._channel.current_action = None


def resolve_backend(requested: str) -> str:
    if requested == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if requested == "nccl" and not torch.cuda.is_available():
        raise RuntimeError(
            "backend nccl needs CUDA, and torch sees no GPU here; use --backend gloo"
        )
    return requested


def _device(backend: str) -> torch.device:
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _load(entry: str) -> Callable[[RankContext], dict[str, Any]]:
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


def _build(scenario_name: str, params: dict[str, Any]) -> tuple[Program | None, str]:
    """The Program and rank entry of a scenario, or of a job ("calibrate", or any
    "module:function" taking a RankContext, which the engine tests use)."""
    if scenario_name in JOBS:
        return None, JOBS[scenario_name]
    if ":" in scenario_name:
        return None, scenario_name
    scenario = importlib.import_module(SCENARIO_REGISTRY).get_scenario(scenario_name)
    return scenario.build(params), scenario.rank_entry


def _schedule_faults(faults: list[dict[str, Any]], rank: int) -> None:
    for fault in faults:
        if fault["rank"] != rank or fault.get("after_s") is None:
            continue  # step and checkpoint faults are fired by the rank code (ctx.faults)
        sig = signal.SIGKILL if fault["kind"] == "kill" else signal.SIGSTOP
        timer = threading.Timer(fault["after_s"], os.kill, args=(os.getpid(), sig))
        timer.daemon = True
        timer.start()


def run_rank(
    *,
    rank: int,
    world_size: int,
    scenario: str,
    params: dict[str, Any],
    backend: str,
    emit: Callable[[tuple], None],
    stream: bool,
    faults: list[dict[str, Any]],
    channel: Any = None,
) -> dict[str, Any]:
    """Shared by both ways in, after the process group exists."""
    torch.manual_seed(1234 + rank)
    _schedule_faults(faults, rank)
    program, entry = _build(scenario, params)
    ctx = RankContext(
        rank=rank,
        world_size=world_size,
        scenario=scenario,
        params=params,
        program=program,
        backend=backend,
        device=_device(backend),
        emit=emit,
        stream=stream,
        channel=channel,
        faults=faults,
    )
    result = _load(entry)(ctx) or {}
    ctx.flush()
    result.setdefault("backend", backend)
    result["torch_version"] = torch.__version__
    if not stream:
        result["spans"] = ctx.spans
        result["counters"] = ctx.counters
    return result


def launched_main(spec: dict[str, Any], channel: Any) -> None:
    """Entry from runtime.bootstrap: rendezvous on loopback, report over the pipe."""
    rank = spec["rank"]
    try:
        torch.set_num_threads(int(spec.get("threads", 1)))
        backend = resolve_backend(spec["backend"])
        dist.init_process_group(
            backend,
            init_method=f"tcp://{spec['host']}:{spec['port']}",
            rank=rank,
            world_size=spec["world_size"],
            timeout=timedelta(seconds=spec.get("timeout_s", 120)),
        )
        channel.send(("ready", rank, backend, os.getpid()))
        result = run_rank(
            rank=rank,
            world_size=spec["world_size"],
            scenario=spec["scenario"],
            params=spec["params"],
            backend=backend,
            emit=channel.send,
            stream=spec.get("stream", True),
            faults=spec.get("faults", []),
            channel=channel,
        )
        channel.send(("done", rank, result))
    except BaseException as exc:  # report, then exit non-zero: the parent names the rank
        traceback.print_exc()
        with contextlib.suppress(OSError, ValueError):
            channel.send(("error", rank, f"{type(exc).__name__}: {exc}".splitlines()[0][:500]))
        sys.stdout.flush()
        os._exit(1)
    with contextlib.suppress(Exception):  # teardown after success; the result is already sent
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: gloo threads can make a clean exit slow


# -- torchrun -----------------------------------------------------------------
def torchrun_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runtime.worker",
        description="Run one rank of a playground scenario under torchrun; writes the timeline to --out.",
    )
    parser.add_argument("scenario")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True, help="directory for the measured timeline")
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    args = parser.parse_args(argv)

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    importlib.import_module("runtime.bootstrap").keep_freed_memory()
    registry = importlib.import_module(SCENARIO_REGISTRY)
    base = importlib.import_module("scenarios.base")
    try:
        scenario = registry.get_scenario(args.scenario)
        raw = base.parse_param_args(args.param)
        raw.setdefault("ranks", str(world_size))
        params = scenario.resolve(raw, mode="run")
        if scenario.world_size(params) != world_size:
            raise base.ParamError(
                f"ranks={scenario.world_size(params)} but torchrun started {world_size} processes"
            )
    except (KeyError, base.ParamError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2

    backend = resolve_backend(args.backend)
    torch.set_num_threads(
        max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
    )
    dist.init_process_group(backend, timeout=timedelta(seconds=120))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = run_rank(
        rank=rank,
        world_size=world_size,
        scenario=args.scenario,
        params=params,
        backend=backend,
        emit=lambda _msg: None,
        stream=False,
        faults=[],
    )
    write_text_atomic(out / f"rank{rank}.json", json.dumps({"rank": rank, "result": result}))
    if rank == 0:
        meta = {
            "scenario": args.scenario,
            "params": params,
            "world_size": world_size,
            "backend": backend,
        }
        write_text_atomic(out / "run.json", json.dumps({**meta, "launcher": "torchrun"}))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(torchrun_main())
