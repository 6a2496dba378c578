"""The processes of a lab's nodes: started, waited on, judged and ended, and the signals.

Split off playground.lab_nodes (the `lab` command), which starts each node's torchrun
here inside its namespace (`ip netns exec`, in a session of its own so that its whole
process group is ended as one), waits for them by polling, reports the first failed
node with its log's tail, and, on every way out, ends them (SIGTERM, then SIGKILL after
GRACE_S). `signals_stop` turns SIGINT, SIGTERM and SIGHUP into `Stop` once, so the
command's `finally` runs and removes everything; a later signal cannot cut that short.

Imports: the standard library, playground.formatting, playground.i18n,
playground.lab_args (the lesson to run) and playground.lab_netns (the lab's names and
addresses). Front-end part (playground): no torch here (the ranks are torchrun's
processes).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from playground.formatting import plain
from playground.i18n import t
from playground.lab_args import Inner
from playground.lab_netns import NODES, Lab

PORT = 29500
GRACE_S = 3.0  # between SIGTERM and SIGKILL to the nodes' processes


class Stop(Exception):
    """A signal arrived: end the nodes and clean up."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def signals_stop() -> Iterator[None]:
    """SIGINT, SIGTERM, SIGHUP raise Stop once, so that `finally` cleans up; any later
    one while it cleans up is ignored (the cleanup must finish: nothing may be left)."""
    raised: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        if not raised:
            raised.append(signum)
            raise Stop(signum)

    previous = {sig: signal.signal(sig, stop)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}  # fmt: skip
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def start_node(lab: Lab, i: int, per_node: int, inner: Inner, out: Path) -> subprocess.Popen:
    """Node `i`'s torchrun of the lesson, in its namespace, gloo on its veth end."""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": lab.veth(i), "PYTHONUNBUFFERED": "1"}
    args = ["ip", "netns", "exec", lab.ns(i), sys.executable, "-m", "torch.distributed.run",
            "--nnodes", str(NODES), "--node-rank", str(i), "--nproc-per-node", str(per_node),
            "--master-addr", lab.address(0), "--master-port", str(PORT),
            "-m", "scenarios.torchrun", inner.lesson,
            *[a for p in inner.params for a in ("-p", p)], "--backend", "gloo",
            "--out", str(out)]  # fmt: skip
    return spawn(args, env, out.parent / f"node{i}.log")


def spawn(args: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """A node's torchrun in its own session (its process group is ended as one)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:  # torchrun's and the ranks' lines
        return subprocess.Popen(args, env=env, start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT)  # fmt: skip


def wait(nodes: list[subprocess.Popen]) -> None:
    """Until every node has exited."""
    # Polled, not waited on: a signal taken by another thread of this process would not
    # interrupt a blocking wait, and the handler would never run.
    while any(node.poll() is None for node in nodes):
        time.sleep(0.05)


def failed(nodes: list[subprocess.Popen], logs: list[Path], language: str) -> int:
    """0 when every node exited 0; else the first failed node's log tail and one line, 1."""
    failures = [(i, n.returncode) for i, n in enumerate(nodes) if n.returncode != 0]
    if not failures:
        return 0
    node, code = failures[0]
    log = logs[node]
    with contextlib.suppress(OSError):
        sys.stderr.write(plain(log.read_bytes()[-2000:].decode(errors="replace")) + "\n")
    print(f"playground: {t('lab.failed', language, node=node, code=code, log=plain(str(log)))}",
          file=sys.stderr)  # fmt: skip
    return 1


def end(nodes: list[subprocess.Popen]) -> None:
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
