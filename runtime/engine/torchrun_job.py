"""A rank job that is not a lesson (the calibration's) under torchrun, written to --out.

    torchrun --nnodes 2 … -m runtime.engine.torchrun_job runtime.fit.calibration_rank:run_rank \\
        --out DIR

scenarios/torchrun.py is the way in for a lesson; this module is the way in for a
job the launcher would otherwise start itself (runtime.engine.launch's LaunchSpec: an
entry and no Actions), so that it can run on ranks the launcher cannot place, such as
the two network-namespace nodes of `playground lab nodes -- calibrate`
(playground.lab_calibrate). The entry is a string loaded in the rank, as the
launcher's are: the engine imports no runtime.fit module. Every rank sends its result
to rank 0, which writes rank<R>.json and run.json (runtime.engine.torchrun_rank).

Bad input exits 2 with one line, before any rendezvous. SIGTERM ends the rank at once
(status 143), even inside a collective: the lab ends its nodes that way.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
from pathlib import Path

ENTRY = re.compile(r"^runtime\.[a-z_.]+:[a-z_]+$")  # the runtime's own jobs, nothing else


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.engine.torchrun_job")
    parser.add_argument(
        "entry", help="package.module:function under runtime/, taking a RankContext"
    )
    parser.add_argument("--out", required=True, help="directory rank 0 writes the results to")
    parser.add_argument("--backend", default="gloo", choices=["auto", "gloo", "nccl"])
    args = parser.parse_args(argv)
    if not ENTRY.match(args.entry):
        sys.stderr.write(f"error: {args.entry!r} is not a runtime job (runtime.MODULE:FUNCTION)\n")
        return 2
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        sys.stderr.write("error: run me under torchrun (RANK and WORLD_SIZE are not set)\n")
        return 2
    _end_on_sigterm()  # before torch starts a thread: they all inherit the blocked signal
    from runtime.engine.bootstrap import RankSpec
    from runtime.engine.torchrun_rank import torchrun_rank

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    spec = RankSpec(rank=rank, world_size=world_size, entry=args.entry, params=None,
                    backend=args.backend, timeout_s=600.0)  # fmt: skip
    torchrun_rank(spec, Path(args.out), {"job": args.entry})
    return 0


def _end_on_sigterm() -> None:
    """SIGTERM blocked in every thread and taken by one that waits for it: a Python
    handler would only run once the main thread left torch's C++ call."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def wait() -> None:
        signal.sigwait({signal.SIGTERM})
        os._exit(143)

    threading.Thread(target=wait, daemon=True, name="sigterm").start()


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # skip the teardown: torch's threads make it slow (scenarios/torchrun.py)
