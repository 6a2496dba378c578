"""A read trace as typed metrics beside the cost model: what `playground trace` prints.

Part of playground.kineto (issue 39), above the reader, the figures and the
collectives. It renders the same typed Metric list a run renders (scenarios.metrics),
so `--json` is format 2 and the text goes through playground.formatting:

- per rank, in rank order (`per: "rank"`): `idle_fraction`, `compute_fraction`,
  `non_compute_fraction`, `comm_comp_overlap_fraction` (HTA's definitions,
  playground.kineto.figures; null where a rank has no GPU kernel / no communication),
  and `comm_fraction` (communication over the span; for a gloo job, over its CPU ops);
- per collective kind (`series`: the kind): `collective_count`, `collective_time_s`
  (total), `collective_median_s`, `collective_bytes` (where sizes are known),
  `busbw_gbps` (median of the instances with a size, nccl-tests' bus bandwidth) with
  its predicted twin on the chosen hardware profile, and `link_fraction` (measured bus
  bandwidth over the profile's link);
- the straggler rank as lesson 1's workers view decides it, from the same per-rank
  report the trace screen's Workers tab shows (playground.kineto.workers: the rank
  flagged in most profiler steps, its work at least the threshold times the median
  rank's); that report is the `workers` key of `--json`, as it is a run's.

The hardware profile: `--hardware`, else the one that matches the trace's GPU name,
else an assumed one, said in the document (`profile.assumed`).

Imports: the pure runtime (cost model, kinds, stragglers) and the catalogs; no torch.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from playground.formatting import plain
from playground.kineto.collectives import MECHANISM_NAMES, Collective, collectives
from playground.kineto.figures import RankFigures, gpu_kernels, merged, rank_figures
from playground.kineto.reader import RankTrace
from playground.kineto.workers import trace_workers
from playground.usage import UsageError
from runtime.engine.stragglers import WorkersReport
from runtime.sim.collective_kinds import KINDS, Wire, busbw
from runtime.sim.costmodel import CostModel
from runtime.sim.profiles import get_profile, profile_names
from scenarios.metrics import Metric, finite
from scenarios.workers import straggler_ratio

FORMAT = 2
# A GPU's name as the trace's deviceProperties write it -> the profile of that GPU.
GPU_PROFILES = (("H200", "h200-nvlink"), ("H100", "h100-nvlink"), ("A100", "a100-nvlink"),
                ("4090", "rtx4090-pcie"))  # fmt: skip
ASSUMED_GPU = "a100-nvlink"
CPU_CATS = ("cpu_op", "user_annotation")  # a CPU job's own work, for its span
P2P = ("send", "recv", "sendrecv")  # one message each way (a SendRecv kernel's size is unknown)


@dataclass
class TraceReport:
    """Everything `playground trace` shows, from the traces of one job."""

    traces: list[RankTrace]
    figures: dict[int, RankFigures | None]
    collectives: list[Collective]
    profile: CostModel
    assumed: bool
    metrics: list[Metric]
    workers: WorkersReport | None = None  # the Workers tab's rows (playground.kineto.workers)

    def to_doc(self) -> dict[str, Any]:
        """The `--json` document (format 2 metrics; strict JSON)."""
        kinds: dict[str, dict[str, Any]] = {}
        for c in self.collectives:
            entry = kinds.setdefault(c.kind, {"kind": c.kind, "count": 0, "mechanisms": {}})
            entry["count"] += 1
            key = c.mechanism or "cannot_tell"
            entry["mechanisms"][key] = entry["mechanisms"].get(key, 0) + 1
            if c.lesson and c.lesson not in entry.setdefault("lessons", []):
                entry["lessons"] = sorted([*entry["lessons"], c.lesson])
        return finite(
            {
                "format": FORMAT,
                "source": "trace",
                "ranks": [
                    {
                        "rank": tr.rank,
                        "path": plain(tr.path),
                        "backend": tr.backend,
                        "world_size": tr.world_size,
                        "device": tr.device,
                    }
                    for tr in self.traces
                ],
                "profile": {"name": self.profile.name, "assumed": self.assumed},
                "metrics": [m.to_dict() for m in self.metrics],
                "collectives": list(kinds.values()),
                "workers": self.workers.to_dict() if self.workers is not None else None,
            }
        )


def choose_profile(traces: list[RankTrace], hardware: str | None) -> tuple[CostModel, bool]:
    """(the profile, whether it was assumed rather than named or matched)."""
    if hardware is not None:
        try:
            return get_profile(hardware), False
        except KeyError:
            raise UsageError.said(
                "trace.unknown_hardware", "hardware", name=plain(hardware),
                names=", ".join(profile_names()),
            ) from None  # fmt: skip
    for trace in traces:
        for word, name in GPU_PROFILES:
            if trace.device and word in trace.device:
                return get_profile(name), False
    if all((tr.backend or "").lower() == "gloo" for tr in traces):
        return get_profile("cpu-default"), True
    return get_profile(ASSUMED_GPU), True


def build(traces: list[RankTrace], hardware: str | None = None) -> TraceReport:
    profile, assumed = choose_profile(traces, hardware)
    kernels = {tr.rank: gpu_kernels(tr.events) for tr in traces}
    figures = {rank: rank_figures(mine) for rank, mine in kernels.items()}
    found = [c for tr in traces for c in collectives(tr)]
    metrics = _rank_metrics(traces, figures)
    metrics.append(
        Metric("comm_fraction", "fraction", _comm_fractions(traces, figures, found), per="rank")
    )
    metrics += _kind_metrics(found, profile)
    workers = trace_workers(traces, found, straggler_ratio(), kernels)
    if len(traces) >= 2:  # one rank straggles behind no one
        metrics.append(Metric("straggler_rank", "number", workers.overall.straggler))
    return TraceReport(traces, figures, found, profile, assumed, metrics, workers)


def _rank_metrics(traces: list[RankTrace], figures: dict[int, RankFigures | None]) -> list[Metric]:
    def per_rank(attr: str) -> list[Any]:
        return [getattr(figures[tr.rank], attr) if figures[tr.rank] else None for tr in traces]

    return [
        Metric("idle_fraction", "fraction", per_rank("idle_fraction"), per="rank"),
        Metric("compute_fraction", "fraction", per_rank("compute_fraction"), per="rank"),
        Metric("non_compute_fraction", "fraction", per_rank("non_compute_fraction"), per="rank"),
        Metric("comm_comp_overlap_fraction", "fraction", per_rank("overlap_fraction"), per="rank"),
    ]


def _comm_fractions(
    traces: list[RankTrace], figures: dict[int, RankFigures | None], found: list[Collective]
) -> list[float | None]:
    """Per rank, the share of its span spent communicating: HTA's communication kernels
    over HTA's span where the rank has GPU kernels, else (a gloo job) its collectives
    over its first CPU op to its last, the one share a CPU job's trace can give; None for
    a rank without events."""
    comm: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for c in found:
        comm[c.rank].append((c.start_us, c.end_us))
    out: list[float | None] = []
    for trace in traces:
        fig = figures[trace.rank]
        if fig is not None:  # HTA's kernels (its last-step filter included), HTA's span
            out.append(fig.comm_us / fig.span_us if fig.span_us > 0 else None)
            continue
        times = [
            (e.ts, e.ts + e.dur)
            for e in trace.events
            if e.ts is not None and e.dur is not None and e.cat in CPU_CATS
        ]
        span = max(b for _, b in times) - min(a for a, _ in times) if times else 0.0
        busy = sum(b - a for a, b in merged(comm[trace.rank]))  # type: ignore[arg-type]
        out.append(min(1.0, busy / span) if span > 0 else None)
    return out


def predicted_seconds(c: Collective, profile: CostModel) -> float | None:
    """The cost model's time for this collective on `profile` (None without a size or
    a group, or for a kind the model does not know)."""
    if c.nbytes is None:
        return None
    if c.kind in P2P:  # one message over one link: α + S·β
        return profile.alpha + c.nbytes * profile.beta
    kind = KINDS.get(c.kind)
    if kind is None or not c.group or c.group < 2:
        return None
    alpha, beta = profile.group_link(range(c.group))
    algorithm = "tree" if c.algorithm == "TREE" else "ring"
    return kind.time(Wire(c.group, c.nbytes, alpha, beta, profile.gamma, algorithm))


def _busbw_gbps(
    kind: str, n: int | None, nbytes: int | None, seconds: float | None
) -> float | None:
    if not nbytes or not seconds or seconds <= 0:
        return None
    if kind in P2P:  # a message's bus bandwidth is its algorithm bandwidth
        return nbytes / seconds / 1e9
    if kind not in KINDS or not n or n < 2:
        return None
    return busbw(kind, n, nbytes, seconds) / 1e9


def _kind_metrics(found: list[Collective], profile: CostModel) -> list[Metric]:
    by_kind: dict[str, list[Collective]] = defaultdict(list)
    for c in found:
        by_kind[c.kind].append(c)
    link_gbps = 1 / profile.beta / 1e9 if profile.beta > 0 else None
    out: list[Metric] = []
    for kind in sorted(by_kind, key=lambda k: -len(by_kind[k])):
        items = by_kind[kind]
        times = [c.seconds for c in items]
        sized = [c for c in items if c.nbytes is not None]
        measured = [_busbw_gbps(kind, c.group, c.nbytes, c.seconds) for c in sized]
        predicted = [
            _busbw_gbps(kind, c.group, c.nbytes, predicted_seconds(c, profile)) for c in sized
        ]
        bw = _median([m for m in measured if m is not None])
        pbw = _median([p for p in predicted if p is not None])
        out += [
            Metric("collective_count", "count", len(items), series=kind),
            Metric("collective_time_s", "s", sum(times), series=kind),
            Metric("collective_median_s", "s", statistics.median(times), series=kind),
            Metric(
                "collective_bytes",
                "bytes",
                sum(c.nbytes or 0 for c in sized) if sized else None,
                series=kind,
            ),  # fmt: skip
            Metric("busbw_gbps", "GB/s", bw, predicted=pbw, series=kind),
            Metric(
                "link_fraction",
                "fraction",
                bw / link_gbps if bw is not None and link_gbps else None,
                series=kind,
            ),  # fmt: skip
        ]
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def mechanism_lines(report: TraceReport, language: str) -> list[str]:
    """Per kind: how many of each mechanism, with the lesson to open (or "cannot tell")."""
    from playground.i18n import t

    counts = Counter((c.kind, c.mechanism, c.lesson) for c in report.collectives)
    lines = []
    for (kind, mechanism, lesson), n in sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1])):
        if mechanism is None:
            said = t("trace.cannot_tell", language)
        else:
            en, es = MECHANISM_NAMES[mechanism]
            said = es if language == "es" else en
            if lesson:
                said += " · " + t("trace.open_lesson", language, lesson=lesson)
        lines.append(f"  {kind:<16} {n:>6}  {said}")
    return lines
