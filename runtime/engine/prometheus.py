"""Prometheus: a live view of the workers (runtime.engine.live_workers), served on 127.0.0.1.

The one exposition of the per-rank figures, shared by every front end that
serves them: the CLI's and the app's metrics port (where the parent aggregates
its ranks) and the torchrun entry's (each node's local rank 0 aggregates its
node's ranks). Each hands it the live view to serve. It sits in runtime's pure
part, beside the view it reads, because the torchrun entry may not import the
UI's layer (docs/design.md's layers) and two copies of the series' names would drift
apart. It knows no lesson and no front end.

Choices, and why:
- A private registry and one Collector that reads the live view at each
  scrape: nothing is copied into gauges that could go stale, and the process's
  own default metrics stay out.
- Listens on 127.0.0.1 only (the trust rule: nothing listens beyond this
  machine unless asked); a port that is taken or out of 1..65535 is refused
  with one line (MetricsPortError), which the front ends print before any rank works.
- Names are `playground_` + what + base unit (seconds, bytes, ratio), counters
  end in `_total`; labels: scenario, run_id, rank (and category, item). A figure
  a rank does not have (device memory on a CPU rank, throughput in a lesson
  without items) has no sample, never a 0.

Imports prometheus_client only when a server starts or is scraped (a third-party
package of the project's dependencies, not in docs/design.md's list for this layer);
never torch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from runtime.engine.live_workers import LiveWorkers

HOST = "127.0.0.1"
LABELS = ["scenario", "run_id", "rank"]


class MetricsPortError(ValueError):
    """A port that cannot be served: the message is the one line the CLI prints."""


def check_port(port: int, flag: str = "--metrics-port ") -> int:
    if not 1 <= port <= 65535:
        raise MetricsPortError(f"{flag}{port}: a TCP port is a number from 1 to 65535")
    return port


class MetricsServer:
    """An HTTP endpoint on 127.0.0.1:`port` serving the watched run's per-rank series."""

    def __init__(self, port: int, flag: str = "--metrics-port ") -> None:
        """Listening when it returns; `flag` names the setting in an error's one line."""
        from prometheus_client import CollectorRegistry, start_http_server

        self.port = check_port(port, flag)
        self._watched: tuple[str, str, LiveWorkers] | None = None
        self._lock = threading.Lock()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        try:
            self._httpd, self._thread = start_http_server(port, addr=HOST, registry=registry)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            message = f"{flag}{port}: cannot listen on {HOST}:{port} ({reason})"
            raise MetricsPortError(message) from None

    def watch(self, scenario: str, run_id: str, live: LiveWorkers) -> None:
        """Serve this run's figures from now on (the app's next run replaces them)."""
        with self._lock:
            self._watched = (scenario, run_id, live)

    @property
    def watched(self) -> tuple[str, str, LiveWorkers] | None:
        with self._lock:
            return self._watched

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


class _Collector:
    """Reads the watched run's live report at each scrape."""

    def __init__(self, server: MetricsServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        watched = self.server.watched
        if watched is None:
            return
        scenario, run_id, live = watched
        report = live.report()

        def family(kind, name: str, doc: str, extra: tuple[str, ...] = ()):
            return kind(name, doc, labels=[*LABELS, *extra])

        gauges = {
            "step": family(GaugeMetricFamily, "playground_step_seconds", "the rank's last step, wall time"),
            "work": family(GaugeMetricFamily, "playground_work_seconds", "the rank's last step without waiting: compute and transfers"),
            "busy": family(GaugeMetricFamily, "playground_busy_ratio", "share of the rank's last step spent computing"),
            "items": family(GaugeMetricFamily, "playground_items_per_second", "items (tokens, samples) the rank processed per second in its last step", ("item",)),
            "memory": family(GaugeMetricFamily, "playground_memory_bytes", "memory the rank holds now, by category", ("category",)),
            "peak": family(GaugeMetricFamily, "playground_memory_peak_bytes", "the most memory the rank held, by category", ("category",)),
            "device": family(GaugeMetricFamily, "playground_device_memory_bytes", "CUDA device memory allocated (CUDA ranks only)"),
            "util": family(GaugeMetricFamily, "playground_device_utilization_ratio", "CUDA device utilisation from NVML (where present)"),
            "straggler": family(GaugeMetricFamily, "playground_straggler", "1 for the rank flagged as the run's straggler, else 0"),
        }  # fmt: skip
        counters = {
            "steps": family(CounterMetricFamily, "playground_steps", "steps the rank finished"),
            "compute_s": family(CounterMetricFamily, "playground_compute_seconds", "time computing"),
            "comm_s": family(CounterMetricFamily, "playground_communication_seconds", "time moving data (waiting left out)"),
            "wait_s": family(CounterMetricFamily, "playground_wait_seconds", "time waiting for peers: barriers, collectives, receives"),
            "idle_s": family(CounterMetricFamily, "playground_idle_seconds", "time between actions (the bubble)"),
            "sent_bytes": family(CounterMetricFamily, "playground_sent_bytes", "bytes sent"),
            "received_bytes": family(CounterMetricFamily, "playground_received_bytes", "bytes received"),
            "failures": family(CounterMetricFamily, "playground_failures", "failures of the rank"),
            "restarts": family(CounterMetricFamily, "playground_restarts", "restarts of the run"),
        }  # fmt: skip
        for rank in report.ranks:
            labels = [scenario, run_id, str(rank)]
            totals, last = report.totals[rank], report.latest(rank)
            if last is not None:
                gauges["step"].add_metric(labels, last.step_s)
                gauges["work"].add_metric(labels, last.work_s)
                gauges["busy"].add_metric(labels, last.busy)
                if last.throughput is not None and report.items_unit:
                    gauges["items"].add_metric([*labels, report.items_unit], last.throughput)
            for category, seen in totals.memory.items():
                gauges["memory"].add_metric([*labels, category], seen["now"])
                gauges["peak"].add_metric([*labels, category], seen["peak"])
            if totals.device_memory_bytes is not None:
                gauges["device"].add_metric(labels, totals.device_memory_bytes["now"])
            if totals.device_utilization is not None:
                gauges["util"].add_metric(labels, totals.device_utilization / 100)
            gauges["straggler"].add_metric(labels, float(report.overall.straggler == rank))
            for key, metric in counters.items():
                metric.add_metric(labels, float(getattr(totals, key)))
        yield from gauges.values()
        yield from counters.values()
