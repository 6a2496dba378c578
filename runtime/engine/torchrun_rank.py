"""One rank under torchrun: env:// rendezvous, run_rank, its result written to --out.

The torchrun way into the real engine (runtime.engine.worker has the other, the
playground's own launcher): scenarios/torchrun.py looks the lesson up and
calls `torchrun_rank`, which rendezvouses through torchrun's variables, so
several machines and NCCL work as torchrun sets them up. Each rank writes
rank<R>.json (its envelope with every record) and rank 0 run.json, each in one
atomic write: `playground replay` reads the directory back.

With a metrics port (the entry's --metrics-port) there is no parent to stream
to, so each node's local rank 0 takes its place: one all_gather right after
the rendezvous tells every rank whether every node's endpoint is up and where
its node's hub listens (runtime.engine.node_stream), and the ranks stream their
records there while still keeping them for rank<R>.json. Without one, nothing
is streamed and nothing is added to the run.

Engine part: imports torch, only ever inside rank processes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.bootstrap import RankSpec, keep_freed_memory
from runtime.engine.files import write_text_atomic
from runtime.engine.node_stream import HANG_UP_S, Hub, Link, NodeSink, NodeStreamError
from runtime.engine.worker import rank_device, resolve_backend, run_rank


def torchrun_rank(
    spec: RankSpec, out: Path, meta: dict[str, Any], node: NodeSink | None = None
) -> None:
    """One rank under torchrun (env:// rendezvous): run, write rank<R>.json to `out`,
    and on rank 0 the run's `meta` (lesson, params, backend) as run.json. With `node`
    (a metrics port), the ranks of each node also stream their records to its local
    rank 0 (runtime.engine.node_stream); NodeStreamError, after the rendezvous and before any
    work, when a node cannot serve them."""
    keep_freed_memory()
    backend = resolve_backend(spec.backend)
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", spec.world_size))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    dist.init_process_group(backend, timeout=timedelta(seconds=spec.timeout_s))
    if node is None:
        out.mkdir(parents=True, exist_ok=True)
        envelope = run_rank(spec, backend, emit=lambda _msg: None, stream=False)
    else:
        try:
            send, close = _join_node(spec, backend, node)
        except NodeStreamError:
            dist.destroy_process_group()  # every rank got the same answer: none waits
            raise
        out.mkdir(parents=True, exist_ok=True)
        envelope = _run_streamed(spec, backend, send, close)
    write_text_atomic(out / f"rank{spec.rank}.json", json.dumps({"rank": spec.rank, **envelope}))
    if spec.rank == 0:
        doc = {**meta, "world_size": spec.world_size, "backend": backend, "launcher": "torchrun"}
        write_text_atomic(out / "run.json", json.dumps(doc))
    dist.barrier()
    dist.destroy_process_group()


def _join_node(
    spec: RankSpec, backend: str, node: NodeSink
) -> tuple[Callable[[tuple], None], Callable[[float], None]]:
    """One all_gather, before any work: whether every node's local rank 0 serves (else
    NodeStreamError on every rank, naming the first that cannot), which ranks share this
    node (torchrun's GROUP_RANK), and where its hub listens. Returns where this rank's
    records go, and what to call once it is done (with how long to wait for the others)."""
    rank_device(backend)  # NCCL's object collectives run on the rank's own GPU
    here = os.environ.get("GROUP_RANK", "0")
    hub = Hub() if node.serve is not None and node.error is None else None
    mine = {
        "node": here,
        "rank": spec.rank,
        "error": node.error,
        "hub": (hub.address, hub.authkey) if hub is not None else None,
    }
    everyone: list[Any] = [None] * spec.world_size
    dist.all_gather_object(everyone, mine)
    failed = [e for e in everyone if e["error"]]
    hubs = [e["hub"] for e in everyone if e["node"] == here and e["hub"] is not None]
    if failed or len(hubs) != 1:
        if hub is not None:
            hub.close(0.0)
        if not failed:
            raise NodeStreamError(f"node {here} has {len(hubs)} local ranks 0 serving its figures")
        first = failed[0]
        where = (
            ""
            if first["rank"] == spec.rank
            else f" (on rank {first['rank']}, node {first['node']})"
        )
        raise NodeStreamError(f"{first['error']}{where}")
    ranks = sorted(e["rank"] for e in everyone if e["node"] == here)
    if hub is not None and node.serve is not None:
        feed = node.serve(ranks)
        hub.start(feed, [r for r in ranks if r != spec.rank])
        return feed, hub.close
    link = Link(*hubs[0])
    return link.send, link.close


def _run_streamed(
    spec: RankSpec,
    backend: str,
    send: Callable[[tuple], None],
    close: Callable[[float], None],
) -> dict[str, Any]:
    """run_rank streaming its records to the node, while keeping them all for rank<R>.json
    (the same envelope as without a stream)."""
    spans: list[dict[str, Any]] = []
    counters: list[dict[str, Any]] = []

    def emit(message: tuple) -> None:
        if message[0] == "records":
            spans.extend(message[2])
            counters.extend(message[3])
            send(message)

    try:
        envelope = run_rank(spec, backend, emit=emit, stream=True)
    except BaseException:
        close(0.0)  # its peers may be stuck waiting for it: waiting for them helps none
        raise
    close(HANG_UP_S)
    return {**envelope, "spans": spans, "counters": counters}
