"""Under torchrun with a metrics port: each node's ranks stream their records to its local rank 0.

A local run has a parent that every rank streams to; torchrun has none, so
when the torchrun entry is asked for a metrics port each node's local rank 0
plays that part for its node: it keeps the node's live view (fed through
`NodeSink.serve`, which the torchrun entry hands down) and its own records go
there in-process; every other rank of the node sends its `records` messages
(the ones the launcher gets with stream=True) to a `Hub` of local rank 0.

The transport, and why: a `multiprocessing.connection` Listener on 127.0.0.1
(an ephemeral port: never beyond loopback) with a random 32-byte authkey, so
another user of the machine can neither connect nor inject figures. Its
address and key reach the node's ranks through the process group the run
already has (runtime.engine.worker gathers them once, before any rank works), which
also tells every rank whether each node's endpoint is up. Messages are JSON
bytes (send_bytes/recv_bytes), never pickles: the hub runs no code a peer
sends. Files tailed in --out would also work, but would leave extra files in
the run's output and need polling; a socket delivers each batch at once.

A broken stream never stops a run: a peer whose hub is gone stops sending, and
the hub drops a message it cannot read.

Pure: stdlib only.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener

LOOPBACK = "127.0.0.1"
MAX_MESSAGE_BYTES = 64 << 20  # one batch of 0.2 s of records is far smaller
HANG_UP_S = 10.0  # how long local rank 0 waits, after its run, for the node's last records

Feed = Callable[[tuple], None]


class NodeStreamError(RuntimeError):
    """Why a run cannot serve its nodes' figures: the one line its ranks print."""


@dataclass(frozen=True)
class NodeSink:
    """What the torchrun entry hands each rank when a metrics port is asked for.

    On a node's local rank 0: `serve(ranks)` starts serving the figures of the node's
    (global) ranks and returns the feed of their `records` messages, or `error` says in
    one line why this node cannot serve (its port is taken): then no rank of the run
    works. On the node's other ranks: neither (they stream to local rank 0)."""

    serve: Callable[[Sequence[int]], Feed] | None = None
    error: str | None = None


class Hub:
    """Local rank 0's end: listens on 127.0.0.1 as soon as it is made; `start` accepts the
    node's other ranks and hands each of their messages to a feed, one thread per rank."""

    def __init__(self) -> None:
        self.authkey = secrets.token_bytes(32)
        self._listener = Listener((LOOPBACK, 0), backlog=64, authkey=self.authkey)
        self.address: tuple[str, int] = self._listener.address
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, feed: Feed, peers: Sequence[int]) -> None:
        """Accept one connection per rank of `peers`, in the background."""
        self._spawn(self._accept, feed, frozenset(peers))

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="node-stream")
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self, feed: Feed, peers: frozenset[int]) -> None:
        accepted = 0
        while accepted < len(peers):
            try:
                conn = self._listener.accept()
            except OSError:
                return  # closed: the run is over
            except Exception:  # a client without the key (AuthenticationError), a hang-up
                continue
            accepted += 1
            self._spawn(_read, conn, feed, peers)

    def close(self, wait_s: float = HANG_UP_S) -> None:
        """Wait up to `wait_s` for the node's ranks to hang up (their last records are in
        then), then stop listening."""
        deadline = time.monotonic() + wait_s
        while True:
            with self._lock:
                alive = [t for t in self._threads if t.is_alive()]
            if not alive or time.monotonic() >= deadline:
                break
            alive[0].join(max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(OSError):
            self._listener.close()


def _read(conn: Connection, feed: Feed, peers: frozenset[int]) -> None:
    with conn:
        while True:
            try:
                data = conn.recv_bytes(MAX_MESSAGE_BYTES)
            except (EOFError, OSError):
                return  # the rank hung up: its run is done
            message = decode(data, peers)
            if message is not None:
                with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
                    feed(message)  # a record it cannot read is dropped; the view goes on


def decode(data: bytes, peers: frozenset[int]) -> tuple | None:
    """A `records` message of one of `peers`, or None for anything else."""
    try:
        message = json.loads(data)
    except ValueError:
        return None
    if not (isinstance(message, list) and len(message) == 4 and message[0] == "records"):
        return None
    rank, spans, counters = message[1:]
    if type(rank) is not int or rank not in peers:
        return None
    if not (isinstance(spans, list) and isinstance(counters, list)):
        return None
    return ("records", rank, spans, counters)


class Link:
    """Another rank's end: its records to its node's hub, as JSON."""

    def __init__(self, address: tuple[str, int], authkey: bytes) -> None:
        try:
            self._conn: Connection | None = Client(tuple(address), authkey=authkey)
        except Exception as exc:  # refused, hung up during the handshake, wrong key
            raise NodeStreamError(
                f"cannot reach local rank 0's metrics hub on {LOOPBACK}:{address[1]} "
                f"({type(exc).__name__}: {exc})".splitlines()[0]
            ) from None

    def send(self, message: tuple) -> None:
        if self._conn is None:
            return
        try:
            self._conn.send_bytes(json.dumps(message).encode())
        except OSError:  # the hub is gone: the run goes on without live figures
            self.close()

    def close(self, _wait_s: float = 0.0) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
