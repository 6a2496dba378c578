"""Prometheus for the front ends: the parent's per-rank figures, on 127.0.0.1 for a run's lifetime.

Part of `playground/` in docs/design.md (the front ends' side: `playground run
--metrics-port PORT`, and the app with PLAYGROUND_METRICS_PORT). The ranks
report to the parent as they always do; the parent aggregates them
(runtime.engine.live_workers) and runtime.engine.prometheus serves that view in Prometheus'
text format, so the tools a cluster already runs (a Prometheus scraping, a
Grafana dashboard: docs/grafana-dashboard.json) see every worker. The
exposition itself (names, labels, loopback only) lives in runtime.engine.prometheus,
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
from playground.i18n import t
from playground.session import UsageError, resolve
from playground.usage import os_reason
from runtime.engine.prometheus import HOST, MetricsPortError, MetricsServer
from scenarios.workers import live_workers

# The app's endpoint (as `run --metrics-port`), read when the app starts.
PORT_ENV = "PLAYGROUND_METRICS_PORT"


def port_error(exc: MetricsPortError, port: int, flag: str = "--metrics-port ") -> UsageError:
    """runtime.engine.prometheus' refusal of `port` (English as it says it), in Spanish too: out of
    1..65535, or the OS would not let it listen (its reason, the error's context)."""
    if not 1 <= port <= 65535:
        es = t("metrics.port_range", "es", flag=flag, port=port)
    else:
        cause = exc.__context__
        reason = os_reason(cause, "es") if isinstance(cause, OSError) else ""
        es = t("metrics.cannot_listen", "es", flag=flag, port=port, host=HOST, reason=reason)
    return UsageError(str(exc), es=es)


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
        raise port_error(exc, port) from None
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
    if not text.isdigit():
        raise UsageError.said("metrics.not_a_port", env=PORT_ENV, value=plain(text[:20]))
    try:
        server = MetricsServer(int(text), f"{PORT_ENV}=")
    except MetricsPortError as exc:
        raise port_error(exc, int(text), f"{PORT_ENV}=") from None
    try:
        yield server
    finally:
        server.close()
