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

from runtime.sim import formulas
from runtime.sim.compute import ComputeRates
from runtime.sim.program import Action

# The compute-table entry for the seconds a non-blocking send holds its sender while it
# issues (gloo's isend copies the message out on the sender's thread; NCCL's does not):
# 0 until a run measures it (refine_p2p); runtime.sim.simulate reads it.
SEND_ISSUE = "send.issue"
# ... and the seconds a compute pays when it starts right after its rank blocked (in a
# receive, a collective, a wait): the core it runs on had idled, its caches gone cold
# (a one-block forward ran 120-170 us longer right after a 2-rank all-reduce than back
# to back here, 200-400 us with 4 ranks on 2 cores). Calibrated (runtime.fit.calibration);
# after a run, 0: the compute the ranks measured already holds the wake-ups they paid.
WAKE = "wake.after_wait"
# ... and the seconds a rank spends between two of its actions: its executor's own
# loop (reading the next action, recording the span, the Python between two calls),
# which no span covers. 0 until a run measures it (runtime.fit.refine.refine_dispatch): a
# lesson whose step is many small actions pays it on every one (inference's TP decode:
# 25-35 us each, 2-3% of a run, all of it on the clock its requests queue on). A
# series may have its own (`<series>:dispatch.between_actions`, dispatch_gap).
DISPATCH = "dispatch.between_actions"
# ... and how long after the first member of a barrier each rank leaves it: gloo's
# barrier releases its members one message after another (0.3-0.5 ms apart here on
# average, in no fixed order), and a ring that starts right after it waits for the last
# one. 0 until a run measures it (runtime.fit.refine.refine_dispatch), per series and rank
# (`<series>:barrier.exit_lag@r<rank>`, gap_after).
EXIT_LAG = "barrier.exit_lag"


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
    # Measured / formula time per collective kind of the hand-made collectives, from
    # calibration (between computes) or a run (refine_collectives): what they pay beyond
    # α, β, γ (a peer descheduled mid-ring, buffer copies, Python per step).
    collective_scale: dict[str, float] = field(default_factory=dict)
    # Slowed ranks: (rank, factor) pairs (the `slow` fault); empty when every rank is alike.
    slow: tuple[tuple[int, float], ...] = ()

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
        """The collective's formula time, scaled as calibration or a run measured its kind:
        the hand-made collectives by their kind, torch's own (`builtin`) by
        `builtin.<kind>` (calibrate times them between computes; refine_collectives as a
        run timed them), a DDP bucket by its series' own once a run timed them."""
        formula = self.collective_formula(action)
        if action.arg("untimed", False):
            # Its work runs inside another span (torch DDP's all-reduce inside B): once a
            # run has timed that span, the collective adds nothing of its own (0).
            return formula * self.collective_scale.get(series_scale_key(action, "untimed"), 1.0)
        if action.nonblocking and action.algorithm == "builtin":
            # A DDP bucket: its lesson refines the link's latency, and a run times each
            # series' own buckets (refine_collectives: their time once they could start).
            # Before a run, torch's all-reduce as calibrate timed it between computes
            # (runtime.fit.calibration_busy): a bucket runs while its rank computes too.
            scales = self.collective_scale
            busy = scales.get(f"builtin.{action.kind}", 1.0)
            return formula * scales.get(series_scale_key(action), busy)
        key, scales = scale_key(action), self.collective_scale
        keys = [sized_key(key, action), key]
        if action.series:  # the series' own, as a run timed it (refine_collectives)
            own = series_key(action.series, key)
            keys = [sized_key(own, action), own, *keys]
        return formula * next((scales[k] for k in keys if k in scales), 1.0)

    def collective_formula(self, action: Action) -> float:
        group = action.group or (action.rank,)
        n = len(group)
        if n <= 1:
            return 0.0
        alpha, beta = self.group_link(group)
        s, g = action.bytes, self.gamma
        algo = action.algorithm or "ring"
        kind = action.kind
        if kind == "barrier":
            return 2 * formulas.tree_rounds(n) * alpha
        if kind == "all_reduce":
            if algo == "tree":
                return formulas.tree_all_reduce_time(n, s, alpha, beta, g)
            if algo == "rabenseifner":
                return formulas.rabenseifner_all_reduce_time(n, s, alpha, beta, g)
            # "ring" and "builtin": gloo and NCCL use rings for large buffers.
            return formulas.ring_all_reduce_time(n, s, alpha, beta, g)
        if kind == "reduce_scatter":
            return formulas.ring_reduce_scatter_time(n, s, alpha, beta, g)
        if kind == "all_gather":
            return formulas.ring_all_gather_time(n, s, alpha, beta)
        if kind == "broadcast":
            return formulas.tree_broadcast_time(n, s, alpha, beta)
        raise KeyError(f"no cost formula for collective {kind!r}")

    # -- description -----------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """What `--json` reports as the profile used."""
        out = asdict(self)
        out["bandwidth_gbps"] = (1 / self.beta / 1e9) if self.beta else None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CostModel:
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if isinstance(data.get("rates"), dict):
            data["rates"] = ComputeRates.from_dict(data["rates"])
        if "slow" in data:
            data["slow"] = tuple((int(r), float(f)) for r, f in data["slow"])
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


def scale_key(action: Action) -> str:
    """Which `collective_scale` entry scales this collective: its kind for the hand-made
    ones (calibrated on the project's own ring), `builtin.<kind>` for torch's own."""
    return f"builtin.{action.kind}" if action.algorithm == "builtin" else action.kind


def series_scale_key(action: Action, how: str = "async") -> str:
    """The `collective_scale` entry of one series' collectives of one kind as a run timed
    them: `<series>:async.<kind>` for the non-blocking ones (a DDP bucket's all-reduce),
    `<series>:untimed.<kind>` for those whose work a run times inside another span."""
    key = f"{how}.{action.kind}"
    return series_key(action.series, key) if action.series else key


def dispatch_gap(compute: dict[str, float], series: str | None) -> float:
    """The seconds a rank spends after an action of `series` before its next one:
    the series' own gap as a run measured it, else the one every series shares."""
    if series is not None:
        own = compute.get(series_key(series, DISPATCH))
        if own is not None:
            return own
    return compute.get(DISPATCH, 0.0)


def gap_after(compute: dict[str, float], action: Action) -> float:
    """The seconds its rank spends after `action` before its next one: the dispatch
    gap, and after a barrier the rank's lag leaving it after its first member, as a
    run measured it (0 where none did)."""
    gap = dispatch_gap(compute, action.series)
    if action.kind != "barrier":
        return gap
    key = f"{EXIT_LAG}@r{action.rank}"
    return gap + compute.get(series_key(action.series, key) if action.series else key, 0.0)


def series_key(series: str, key: str) -> str:
    """The compute-table entry of one series' own cost (`<series>:<key>`, e.g. a zero
    stage's forward of a unit, as a run measured it: runtime.fit.replay.replay_compute),
    which CostModel.compute_time prefers to the key every series shares."""
    return f"{series}:{key}"


def sized_key(key: str, action: Action) -> str:
    """The `collective_scale` entry of one size of a kind over one group size, as a run
    timed it (runtime.fit.refine_collectives): `<key>@<bytes>/<ranks>`."""
    return f"{key}@{action.bytes}/{len(action.group or ())}"
