"""The lab's network: two namespaces joined by a veth pair limited with `tc tbf`, and its removal.

Split off playground.lab_nodes (`playground lab nodes`, the command: its arguments, the
torchrun nodes, the signals and the report), which builds a `Lab` with `build` and
always ends with `remove`. This module holds the iproute2 steps only: the names of
the namespaces and veth ends (a random tag each lab, so two labs never clash), the
addresses on the lab's own subnet, the rate limit on both ends, and the teardown that
ends whatever still runs in a namespace before deleting it (the veth pair and its
qdiscs go with the namespaces). A step the kernel refuses is a UsageError naming it.

Front-end part (playground): no torch here.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field

from playground.formatting import plain
from playground.usage import UsageError

NODES = 2
SUBNET = "10.41.0"  # inside the lab's own namespaces: no other route can clash with it


@dataclass
class Lab:
    """The namespaces and veth pair of one lab, named after a random tag."""

    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    made: list[str] = field(default_factory=list)  # namespaces created so far

    def ns(self, i: int) -> str:
        return f"pg{self.tag}n{i}"

    def veth(self, i: int) -> str:
        return f"pg{self.tag}v{i}"

    def address(self, i: int) -> str:
        return f"{SUBNET}.{i + 1}"


def _ip(*args: str) -> None:
    """One iproute2 step; the kernel's refusal as a UsageError naming the step."""
    done = subprocess.run(list(args), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=30)  # fmt: skip
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise UsageError.said("lab.refused", "host", command=" ".join(args),
                              reason=plain(reason)[:200])  # fmt: skip


def build(lab: Lab, bits: float) -> None:
    """Two namespaces, a veth pair between them, each end limited to `bits` a second."""
    for i in range(NODES):
        _ip("ip", "netns", "add", lab.ns(i))
        lab.made.append(lab.ns(i))
    _ip("ip", "link", "add", lab.veth(0), "type", "veth", "peer", "name", lab.veth(1))
    rate = f"{int(bits)}bit"
    burst = str(max(64 * 1024, int(bits / 8 / 100)))  # 10 ms of the rate, at least 64 KiB
    for i in range(NODES):
        ns, dev = lab.ns(i), lab.veth(i)
        _ip("ip", "link", "set", dev, "netns", ns)
        _ip("ip", "-n", ns, "addr", "add", f"{lab.address(i)}/24", "dev", dev)
        _ip("ip", "-n", ns, "link", "set", dev, "up")
        _ip("ip", "-n", ns, "link", "set", "lo", "up")
        _ip("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
            "rate", rate, "burst", burst, "latency", "50ms")  # fmt: skip


def remove(lab: Lab) -> None:
    """Every process still in the lab's namespaces, then the namespaces (the veth pair
    and its qdiscs go with them). Never raises: it runs on the way out."""
    if not lab.made:
        # A veth made before a namespace failed cannot exist (namespaces come first), but
        # a failure between `link add` and moving it can leave one in this namespace.
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["ip", "link", "del", lab.veth(0)], capture_output=True, timeout=30)
        return
    for ns in lab.made:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in _pids_in(ns):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            if sig == signal.SIGTERM and _pids_in(ns):
                time.sleep(0.5)
    for ns in lab.made:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["ip", "link", "del", lab.veth(0)], capture_output=True, timeout=30)
    lab.made.clear()


def _pids_in(ns: str) -> list[int]:
    try:
        done = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                              timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(word) for word in done.stdout.split() if word.isdigit()]
