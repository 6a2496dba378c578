"""Prometheus for the front ends: the parent's per-rank figures, on 127.0.0.1 for a run's lifetime.

Part of `playground/` in DESIGN.md (the front ends' side: `playground run
--metrics-port PORT`, and the app with PLAYGROUND_METRICS_PORT). The ranks
report to the parent as they always do; the parent aggregates them
(runtime.live_workers) and runtime.prometheus serves that view in Prometheus'
text format, so the tools a cluster already runs (a Prometheus scraping, a
Grafana dashboard: docs/grafana-dashboard.json) see every worker. The
exposition itself (names, labels, loopback only) lives in runtime.prometheus,
which the torchrun entry serves too; here are only what the CLI and the app
add: the run's label, its lesson's live view, and their one-line errors.

Never imports torch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from playground.formatting import plain
from playground.session import UsageError, resolve
from runtime.prometheus import MetricsPortError, MetricsServer
from scenarios.workers import live_workers

# The app's endpoint (as `run --metrics-port`), read when the app starts.
PORT_ENV = "PLAYGROUND_METRICS_PORT"


def run_id(scenario: str) -> str:
    """A run's label: its scenario, when it started, and this process."""
    return f"{scenario}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


@contextmanager
def serving(
    scenario: str, raw: dict[str, str], port: int | None
) -> Iterator[Callable[[tuple], None] | None]:
    """`run --metrics-port`: listening when entered (UsageError, one line, for a port it
    cannot serve), closed when the run is over; yields the feed of the run's live view (a
    launcher's on_message), None when no port is asked for."""
    if port is None:
        yield None
        return
    lesson, params = resolve(scenario, raw, "run")
    try:
        server = MetricsServer(port)
    except MetricsPortError as exc:
        raise UsageError(str(exc)) from None
    live = live_workers(lesson, params)
    server.watch(lesson.name, run_id(lesson.name), live)
    try:
        yield live.add_message
    finally:
        server.close()


@contextmanager
def serve_app() -> Iterator[MetricsServer | None]:
    """The app's endpoint while it runs, when PLAYGROUND_METRICS_PORT asks for one
    (UsageError if it cannot be served)."""
    text = os.environ.get(PORT_ENV, "").strip()
    if not text:
        yield None
        return
    try:
        if not text.isdigit():
            raise MetricsPortError(f"{PORT_ENV}={plain(text[:20])}: not a TCP port (1 to 65535)")
        server = MetricsServer(int(text), f"{PORT_ENV}=")
    except MetricsPortError as exc:
        raise UsageError(str(exc)) from None
    try:
        yield server
    finally:
        server.close()
