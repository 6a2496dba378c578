"""What a cost model learns beyond its formulas: its corrections, and its collectives' scales.

Part of the simulator's CostModel (runtime.sim.costmodel). Calibration and a finished
run (runtime.fit.refine) measure what the α-β-γ formulas and the compute table leave
out, and the model carries it in two typed records:

- `Corrections`: what a rank pays beyond its actions' own costs: a non-blocking send's
  issue, the wake-up of a compute after its rank blocked, the executor's time between
  two actions (per series where a run measured one), and each rank's lag leaving a
  barrier after its first member (per series and rank);
- `ScaleKey`: which collectives one entry of `CostModel.collective_scale` scales (a kind,
  torch's own or the project's, a series' own, a size, the buckets' time from when they
  could start, the collectives timed inside another span).

Saved runs and calibration caches are JSON: `ScaleKey.text` and `Corrections.to_dict`
write them, and `from_text` / `from_dict` read them back; `legacy_compute` converts a
file of the older format, whose corrections were special keys of the compute table.

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from runtime.sim.program import Action


class ScaleKey(NamedTuple):
    """Which collectives a `collective_scale` entry scales (runtime.fit.refine_collectives
    measures them; CostModel.collective_time prefers the most particular entry)."""

    kind: str  # a collective kind, or "sendrecv": the steps of a hand-made collective
    builtin: bool = False  # torch's own (algorithm "builtin"), not the project's
    series: str | None = None  # one series' own, as a run timed them
    timing: str = ""  # "async": a non-blocking bucket from when it could start; "untimed"
    size: tuple[int, int] | None = None  # (bytes, ranks): one size over one group size

    @classmethod
    def of(cls, action: Action) -> ScaleKey:
        """The key of a blocking collective's kind: torch's own apart from the project's."""
        return cls(action.kind, builtin=action.algorithm == "builtin")

    def text(self) -> str:
        """The key in a file: `[<series>:]<kind>|builtin.<kind>|<timing>.<kind>[@<bytes>/<ranks>]`."""
        body = f"{self.timing}.{self.kind}" if self.timing else self.kind
        if self.builtin and not self.timing:
            body = f"builtin.{body}"
        if self.series:
            body = f"{self.series}:{body}"
        return f"{body}@{self.size[0]}/{self.size[1]}" if self.size else body

    @classmethod
    def from_text(cls, text: str) -> ScaleKey:
        """The key `text()` wrote; ValueError naming it if it is not one."""
        series, _, rest = text.rpartition(":")
        body, _, size = rest.partition("@")
        prefix, _, kind = body.rpartition(".")
        nbytes, _, ranks = size.partition("/")
        if not kind or (size and not (nbytes.isdigit() and ranks.isdigit())):
            raise ValueError(f"not a collective scale's key: {text!r}")
        return cls(
            kind,
            builtin=prefix == "builtin",
            series=series or None,
            timing=prefix if prefix in ("async", "untimed") else "",
            size=(int(nbytes), int(ranks)) if size else None,
        )


@dataclass(frozen=True)
class Corrections:
    """What a rank pays beyond its actions' own costs; 0 (or None) until measured.

    - send_issue: the seconds a non-blocking send holds its sender while it issues
      (gloo's isend copies the message out on the sender's thread; NCCL's does not);
      None: not measured (a lesson may estimate it; runtime.fit.refine.refine_p2p);
    - wake: the seconds a compute pays when it starts right after its rank blocked (a
      receive, a collective, a wait): the core had idled, its caches gone cold.
      Calibrated (runtime.fit.calibration); 0 after a run, whose measured compute
      already holds the wake-ups its ranks paid;
    - dispatch: the seconds a rank spends between two of its actions, its executor's
      own loop that no span covers (runtime.fit.refine.refine_dispatch), and
      series_dispatch a series' own where a run measured one;
    - exit_lag: per (series, rank), how long after a barrier's first member the rank
      leaves it: gloo releases a barrier's members one message after another, and a
      ring that starts right after waits for the last one.
    """

    send_issue: float | None = None
    wake: float = 0.0
    dispatch: float = 0.0
    series_dispatch: Mapping[str, float] = field(default_factory=dict)
    exit_lag: Mapping[tuple[str | None, int], float] = field(default_factory=dict)

    @property
    def per_action(self) -> bool:
        """Whether the gap after an action depends on its series or rank (else every one
        is `dispatch`)."""
        return bool(self.series_dispatch or self.exit_lag)

    def dispatch_gap(self, series: str | None) -> float:
        """The seconds a rank spends after an action of `series` before its next one."""
        if series is not None:
            own = self.series_dispatch.get(series)
            if own is not None:
                return own
        return self.dispatch

    def gap_after(self, action: Action) -> float:
        """The seconds its rank spends after `action` before its next one: the dispatch
        gap, and after a barrier the rank's lag leaving it."""
        gap = self.dispatch_gap(action.series)
        if action.kind != "barrier":
            return gap
        return gap + self.exit_lag.get((action.series or None, action.rank), 0.0)

    def to_dict(self) -> dict[str, Any]:
        """As JSON: the exit lags as [series, rank, seconds] triples."""
        return {
            "send_issue": self.send_issue,
            "wake": self.wake,
            "dispatch": self.dispatch,
            "series_dispatch": dict(self.series_dispatch),
            "exit_lags": [[s, r, lag] for (s, r), lag in self.exit_lag.items()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Corrections:
        issue = data.get("send_issue")
        return cls(
            send_issue=None if issue is None else float(issue),
            wake=float(data.get("wake", 0.0)),
            dispatch=float(data.get("dispatch", 0.0)),
            series_dispatch={str(k): float(v) for k, v in data.get("series_dispatch", {}).items()},
            exit_lag={(s, int(r)): float(lag) for s, r, lag in data.get("exit_lags", [])},
        )


# The compute-table keys an older file kept its corrections under.
_SEND_ISSUE, _WAKE = "send.issue", "wake.after_wait"
_DISPATCH, _EXIT_LAG = "dispatch.between_actions", "barrier.exit_lag@r"


def legacy_compute(
    compute: Mapping[str, float], corrections: Corrections
) -> tuple[dict[str, float], Corrections]:
    """An older file's compute table split into its costs and its corrections (added to
    `corrections`): `send.issue`, `wake.after_wait`, `[<series>:]dispatch.between_actions`
    and `[<series>:]barrier.exit_lag@r<rank>`."""
    costs: dict[str, float] = {}
    found: dict[str, Any] = {}
    series_dispatch = dict(corrections.series_dispatch)
    exit_lag = dict(corrections.exit_lag)
    for key, value in compute.items():
        series, _, name = key.rpartition(":")
        if key == _SEND_ISSUE:
            found["send_issue"] = value
        elif key == _WAKE:
            found["wake"] = value
        elif key == _DISPATCH:
            found["dispatch"] = value
        elif name == _DISPATCH:
            series_dispatch[series] = value
        elif name.startswith(_EXIT_LAG) and name[len(_EXIT_LAG) :].isdigit():
            exit_lag[(series or None, int(name[len(_EXIT_LAG) :]))] = value
        else:
            costs[key] = value
    if not found and len(costs) == len(compute):
        return dict(compute), corrections
    fields = vars(corrections) | found
    fields.update(series_dispatch=series_dispatch, exit_lag=exit_lag)
    return costs, Corrections(**fields)
