"""The torchrun entry: one rank of a lesson under `torchrun`, its timeline written to --out.

    torchrun --standalone --nproc-per-node 2 -m scenarios.torchrun ring-allreduce \\
        -p size=4MiB --out out/
    playground replay out/

It lives in scenarios/ because it looks a lesson up by name (the registry);
runtime never does (DESIGN.md: the caller hands the engine the rank entry, the
typed params and each rank's Actions). Every rank parses the same params and
builds the same Program, then runs its own Actions through
runtime.worker.torchrun_rank, which rendezvouses through env:// (torchrun's
variables), so several machines and NCCL work as torchrun sets them up.

Bad input exits 2 with one line, before any rendezvous.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from scenarios.base import parse_param_args
from scenarios.params import ParamError
from scenarios.registry import get_lesson


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scenarios.torchrun",
        description="Run one rank of a playground lesson under torchrun; writes its timeline to --out.",
    )
    parser.add_argument("scenario")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True, help="directory for the measured timeline")
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    args = parser.parse_args(argv)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        print("error: run me under torchrun (RANK and WORLD_SIZE are not set)", file=sys.stderr)
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
            )
    except (KeyError, ParamError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2

    # Imported only now: torch, after the arguments are known to be good.
    from runtime.bootstrap import RankSpec
    from runtime.worker import torchrun_rank

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
    torchrun_rank(spec, Path(args.out), meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
