"""`playground lab nodes … -- calibrate`: both links of the two-node lab measured into one profile.

Issue 41, item 4. `playground calibrate` (runtime.fit.calibration) times a ring of
every rank on this machine's loopback and fits t = α + S·β; a cluster has two links, so
the lab measures twice with that rank job (runtime.fit.calibration_rank, started
under torchrun by runtime.engine.torchrun_job) and the same fit:

1. inside a node: in each namespace at once, its ranks alone (`torchrun --standalone`,
   gloo on the node's loopback), so both nodes' ranks share the cores as in a lab run;
   the job's link half only (`run_links`: its ring steps and reduction; the compute
   is timed in step 2); intra α, β, γ are the mean of the two nodes' fits (skipped
   with one rank a node: there is no link inside it, and this machine's calibration
   stands in);
2. across the nodes: every rank of both nodes in one ring (gloo on the veth). A ring of
   2×P ranks crosses the link twice, once each way, each step waiting on its slowest
   hop, so its fit is the link's α and β as a ring step pays them (inter α/β; α never
   below the intra one: the token bucket lets small chunks through faster than the
   rate, which can pull the fitted intercept under zero). Its compute rates and
   collective scales, timed with every rank of the lab busy, are the profile's.

The profile (`ranks_per_node` = P, inter_alpha, inter_beta) is cached beside the
machine's calibration (lab-calibration.json, keyed by host, ranks a node, link rate,
torch and the calibration's method), and `lab nodes … -- run` predicts with it beside the
link-limit prediction (playground.lab_report.hierarchical).

The lab and the command: playground.lab_nodes; its nodes' processes and the signals:
playground.lab_procs. Front-end part (playground): no torch here (the ranks are
torchrun's processes).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from playground.lab_netns import NODES, Lab
from runtime.sim.costmodel import CostModel

MIN_LINK_BITS = 100e6  # below it the ring's 4 MiB chunks take minutes across the link
PORT = 29500
CACHE_MAX_BYTES = 4 * 2**20  # a few kilobytes a profile: more is not ours


@dataclass(frozen=True)
class Phase:
    """One measurement: `across` the link (one ring of both nodes) or inside each node."""

    name: str  # "intra" or "inter": the folder of its rank files
    across: bool


def phases(per_node: int) -> list[Phase]:
    inside = [Phase("intra", across=False)] if per_node > 1 else []
    return [*inside, Phase("inter", across=True)]


def node_command(
    lab: Lab, i: int, per_node: int, phase: Phase, out: Path
) -> tuple[list[str], dict[str, str]]:
    """Node `i`'s torchrun for `phase` (run in its namespace), and its environment."""
    from runtime.fit.calibration import LINKS_ENTRY, RANK_ENTRY

    # Inside a node only its link is fitted: the compute is timed across the nodes, with
    # every rank of the lab busy (profile, below).
    entry = RANK_ENTRY if phase.across else LINKS_ENTRY
    if phase.across:
        where = ["--nnodes", str(NODES), "--node-rank", str(i), "--master-addr",
                 lab.address(0), "--master-port", str(PORT)]  # fmt: skip
        device, folder = lab.veth(i), out / phase.name
    else:  # each node its own run, on its own loopback: the same port in two namespaces
        where = ["--nnodes", "1", "--master-addr", "127.0.0.1", "--master-port", str(PORT)]
        device, folder = "lo", out / f"{phase.name}{i}"
    args = ["ip", "netns", "exec", lab.ns(i), sys.executable, "-m", "torch.distributed.run",
            *where, "--nproc-per-node", str(per_node), "-m", "runtime.engine.torchrun_job",
            entry, "--out", str(folder)]  # fmt: skip
    return args, {**os.environ, "GLOO_SOCKET_IFNAME": device, "PYTHONUNBUFFERED": "1"}


