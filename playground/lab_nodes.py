"""`playground lab nodes`: two nodes on one machine, joined by a link of a chosen bandwidth.

Issue 41, item 4. `lab nodes --nodes 2 --ranks-per-node P [--link 1Gbit] -- run LESSON
[-p K=V]… [--json]` (or `-- calibrate [--json]`: both links measured into one profile,
playground.lab_calibrate) (root, Linux) builds what a small cluster has and a laptop lacks:

- two network namespaces, each a node with its own loopback, joined by a veth pair
  whose two ends are limited to the link's rate by `tc qdisc … tbf` (both directions);
- torchrun started in each namespace (`--nnodes 2 --node-rank K --nproc-per-node P`,
  rendezvous on node 0's veth address), gloo bound to the node's veth
  (GLOO_SOCKET_IFNAME): ranks of one node reach each other through their node's
  loopback (the kernel routes a local address there), ranks of two nodes through
  the limited link;
- rank 0 gathers the whole run (runtime.engine.torchrun_rank) into a run directory,
  shown as `playground replay` shows it, with the link's rate beside it.

Everything it creates (namespaces, the veth pair, the qdiscs, every process of both
nodes) is removed on every way out: the run's end, a failure, SIGINT, SIGTERM or
SIGHUP (the nodes' process groups are ended first, then whatever still runs in a
namespace, then the namespaces, which takes the veth pair with them). Where it cannot
be built (not Linux, not root, no iproute2, or the kernel refuses a step) it says so
in one line and exits 2, having left nothing. A lab killed by SIGKILL cleans nothing:
the next `lab nodes`, and `playground lab clean`, remove what dead labs left
(playground.lab_netns.sweep, by the owner's pid in the names). After the run's own
report (its prediction: this machine's one-level model), the measured metrics are shown
beside a two-level prediction (playground.lab_report.hierarchical: the calibration
inside a node, the link across, ranks_per_node set), and beside the lab's own two-level calibration when one
was measured for this link and ranks a node. Not yet: more than two nodes.

This module is the command: its parser (`add_parser`, wired by playground.cli_parser)
and `cmd_lab`, which checks the input, builds the lab, runs the lesson or the
calibration across the nodes and removes everything. Imports: its input read and the
host checked, playground.lab_args; the namespaces, the veth pair and the qdiscs, built
and removed, playground.lab_netns; the nodes' processes and the signals,
playground.lab_procs; the run's report and its two-level prediction,
playground.lab_report; the calibration's phases and profile, playground.lab_calibrate.
Front-end part (playground): no torch here (the ranks are torchrun's processes).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys

from playground.formatting import plain
from playground.i18n import default_language, t
from playground.lab_args import Calibrate, check_host, inner_command, link_bits
from playground.lab_netns import NODES, Lab, build, remove, sweep
from playground.lab_procs import Stop, end, failed, signals_stop, spawn, start_node, wait
from playground.lab_report import show
from playground.usage import UsageError
from runtime.sim.units import format_seconds

MAX_PER_NODE = 8


def add_parser(sub: argparse._SubParsersAction) -> None:
    """`playground lab nodes …` and `playground lab clean`."""
    p = sub.add_parser("lab", help="labs on this machine: two nodes joined by a limited link")
    actions = p.add_subparsers(dest="lab_command", metavar="ACTION", required=True)
    n = actions.add_parser(
        "nodes", help="run a lesson across two network-namespace nodes (root, Linux)"
    )
    n.add_argument("--nodes", type=int, default=NODES, help="nodes (2)")
    n.add_argument("--ranks-per-node", type=int, default=2, help="ranks on each node (1-8)")
    n.add_argument("--link", default="1Gbit", help="the link between nodes (1Gbit, 500Mbit)")
    n.add_argument("cmd", nargs=argparse.REMAINDER,
                   help="-- run LESSON [-p K=V]… [--json] | -- calibrate")  # fmt: skip
    actions.add_parser(
        "clean", help="remove what labs killed by SIGKILL left (namespaces, veth, processes)"
    )


def cmd_lab(args: argparse.Namespace) -> int:
    """`playground lab nodes …` or `playground lab clean`: its exit status."""
    language = default_language()
    if args.lab_command == "clean":
        return _clean(language)
    if args.nodes != NODES or not 1 <= args.ranks_per_node <= MAX_PER_NODE:
        raise UsageError.said("lab.nodes_range", "nodes", nodes=args.nodes,
                              per_node=args.ranks_per_node)  # fmt: skip
    bits = link_bits(args.link)
    inner = inner_command(args.cmd, NODES * args.ranks_per_node)
    if isinstance(inner, Calibrate):
        from playground.lab_calibrate import MIN_LINK_BITS, rate_text

        if bits < MIN_LINK_BITS:
            raise UsageError.said("lab.calibrate_link", "link", link=rate_text(bits))
    check_host()
    _sweep(language)
    from runtime.engine.rundirs import new_run_dir

    lab = Lab()
    nodes: list[subprocess.Popen] = []
    with signals_stop():
        try:
            build(lab, bits)
            print(t("lab.created", language, nodes=NODES, per_node=args.ranks_per_node,
                    link=plain(args.link)), file=sys.stderr)  # fmt: skip
            if isinstance(inner, Calibrate):
                return _calibrate(lab, args.ranks_per_node, bits, inner, nodes, language)
            out = new_run_dir(f"lab-nodes-{inner.lesson}") / "run"
            nodes += [start_node(lab, i, args.ranks_per_node, inner, out) for i in range(NODES)]
            wait(nodes)
        except Stop as stop:
            name = signal.Signals(stop.signum).name
            print(f"playground: {t('lab.interrupted', language, signal=name)}", file=sys.stderr)
            return 128 + stop.signum
        finally:
            end(nodes)
            remove(lab)
    logs = [out.parent / f"node{i}.log" for i in range(NODES)]
    return failed(nodes, logs, language) or show(out, inner, args.ranks_per_node, bits,
                                                 language)  # fmt: skip


def _calibrate(
    lab: Lab, per_node: int, bits: float, inner: Calibrate,
    nodes: list[subprocess.Popen], language: str,
) -> int:  # fmt: skip
    """`-- calibrate`: each phase's torchrun on both nodes, then the profile fitted, cached
    and shown. `nodes` gets every process started, for the caller to end on the way out."""
    from playground import lab_calibrate
    from playground.session import select_model
    from runtime.engine.rundirs import new_run_dir

    out = new_run_dir("lab-calibrate")
    for phase in lab_calibrate.phases(per_node):
        print(t(f"lab.calibrating_{phase.name}", language, per_node=per_node,
                ranks=NODES * per_node), file=sys.stderr)  # fmt: skip
        started = [lab_calibrate.node_command(lab, i, per_node, phase, out) for i in range(NODES)]
        logs = [out / f"{phase.name}-node{i}.log" for i in range(NODES)]
        batch = [spawn(a, env, log) for (a, env), log in zip(started, logs, strict=True)]
        nodes += batch
        wait(batch)
        if failed(batch, logs, language):
            return 1
    base = select_model(None, "gloo", per_node * NODES, nearest=True)
    try:
        model = lab_calibrate.profile(out, per_node, bits, base)
    except (ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
        print(f"playground: {t('lab.calibrate_unreadable', language, why=plain(str(exc))[:200])}",
              file=sys.stderr)  # fmt: skip
        return 1
    path = lab_calibrate.save(model, per_node, bits)
    if inner.json:
        from playground.report import dumps

        print(dumps(model.describe()))
        return 0
    print(t("lab.calibrated", language, per_node=per_node, link=lab_calibrate.rate_text(bits),
            alpha=format_seconds(model.alpha), bw=f"{1 / model.beta / 1e9:.3g}",
            inter_alpha=format_seconds(model.inter_alpha or 0.0),
            inter_bw=f"{1 / (model.inter_beta or 1.0) / 1e9:.3g}",
            limit=f"{bits / 8 / 1e9:.3g}", path=plain(str(path))))  # fmt: skip
    return 0


def _clean(language: str) -> int:
    """`playground lab clean`: what dead labs left, removed and named (root, Linux)."""
    check_host()
    removed = sweep()
    print(t("lab.cleaned", language, names=" ".join(removed)) if removed
          else t("lab.clean_none", language))  # fmt: skip
    return 0


def _sweep(language: str) -> None:
    """Before a lab is built: what dead labs left goes, said on stderr."""
    if removed := sweep():
        print(t("lab.cleaned", language, names=" ".join(removed)), file=sys.stderr)
