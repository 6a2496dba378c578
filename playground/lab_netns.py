"""The lab's network: two namespaces joined by a veth pair limited with `tc tbf`, and its removal.

Split off playground.lab_nodes (`playground lab nodes`, the command; its arguments in
playground.lab_args, the torchrun nodes and the signals in playground.lab_procs, the
report in playground.lab_report), which builds a `Lab` with `build` and always ends
with `remove`. This module holds the iproute2 steps only: the names of the namespaces
and veth ends, the addresses on the lab's own subnet, the rate limit on both ends, and
the teardown that ends whatever still runs in a namespace before deleting it (the veth
pair and its qdiscs go with the namespaces). A step the kernel refuses is a UsageError
naming it.

Leftovers: a lab killed by SIGKILL runs no cleanup, so its names carry its owner: the
pid of the `playground` process that made it (`pgl<PID>n0`, `pgl<PID>v0`: 15 bytes at
most, the kernel's limit for a link's name). `sweep` (run by every `lab nodes` before it
builds, and by `playground lab clean`) removes the labs whose owner is dead, meaning no
process with that pid, or one started after the lab's namespace was made (the pid was
reused). A live owner's lab is never touched, nor any name outside that pattern.

Front-end part (playground): no torch here.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from playground.formatting import plain
from playground.usage import UsageError
from runtime.engine.owners import owner_alive, started_at

NODES = 2
SUBNET = "10.41.0"  # inside the lab's own namespaces: no other route can clash with it


# A lab's names: "pgl", its owner's pid, n (namespace) or v (veth end), the node.
NAME = re.compile(r"^pgl([1-9][0-9]{0,9})([nv])([0-9])$")
NETNS_DIR = Path("/run/netns")  # where `ip netns add` pins a namespace


@dataclass
class Lab:
    """The namespaces and veth pair of one lab, named after the process that owns it."""

    owner: int = field(default_factory=os.getpid)
    made: list[str] = field(default_factory=list)  # namespaces created so far

    def ns(self, i: int) -> str:
        return f"pgl{self.owner}n{i}"

    def veth(self, i: int) -> str:
        return f"pgl{self.owner}v{i}"

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
    burst = str(burst_bytes(bits))
    for i in range(NODES):
        ns, dev = lab.ns(i), lab.veth(i)
        _ip("ip", "link", "set", dev, "netns", ns)
        _ip("ip", "-n", ns, "addr", "add", f"{lab.address(i)}/24", "dev", dev)
        _ip("ip", "-n", ns, "link", "set", dev, "up")
        _ip("ip", "-n", ns, "link", "set", "lo", "up")
        _ip("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
            "rate", rate, "burst", burst, "latency", "50ms")  # fmt: skip


def burst_bytes(bits: float) -> int:
    """The token bucket's depth: 3 ms of the rate, at least 64 KiB (one GSO packet).
    A wire paces a message from its first byte; a bucket lets a message no larger than
    its depth through at the veth's own speed once it has refilled, so a deep one makes
    the link fast for the lessons' messages (with 10 ms of the rate, a 256 KiB
    activation crossed a 500 Mbit/s link at about 1.5× the rate). A shallow one loses
    the rate itself: the qdisc's wake-ups come late on a busy machine, and each sends
    at most a bucket (with 1 ms, a 4 MiB ring step got about 0.6× the rate). 3 ms kept
    the large messages at the rate and the 256 KiB ones within about 10% of it
    (docs/cloud-lab.md)."""
    return max(64 * 1024, int(bits / 8 * 0.003))


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


def sweep() -> list[str]:
    """Remove what labs with a dead owner left (a SIGKILL runs no cleanup): their
    processes, namespaces and veth ends. Returns the names removed, sorted."""
    found: dict[int, tuple[set[str], set[str]]] = {}  # owner -> namespaces, links here
    for kind, names in enumerate((_names("ip", "netns", "list"), _names("ip", "-o", "link"))):
        for name in names:
            if match := NAME.match(name):
                found.setdefault(int(match[1]), (set(), set()))[kind].add(name)
    removed: list[str] = []
    for owner, (namespaces, links) in sorted(found.items()):
        if _alive(owner, sorted(namespaces)):
            continue
        # The processes in its namespaces, the namespaces (their veth ends with them), and
        # a veth end still in this namespace (made, then SIGKILLed before it was moved).
        remove(Lab(owner=owner, made=sorted(namespaces)))
        for link in links:  # deleting one end of a pair deletes both: errors are expected
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=30)
        removed += [*namespaces, *links]
    return sorted(removed)


def _names(*command: str) -> list[str]:
    """The names `ip netns list` or `ip -o link` prints (none when it fails)."""
    try:
        text = subprocess.run(list(command), capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    if command[1] == "netns":  # "NAME (id: N)" once a namespace has an id
        return [line.split()[0] for line in text.splitlines() if line.strip()]
    # "7: NAME@if6: <…>": the name, without the peer after @
    return [line.split(": ")[1].split("@")[0] for line in text.splitlines() if ": " in line]


def _alive(owner: int, namespaces: list[str]) -> bool:
    """Whether `owner` still runs and is the process that made these namespaces: one
    that started after the oldest of them holds a reused pid, so the lab's maker is
    dead. Without a namespace to date (a bare veth end), a running pid counts as alive:
    when in doubt, the lab is someone's and stays."""
    made = [t for ns in namespaces if (t := _mtime(NETNS_DIR / ns)) is not None]
    if not made:
        return started_at(owner) is not None
    return owner_alive(owner, min(made))


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _pids_in(ns: str) -> list[int]:
    try:
        done = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                              timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(word) for word in done.stdout.split() if word.isdigit()]
