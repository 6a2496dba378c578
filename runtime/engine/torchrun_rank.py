"""One rank under torchrun: env:// rendezvous, run_rank, the whole run written by rank 0.

The torchrun way into the real engine (runtime.engine.worker has the other, the
playground's own launcher): scenarios/torchrun.py looks the lesson up and
calls `torchrun_rank`, which rendezvouses through torchrun's variables, so
several machines and NCCL work as torchrun sets them up.

Results without a shared disk (issue 41, item 3): the hosts of a rented cluster
share no folder, so every rank sends its envelope to rank 0 over the process
group (gather_object) and rank 0 alone writes --out: rank<R>.json for every rank
and run.json, each in one atomic write; `playground replay` reads the directory
back. No other rank touches --out.

Clocks: time zero is rank 0's clock (runtime.engine.worker's start_clock), and a
rank on another host reads a CLOCK_MONOTONIC that started at its own boot. So
before the work each rank's offset to rank 0 is estimated over the process group
(`clock_offset_ns`: PINGS ping-pongs with rank 0, the one with the smallest
round trip kept, its midpoint against rank 0's reading, error at most RTT/2) and
the rank's spans and counters are shifted by it before they are sent: the
timeline of several hosts is aligned. The offset is kept in rank<R>.json
("clock_offset_ns", "clock_rtt_ns"). PLAYGROUND_CLOCK_SKEW_S (seconds added to
this process's perf_counter) stands in for another host's clock in the tests.
The live figures streamed with a metrics port are not shifted.

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
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from runtime.engine.bootstrap import RankSpec, keep_freed_memory
from runtime.engine.files import write_text_atomic
from runtime.engine.node_stream import HANG_UP_S, Hub, Link, NodeSink, NodeStreamError
from runtime.engine.rank_setup import rank_device, resolve_backend
from runtime.engine.worker import run_rank

PINGS = 8  # ping-pongs per rank: the least delayed one bounds the offset's error


def torchrun_rank(
    spec: RankSpec, out: Path, meta: dict[str, Any], node: NodeSink | None = None
) -> None:
    """One rank under torchrun (env:// rendezvous): estimate its clock offset to rank 0,
    run, send its envelope (aligned to rank 0's clock) to rank 0, which writes every
    rank<R>.json and the run's `meta` (lesson, params, backend) as run.json to `out`.
    With `node` (a metrics port), the ranks of each node also stream their records to
    its local rank 0 (runtime.engine.node_stream); NodeStreamError, after the rendezvous
    and before any work, when a node cannot serve them."""
    keep_freed_memory()
    _skew_clock()
    backend = resolve_backend(spec.backend)
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", spec.world_size))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    dist.init_process_group(backend, timeout=timedelta(seconds=spec.timeout_s))
    if node is None:
        offset_ns, rtt_ns = clock_offset_ns(spec.rank, spec.world_size, backend)
        envelope = run_rank(spec, backend, emit=lambda _msg: None, stream=False)
    else:
        try:
            send, close = _join_node(spec, backend, node)
        except NodeStreamError:
            dist.destroy_process_group()  # every rank got the same answer: none waits
            raise
        offset_ns, rtt_ns = clock_offset_ns(spec.rank, spec.world_size, backend)
        envelope = _run_streamed(spec, backend, send, close)
    mine = {"rank": spec.rank, **aligned(envelope, offset_ns),
            "clock_offset_ns": offset_ns, "clock_rtt_ns": rtt_ns}  # fmt: skip
    everyone: list[Any] | None = [None] * spec.world_size if spec.rank == 0 else None
    rank_device(backend)  # NCCL's object collectives run on the rank's own GPU
    dist.gather_object(mine, everyone, dst=0)
    if spec.rank == 0 and everyone is not None:
        out.mkdir(parents=True, exist_ok=True)
        for rank, doc in enumerate(everyone):
            write_text_atomic(out / f"rank{rank}.json", json.dumps(doc))
        doc = {**meta, "world_size": spec.world_size, "backend": backend, "launcher": "torchrun"}
        write_text_atomic(out / "run.json", json.dumps(doc))
    dist.barrier()
    dist.destroy_process_group()


def clock_offset_ns(rank: int, world_size: int, backend: str) -> tuple[int, int]:
    """This rank's clock minus rank 0's (ns), and the round trip it was measured with:
    rank 0 answers each rank in turn, PINGS times, with its perf_counter_ns; the rank
    keeps the exchange with the smallest round trip and takes rank 0's reading as made
    at its midpoint (NTP's estimate: off by at most half that round trip). Rank 0: 0, 0."""
    device = rank_device(backend)
    buf = torch.zeros(1, dtype=torch.int64, device=device)
    if rank == 0:
        for peer in range(1, world_size):
            for _ in range(PINGS):
                dist.recv(buf, src=peer)
                buf.fill_(time.perf_counter_ns())
                dist.send(buf, dst=peer)
        return 0, 0
    best: tuple[int, int] | None = None
    for _ in range(PINGS):
        before = time.perf_counter_ns()
        dist.send(buf, dst=0)
        dist.recv(buf, src=0)
        after = time.perf_counter_ns()
        theirs = int(buf.item())
        rtt = after - before
        if best is None or rtt < best[1]:
            best = ((before + after) // 2 - theirs, rtt)
    assert best is not None
    return best


def aligned(envelope: dict[str, Any], offset_ns: int) -> dict[str, Any]:
    """The envelope's spans and counters on rank 0's clock (this rank's `offset_ns` off)."""
    if offset_ns == 0:
        return envelope
    shift = offset_ns / 1e9
    spans = [{**s, "start": s["start"] - shift, "end": s["end"] - shift}
             for s in envelope.get("spans", [])]  # fmt: skip
    counters = [{**c, "t": c["t"] - shift} for c in envelope.get("counters", [])]
    return {**envelope, "spans": spans, "counters": counters,
            "t0_ns": envelope.get("t0_ns", 0) + offset_ns}  # fmt: skip


def _skew_clock() -> None:
    """PLAYGROUND_CLOCK_SKEW_S: this process's perf_counter_ns runs that many seconds
    ahead, as another host's clock would (the tests' stand-in for a second machine)."""
    text = os.environ.get("PLAYGROUND_CLOCK_SKEW_S", "")
    if not text:
        return
    skew_ns = int(float(text) * 1e9)
    real = time.perf_counter_ns
    time.perf_counter_ns = lambda: real() + skew_ns  # what the engine's clock reads


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
