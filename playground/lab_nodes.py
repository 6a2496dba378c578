"""`playground lab nodes`: two nodes on one machine, joined by a link of a chosen bandwidth.

Issue 41, item 4. `lab nodes --nodes 2 --ranks-per-node P [--link 1Gbit] -- run LESSON
[-p K=V]… [--json]` (root, Linux) builds what a small cluster has and a laptop lacks:

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
in one line and exits 2, having left nothing. After the run's own report (its
prediction: this machine's one-level model), the measured metrics are shown beside a
two-level prediction (`hierarchical`: the calibration inside a node, the link across,
ranks_per_node set). Not yet: `calibrate` inside the nodes (intra and inter α/β
measured into one profile), more than two nodes.

The namespaces, the veth pair and the qdiscs, built and removed: playground.lab_netns.
Front-end part (playground): no torch here (the ranks are torchrun's processes).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from playground.formatting import plain
from playground.i18n import default_language, t
from playground.lab_netns import NODES, Lab, build, remove
from playground.usage import UsageError

MAX_PER_NODE = 8
PORT = 29500
GRACE_S = 3.0  # between SIGTERM and SIGKILL to the nodes' processes
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g)bit$", re.IGNORECASE)
_UNITS = {"k": 1e3, "m": 1e6, "g": 1e9}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="labs on this machine: two nodes joined by a limited link")
    actions = p.add_subparsers(dest="lab_command", metavar="ACTION", required=True)
    n = actions.add_parser(
        "nodes", help="run a lesson across two network-namespace nodes (root, Linux)"
    )
    n.add_argument("--nodes", type=int, default=NODES, help="nodes (2)")
    n.add_argument("--ranks-per-node", type=int, default=2, help="ranks on each node (1-8)")
    n.add_argument("--link", default="1Gbit", help="the link between nodes (1Gbit, 500Mbit)")
    n.add_argument("cmd", nargs=argparse.REMAINDER,
                   help="-- run LESSON [-p K=V]… [--json]")  # fmt: skip


def link_bits(text: str) -> float:
    """`500Mbit` -> 5e8 bits a second, from 1 Mbit to 100 Gbit (UsageError otherwise)."""
    match = _RATE.match(text.strip())
    bits = float(match[1]) * _UNITS[match[2].lower()] if match else 0.0
    if not 1e6 <= bits <= 100e9:
        raise UsageError.said("lab.bad_link", "link", link=plain(text)[:40])
    return bits


@dataclass(frozen=True)
class Inner:
    """The `run LESSON …` to run across the nodes."""

    lesson: str
    params: list[str]
    json: bool


def inner_command(cmd: list[str], ranks: int) -> Inner:
    """What comes after `--`: `run LESSON [-p K=V]… [--json]`, the params checked by the
    lesson with its ranks = nodes × ranks per node."""
    from playground.cli_params import raw_params
    from playground.session import resolve

    words = cmd[1:] if cmd[:1] == ["--"] else cmd
    if not words:
        raise UsageError.said("lab.needs_run", "cmd")
    if words[0] != "run" or len(words) < 2:
        raise UsageError.said("lab.only_run", "cmd", got=plain(" ".join(words))[:80])
    inner = argparse.ArgumentParser(prog="lab nodes -- run", add_help=False)
    inner.add_argument("scenario")
    inner.add_argument("-p", "--param", action="append", default=[])
    inner.add_argument("--json", action="store_true")
    parsed, unknown = inner.parse_known_args(words[1:])
    if unknown:
        raise UsageError.said("lab.only_run", "cmd", got=plain(" ".join(unknown))[:80])
    parsed.ranks = None
    raw = raw_params(parsed)
    lesson, _ = resolve(parsed.scenario, {}, "run")
    field_ = lesson.params.ranks_field
    raw.setdefault(field_, str(ranks))
    _, params = resolve(parsed.scenario, raw, "run")
    if params.world_size != ranks:
        raise UsageError.said("lab.ranks_count", field_, name=field_, value=raw[field_],
                              count=ranks)  # fmt: skip
    pairs = [f"{k}={v}" for k, v in raw.items() if k != field_]
    return Inner(parsed.scenario, pairs, parsed.json)


def check_host() -> None:
    """Linux, root, iproute2: or one line saying which is missing (exit 2)."""
    if not sys.platform.startswith("linux"):
        raise UsageError.said("lab.not_linux", "host", system=sys.platform)
    if os.geteuid() != 0:
        raise UsageError.said("lab.not_root", "host")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise UsageError.said("lab.no_tool", "host", tool=tool)


class _Stop(Exception):
    """A signal arrived: end the nodes and clean up."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGINT, SIGTERM, SIGHUP raise _Stop once, so that `finally` cleans up; any later
    one while it cleans up is ignored (the cleanup must finish: nothing may be left)."""
    raised: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        if not raised:
            raised.append(signum)
            raise _Stop(signum)

    previous = {sig: signal.signal(sig, stop)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}  # fmt: skip
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start_node(lab: Lab, i: int, per_node: int, inner: Inner, out: Path) -> subprocess.Popen:
    env = {**os.environ, "GLOO_SOCKET_IFNAME": lab.veth(i), "PYTHONUNBUFFERED": "1"}
    args = ["ip", "netns", "exec", lab.ns(i), sys.executable, "-m", "torch.distributed.run",
            "--nnodes", str(NODES), "--node-rank", str(i), "--nproc-per-node", str(per_node),
            "--master-addr", lab.address(0), "--master-port", str(PORT),
            "-m", "scenarios.torchrun", inner.lesson,
            *[a for p in inner.params for a in ("-p", p)], "--backend", "gloo",
            "--out", str(out)]  # fmt: skip
    with open(out.parent / f"node{i}.log", "wb") as log:  # torchrun's and the ranks' lines
        return subprocess.Popen(args, env=env, start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT)  # fmt: skip


def _end(nodes: list[subprocess.Popen]) -> None:
    """SIGTERM to each node's process group, SIGKILL after GRACE_S, all reaped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for node in nodes:
            if node.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(node.pid, sig)
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(n.poll() is None for n in nodes):
            time.sleep(0.05)
    for node in nodes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(timeout=5)


