"""CostModel: how long an Action takes, for the simulator.

The alpha-beta model per link (alpha = seconds per message, beta = seconds per
byte), gamma = seconds per byte reduced, and a table of compute costs keyed by
an Action's `cost_key`. A model comes from calibration on this machine
(runtime.fit.calibration) or from a named profile (runtime.sim.profiles).

Links: ranks on the same node (`ranks_per_node`, None = all on one) use
alpha/beta; ranks on different nodes use inter_alpha/inter_beta. A collective
is limited by the slowest link its group crosses.

Compute: `compute[cost_key] * work` seconds. A pipeline stage's key such as
"F.s3" falls back to its family ("F") scaled by the action's `fraction` arg
(the share of the full model that stage holds), then to `flops / flops_per_s`.

Cores: when `cores` is set, the ranks share that many CPU cores (the
playground's CPU runs: four ranks on two cores). The simulator shares them
dynamically (processor sharing): while k ranks compute, each gets
`core_share(k) = min(1, cores / k)` of a core, so a rank computing alone (a
pipeline's warm-up) runs at full speed and four ranks on two cores at half.
compute_time is the duration with a core to itself. Communication on loopback
also burns CPU, which calibration captures by measuring with all ranks
exchanging at once at the same world size.

Corrections: what a rank pays beyond its actions' costs (a send's issue, a wake-up
after a wait, the gap between two actions, a barrier's exit lag) are a typed record,
`corrections` (runtime.sim.corrections), 0 until calibration or a run measures them.
Collective scales: `collective_scale`, keyed by `ScaleKey`, says how much longer than
its formula each kind ran as measured, per kind, series and size.

Stragglers: `slow` lists (rank, factor) pairs, a rank whose local compute takes
`factor` times as long (the `slow` fault, runtime.engine.faults). The simulator
(runtime.sim.eventloop) runs that rank's compute at its shared speed, then keeps
the rank busy (factor − 1) times as long again without taking a core, as the
real rank sleeps; its reductions on received data take `factor` times as long.

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from runtime.sim.collective_kinds import Wire, lookup
from runtime.sim.compute import ComputeRates
from runtime.sim.corrections import Corrections, ScaleKey, legacy_compute
from runtime.sim.program import Action


@dataclass(frozen=True)
class CostModel:
    name: str
    alpha: float
    beta: float
    gamma: float
    compute: dict[str, float] = field(default_factory=dict)
    ranks_per_node: int | None = None
    inter_alpha: float | None = None
    inter_beta: float | None = None
    cores: int | None = None
    flops_per_s: float | None = None
    # This machine's (or a datasheet's) compute for the MiniGPT: lessons estimate their
    # compute costs from it before a run has measured them (runtime.sim.compute).
    rates: ComputeRates | None = None
    source: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    # Measured / formula time of collectives, from calibration (between computes) or a run
    # (refine_collectives): what they pay beyond α, β, γ (a peer descheduled mid-ring,
    # buffer copies, Python per step).
    collective_scale: dict[ScaleKey, float] = field(default_factory=dict)
    # Slowed ranks: (rank, factor) pairs (the `slow` fault); empty when every rank is alike.
    slow: tuple[tuple[int, float], ...] = ()
    corrections: Corrections = field(default_factory=Corrections)

    def corrected(self, **changes: Any) -> CostModel:
        """This model with these fields of its corrections changed."""
        return replace(self, corrections=replace(self.corrections, **changes))

    def slow_factors(self, world_size: int) -> list[float] | None:
        """Each rank's compute factor (1.0: as calibrated); None when no rank is slowed."""
        if not self.slow:
            return None
        factors = [1.0] * world_size
        for rank, factor in self.slow:
            if 0 <= rank < world_size:
                factors[rank] *= factor
        return factors

    # -- links ---------------------------------------------------------------
    def same_node(self, a: int, b: int) -> bool:
        if self.ranks_per_node is None:
            return True
        return a // self.ranks_per_node == b // self.ranks_per_node

    def link(self, src: int, dst: int) -> tuple[float, float]:
        if self.same_node(src, dst) or self.inter_alpha is None or self.inter_beta is None:
            return self.alpha, self.beta
        return self.inter_alpha, self.inter_beta

    def group_link(self, group: Sequence[int]) -> tuple[float, float]:
        """The slowest link a ring over this group crosses: an inter-node one as soon
        as the group spans two nodes (a ring that leaves a node comes back to it),
        else the intra-node one. O(1) on one node, so a million ranks cost nothing."""
        if (
            self.ranks_per_node is None
            or self.inter_alpha is None
            or self.inter_beta is None
            or _on_one_node(group, self.ranks_per_node)
        ):
            return self.alpha, self.beta
        return max(self.alpha, self.inter_alpha), max(self.beta, self.inter_beta)

    def p2p_time(self, src: int, dst: int, nbytes: int) -> float:
        alpha, beta = self.link(src, dst)
        return alpha + nbytes * beta

    # -- compute -------------------------------------------------------------
    def compute_time(self, action: Action, sharing: float = 1.0) -> float:
        """Seconds for a compute action; `sharing` = ranks per core when oversubscribed."""
        key = action.cost_key or action.kind
        own = self.compute.get(series_key(action.series, key)) if action.series else None
        if own is not None:  # one series' own cost, as a run replayed it
            base = own * action.work
        elif key in self.compute:
            base = self.compute[key] * action.work
        elif (family := key.split(".", 1)[0]) != key and family in self.compute:
            # A stage of a split model ("F.s3") costs its share of the full one.
            base = self.compute[family] * action.arg("fraction", action.work)
        else:
            flops = action.arg("flops")
            if flops is None or not self.flops_per_s:
                raise KeyError(f"cost model {self.name!r} has no compute cost for {key!r}")
            base = flops / self.flops_per_s * action.work
        return base * max(1.0, sharing)

    def core_share(self, computing: int) -> float:
        """The fraction of a core each of `computing` ranks gets (1.0 without `cores`)."""
        if self.cores is None or self.cores <= 0 or computing <= self.cores:
            return 1.0
        return self.cores / computing

    # -- collectives -----------------------------------------------------------
    def collective_time(self, action: Action) -> float:
        """The collective's formula time, scaled as calibration or a run measured it: the
        hand-made collectives by their kind, torch's own (`builtin`) apart (calibrate times
        them between computes; refine_collectives as a run timed them), each preferring
        its series' own and its size's own scale; a DDP bucket by its series' own once a
        run timed them."""
        formula = self.collective_formula(action)
        scales, series = self.collective_scale, action.series or None
        if action.effects.untimed:
            # Its work runs inside another span (torch DDP's all-reduce inside B): once a
            # run has timed that span, the collective adds nothing of its own (0).
            own = ScaleKey(action.kind, series=series, timing="untimed")
            return formula * scales.get(own, 1.0)
        if action.nonblocking and action.algorithm == "builtin":
            # A DDP bucket: a run times each series' own buckets (refine_collectives: their
            # time once they could start). Before a run, torch's collective as calibrate
            # timed it between computes: a bucket runs while its rank computes too.
            busy = scales.get(ScaleKey(action.kind, builtin=True), 1.0)
            return formula * scales.get(ScaleKey(action.kind, series=series, timing="async"), busy)
        if not scales:
            return formula
        key = ScaleKey.of(action)
        size = (action.bytes, len(action.group or ()))
        keys = [key._replace(size=size), key]
        if series:
            own = key._replace(series=series)
            keys = [own._replace(size=size), own, *keys]
        return formula * next((scales[k] for k in keys if k in scales), 1.0)

    def collective_formula(self, action: Action) -> float:
        """The α-β-γ time of the collective's kind (runtime.sim.collective_kinds) over its
        group's slowest link; UnknownCollectiveKind for a kind no one registered."""
        kind = lookup(action.kind)
        group = action.group or (action.rank,)
        n = len(group)
        if n <= 1:
            return 0.0
        alpha, beta = self.group_link(group)
        wire = Wire(n, action.bytes, alpha, beta, self.gamma, action.algorithm or "ring")
        return kind.time(wire._replace(sizes=action.sizes) if action.sizes else wire)

    # -- description -----------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """What `--json` reports as the profile used (and from_dict reads back)."""
        out = asdict(self)
        out["collective_scale"] = {k.text(): v for k, v in self.collective_scale.items()}
        out["corrections"] = self.corrections.to_dict()
        out["bandwidth_gbps"] = (1 / self.beta / 1e9) if self.beta else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostModel:
        """A model from describe()'s JSON, or from a file of the older format (its
        corrections kept as special keys of the compute table)."""
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if isinstance(data.get("rates"), dict):
            data["rates"] = ComputeRates.from_dict(data["rates"])
        if "slow" in data:
            data["slow"] = tuple((int(r), float(f)) for r, f in data["slow"])
        corrections = data.get("corrections")
        if not isinstance(corrections, Corrections):
            corrections = Corrections.from_dict(corrections or {})
        data["compute"], data["corrections"] = legacy_compute(data.get("compute", {}), corrections)
        data["collective_scale"] = {
            k if isinstance(k, ScaleKey) else ScaleKey.from_text(k): float(v)
            for k, v in data.get("collective_scale", {}).items()
        }
        return cls(**data)


def slowed(model: CostModel, factors: Mapping[int, float]) -> CostModel:
    """`model` with these ranks' compute slowed (rank -> factor; runtime.engine.faults.slow_factors)."""
    if not factors:
        return model
    return replace(model, slow=tuple(sorted((int(r), float(f)) for r, f in factors.items())))


def _on_one_node(group: Sequence[int], ranks_per_node: int) -> bool:
    """Whether every member of `group` is on one node. A `range` (the million ranks of
    a lumped prediction) is read from its ends."""
    if isinstance(group, range) and group.step > 0:
        lo, hi = group.start, group[-1]
    else:
        lo, hi = min(group), max(group)
    return lo // ranks_per_node == hi // ranks_per_node


def series_key(series: str, key: str) -> str:
    """The compute-table entry of one series' own cost (`<series>:<key>`, e.g. a zero
    stage's forward of a unit, as a run measured it: runtime.fit.replay.replay_compute),
    which CostModel.compute_time prefers to the key every series shares."""
    return f"{series}:{key}"
