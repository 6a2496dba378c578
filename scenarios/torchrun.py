"""The torchrun entry: one rank of a lesson under `torchrun`, its timeline written to --out.

    torchrun --standalone --nproc-per-node 2 -m scenarios.torchrun ring-allreduce \\
        -p size=4MiB --out out/
    playground replay out/

It lives in scenarios/ because it looks a lesson up by name (the registry);
runtime never does (docs/design.md: the caller hands the engine the rank entry, the
typed params and each rank's Actions). Every rank parses the same params and
builds the same Program, then runs its own Actions through
runtime.engine.torchrun_rank, which rendezvouses through env:// (torchrun's
variables), so several machines and NCCL work as torchrun sets them up.

With `--metrics-port PORT`, the rank with LOCAL_RANK 0 on each node serves
the live figures of its node's ranks on 127.0.0.1:PORT for the run's lifetime,
in the same Prometheus series as `playground run --metrics-port`
(runtime.engine.prometheus, the lesson's live view of scenarios.workers); the node's
other ranks stream their records to it (runtime.engine.node_stream). It starts
listening before the rendezvous; if it cannot (the port is taken), every rank
of the run learns it right after the rendezvous and exits 2 with one line,
before any work.

Bad input exits 2 with one line, before any rendezvous (a parameter given twice,
an --out that cannot be a directory, a fault knob set: faults are `playground
run`'s). SIGTERM ends a rank with one line and status 143, as SIGINT would.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from runtime.engine.node_stream import NodeSink, NodeStreamError
from runtime.engine.prometheus import MetricsPortError, MetricsServer, check_port
from runtime.engine.rundirs import private_umask
from scenarios.base import Lesson, parse_param_args
from scenarios.params import ParamError, Params
from scenarios.registry import get_lesson
from scenarios.workers import live_workers, straggler_ratio


def _error(line: object) -> None:
    # One write: the node's ranks share torchrun's stderr, and print's two writes interleave.
    sys.stderr.write(f"error: {line}\n")
    sys.stderr.flush()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, status 2: no usage dump
        _error(f"{message} (see --help)")
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(
        prog="python -m scenarios.torchrun",
        description="Run one rank of a playground lesson under torchrun; writes its timeline to --out.",
    )
    parser.add_argument("scenario")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True, help="directory for the measured timeline")
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="each node's local rank 0 serves its node's ranks' figures in Prometheus' text "
        "format on 127.0.0.1:PORT while the run goes (docs/grafana-dashboard.json shows them)",
    )
    args = parser.parse_args(argv)
    try:
        _check_out(Path(args.out))
        keys = [pair.partition("=")[0].strip() for pair in args.param]
        if twice := next((k for i, k in enumerate(keys) if k in keys[:i]), None):
            raise ValueError(f"-p {twice} is given more than once: give each parameter once")
        if args.metrics_port is not None:
            check_port(args.metrics_port)
            straggler_ratio()  # the served straggler flag's threshold
    except ValueError as exc:  # MetricsPortError is one
        _error(exc)
        return 2
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        _error("run me under torchrun (RANK and WORLD_SIZE are not set)")
        return 2
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    try:
        lesson = get_lesson(args.scenario)
        raw = parse_param_args(args.param)
        raw.setdefault(lesson.params.ranks_field, str(world_size))
        params = lesson.parse(raw, "run")
        if params.world_size != world_size:
            raise ParamError(
                lesson.params.ranks_field,
                f"{lesson.params.ranks_field}={params.world_size} but torchrun started "
                f"{world_size} processes",
                es=f"{lesson.params.ranks_field}={params.world_size} pero torchrun lanzó "
                f"{world_size} procesos",
            )
        if asked := lesson.faults(params):  # the fault knobs: `playground run` injects them
            raise ParamError(
                None,
                f"{', '.join(asked)}: a fault knob is honoured by `playground run`, not under "
                "torchrun; leave it off here",
            )
    except (KeyError, ParamError) as exc:
        _error(exc.args[0] if exc.args else exc)
        return 2

    private_umask()  # what the rank writes (--out) is the user's alone
    _end_on_sigterm()  # before torch starts any thread: they all inherit the blocked signal
    # Imported only now: torch, after the arguments are known to be good.
    from runtime.engine.bootstrap import RankSpec
    from runtime.engine.torchrun_rank import torchrun_rank

    program = lesson.build(params)
    spec = RankSpec(
        rank=rank,
        world_size=world_size,
        entry=lesson.rank_entry,
        params=params,
        actions=tuple(program.ranks[rank]),
        backend=args.backend,
    )
    meta = {"scenario": lesson.name, "params": params.to_dict()}
    node, server = None, None
    if args.metrics_port is not None:
        node, server = _metrics(lesson, params, args.metrics_port)
    try:
        torchrun_rank(spec, Path(args.out), meta, node)
    except NodeStreamError as exc:
        _error(exc)
        return 2
    finally:
        if server is not None:
            server.close()  # the run is over: so is its endpoint
    return 0


def _check_out(out: Path) -> None:
    """--out is a directory, or can be made one (by the rank, after its work): refused
    before the rendezvous, with one line, when a file is in the way, not on every rank
    after it. Nothing is created here: bad input leaves no trace."""
    there = next((p for p in (out, *out.absolute().parents) if os.path.lexists(p)), None)
    if there is not None and not there.is_dir():
        what = "is a file" if there == out else f"is under {str(there)!r}, which is a file"
        raise ValueError(f"--out {str(out)!r} {what}; give a directory (new or existing)")


def _end_on_sigterm() -> None:
    """SIGTERM (torchrun passes its own on, as does `kill`) ends this rank with one line
    and status 143, as SIGINT ends it, even while it waits inside a collective: the
    signal is blocked in every thread and taken by one that waits for it (a Python
    handler would only run once the main thread left torch's C++ call)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def wait() -> None:
        signal.sigwait({signal.SIGTERM})
        _error(f"terminated (SIGTERM): rank {os.environ.get('RANK', '?')} stopped")
        os._exit(143)

    threading.Thread(target=wait, daemon=True, name="sigterm").start()


def _metrics(lesson: Lesson, params: Params, port: int) -> tuple[NodeSink, MetricsServer | None]:
    """--metrics-port: on the node's local rank 0, its endpoint, listening before the
    rendezvous (or the line saying why it cannot); the node's other ranks stream to it."""
    if int(os.environ.get("LOCAL_RANK", "0")) != 0:
        return NodeSink(), None
    try:
        server = MetricsServer(port)
    except MetricsPortError as exc:
        return NodeSink(error=str(exc)), None
    # One label for every node of the run: torchrun's rendezvous id (a uuid with --standalone).
    run_id = f"{lesson.name}-{os.environ.get('TORCHELASTIC_RUN_ID') or os.getpid()}"

    def serve(ranks: Sequence[int]) -> Callable[[tuple], None]:
        live = live_workers(lesson, params, ranks)
        server.watch(lesson.name, run_id, live)
        return live.add_message

    return NodeSink(serve=serve), server


if __name__ == "__main__":
    status = main()
    if status:
        sys.stdout.flush()
        sys.stderr.flush()
        # Out at once, skipping the interpreter's teardown as runtime.engine.worker's ranks do:
        # torch's threads make it slow, and of ranks that stop together torchrun would
        # SIGTERM the last ones out instead of letting them exit with their status.
        os._exit(status)
    sys.exit(status)