def profile(out: Path, per_node: int, bits: float, base: CostModel) -> CostModel:
    """The two-level profile from the phases' rank files under `out`: `base` (this
    machine's calibration) gives the intra link when a node has one rank. ValueError
    when a rank file is missing or not what the rank job writes."""
    from runtime.fit import calibration
    from runtime.fit.link_fit import fit_link

    world = NODES * per_node
    inter = calibration.fit(_results(out / "inter", world), "gloo", world)
    if per_node > 1:
        inside = [fit_link(_results(out / f"intra{i}", per_node), per_node)
                  for i in range(NODES)]  # fmt: skip
        alpha = statistics.fmean(m.alpha for m in inside)
        beta = statistics.fmean(m.beta for m in inside)
        gamma = statistics.fmean(m.gamma for m in inside)
        intra_points = [[[s, t] for s, t in m.points] for m in inside]
    else:
        alpha, beta, gamma, intra_points = base.alpha, base.beta, base.gamma, []
    host = socket.gethostname()
    return replace(
        inter,
        name=f"lab:{host}/{NODES}x{per_node}/{rate_text(bits)}",
        alpha=alpha,
        beta=beta,
        gamma=gamma,
        ranks_per_node=per_node,
        # The veth is a kernel hop like the loopback: its latency is at least that. A fit
        # below it is the token bucket (lab_netns.burst_bytes) letting the small chunks
        # through faster than the rate, which pulls the line's intercept under zero.
        inter_alpha=max(inter.alpha, alpha),
        inter_beta=inter.beta,
        source=f"{inter.source}; `lab nodes` with {NODES} network namespaces of {per_node} "
        f"ranks, joined by a veth limited to {rate_text(bits)} (tc tbf): inside a node "
        + ("each node's ring on its loopback, both at once" if per_node > 1
           else "no link (one rank a node): this machine's calibration")
        + ", across the nodes one ring of every rank",
        details={"link_bits": bits, "inter_points": inter.details.get("points", []),
                 "intra_points": intra_points, "world_size": world, "backend": "gloo"},
    )  # fmt: skip


def _results(folder: Path, world: int) -> list[dict]:
    from playground import saved_schema as schema
    from runtime.engine.files import read_bounded

    try:
        return [dict(schema.decode(read_bounded(folder / f"rank{r}.json", schema.MAX_FILE_BYTES),
                                   schema.TorchrunRank).result)
                for r in range(world)]  # fmt: skip
    except (OSError, schema.SavedRunError) as exc:
        raise ValueError(f"{folder}: {exc}") from None


def rate_text(bits: float) -> str:
    return f"{bits / 1e9:g}Gbit" if bits >= 1e9 else f"{bits / 1e6:g}Mbit"


def cache_file() -> Path:
    from runtime.fit.calibration import cache_dir

    return cache_dir() / "lab-calibration.json"


def _key(per_node: int, bits: float) -> str:
    from runtime.fit.calibration import METHOD_VERSION, torch_version

    return f"{socket.gethostname()}|gloo|{NODES}x{per_node}|{int(bits)}|{torch_version()}|v{METHOD_VERSION}"


def _load() -> dict:
    from runtime.engine.files import read_text_bounded

    try:
        data = json.loads(read_text_bounded(cache_file(), CACHE_MAX_BYTES))
    except (OSError, ValueError):  # absent, too large, not JSON: none cached
        return {}
    return data if isinstance(data, dict) else {}


def save(model: CostModel, per_node: int, bits: float) -> Path:
    """Cache the lab's profile (private, as the machine's calibration is); its path."""
    from runtime.engine.files import write_text_atomic
    from runtime.fit.calibration import METHOD_VERSION, make_cache_dir

    method = f"|v{METHOD_VERSION}"
    data = {k: v for k, v in _load().items() if k.endswith(method)}  # older methods go
    data[_key(per_node, bits)] = model.describe()
    make_cache_dir()
    write_text_atomic(cache_file(), json.dumps(data, indent=1))
    return cache_file()


def lookup(per_node: int, bits: float) -> CostModel | None:
    """The lab's profile for this many ranks a node and this link, if it was measured."""
    found = _load().get(_key(per_node, bits))
    if not isinstance(found, dict):
        return None
    try:
        return CostModel.from_dict(found)
    except (TypeError, ValueError, KeyError):  # not what save wrote: as if never measured
        return None