def cmd_lab(args: argparse.Namespace) -> int:
    language = default_language()
    if args.nodes != NODES or not 1 <= args.ranks_per_node <= MAX_PER_NODE:
        raise UsageError.said("lab.nodes_range", "nodes", nodes=args.nodes,
                              per_node=args.ranks_per_node)  # fmt: skip
    bits = link_bits(args.link)
    inner = inner_command(args.cmd, NODES * args.ranks_per_node)
    check_host()
    from runtime.engine.rundirs import new_run_dir

    lab = Lab()
    nodes: list[subprocess.Popen] = []
    with _signals_stop():
        try:
            build(lab, bits)
            print(t("lab.created", language, nodes=NODES, per_node=args.ranks_per_node,
                    link=plain(args.link)), file=sys.stderr)  # fmt: skip
            out = new_run_dir(f"lab-nodes-{inner.lesson}") / "run"
            nodes = [_start_node(lab, i, args.ranks_per_node, inner, out) for i in range(NODES)]
            # Polled, not waited on: a signal taken by another thread of this process
            # would not interrupt a blocking wait, and the handler would never run.
            while any(node.poll() is None for node in nodes):
                time.sleep(0.05)
        except _Stop as stop:
            name = signal.Signals(stop.signum).name
            print(f"playground: {t('lab.interrupted', language, signal=name)}", file=sys.stderr)
            return 128 + stop.signum
        finally:
            _end(nodes)
            remove(lab)
    failed = [(i, n.returncode) for i, n in enumerate(nodes) if n.returncode != 0]
    if failed:
        node, code = failed[0]
        log = out.parent / f"node{node}.log"
        with contextlib.suppress(OSError):
            sys.stderr.write(plain(log.read_bytes()[-2000:].decode(errors="replace")) + "\n")
        print(f"playground: {t('lab.failed', language, node=node, code=code, log=plain(str(log)))}",
              file=sys.stderr)  # fmt: skip
        return 1
    return _show(out, inner, args.ranks_per_node, bits, language)


def _show(out: Path, inner: Inner, per_node: int, bits: float, language: str) -> int:
    from playground.report import report
    from playground.saved import replay

    shown = argparse.Namespace(json=inner.json, compact=False, export=None, trace=None)
    outcome = replay(out)
    status = report(outcome, shown)
    if not inner.json:
        print(t("lab.link_said", language, gbps=f"{bits / 8 / 1e9:.4g}", run=plain(str(out))))
        measured = {(m.name, m.series): m.value for m in outcome.metrics}
        rows = [(name, measured.get(name), value) for name, value in
                hierarchical(inner, per_node, bits, out)]  # fmt: skip
        rows = [r for r in rows if _number(r[1]) and _number(r[2])]
        if rows:
            print(t("lab.hierarchical", language, per_node=per_node))
            for (name, series), value, predicted in rows:
                error = abs(value - predicted) / abs(value) if value else 0.0
                label = plain(name if series is None else f"{name} ({series})")
                print(f"  {label:<32} {value:>12.4g} {predicted:>12.4g} {error:>8.1%}")
    return status


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def hierarchical(
    inner: Inner, per_node: int, bits: float, out: Path
) -> list[tuple[tuple[str, str | None], object]]:
    """The lesson's prediction on a two-level cost model: this machine's calibration
    inside a node, the link's rate across (β = 8 / bits s a byte; α the loopback's, a
    veth being a kernel hop like it), ranks_per_node = `per_node`; its compute costs
    as the run's ranks measured them (`out`'s rank files), its links as given, never
    fitted to the run's own transfers (that would predict the measurement from itself)."""
    from dataclasses import replace

    from playground import saved_schema as schema
    from playground.session import decode_results, resolve, select_model
    from runtime.engine.files import read_bounded
    from runtime.fit.refine import refine

    raw = dict(pair.split("=", 1) for pair in inner.params)
    lesson, params = resolve(
        inner.lesson, {**raw, lesson_ranks(inner.lesson): str(per_node * NODES)}, "predict"
    )
    model = select_model(None, "gloo", params.world_size, nearest=True)
    model = replace(model, ranks_per_node=per_node, inter_alpha=model.alpha, inter_beta=8 / bits)
    model = lesson.prepare_model(params, model)
    raw_results = [
        schema.decode(read_bounded(out / f"rank{r}.json", schema.MAX_FILE_BYTES),
                      schema.TorchrunRank).result
        for r in range(params.world_size)
    ]  # fmt: skip
    results = decode_results(lesson, raw_results)
    model = refine(model, [r.compute_costs for r in results],
                   what=lesson.hooks.refinement.measures)  # fmt: skip
    _, metrics = lesson.predict(params, model)
    seen: dict[tuple[str, str | None], object] = {}
    for m in metrics:  # a name given twice (a figure's points): its first value
        seen.setdefault((m.name, m.series), m.predicted)
    return list(seen.items())


def lesson_ranks(name: str) -> str:
    from scenarios.registry import get_lesson

    return get_lesson(name).params.ranks_field
