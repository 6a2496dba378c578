"""Hand-made collectives as data: the step-by-step Actions of ring and tree algorithms.

Lesson 1's mechanism, written out so both engines run the same steps: the real
engine executes each Action on a tensor (runtime.engine.comm) and the simulator costs
it (runtime.sim.simulate). Functions return the Actions of every rank in a group,
one Action per step, with the data chunk each step sends and receives in
`args` and the step's phase ("reduce-scatter", "all-gather", "reduce",
"broadcast") in `phase`.

Chunk convention, torch's: after a reduce-scatter the rank at position i of
the group owns the reduced chunk i (like `reduce_scatter_tensor`), and an
all-gather starts from that ownership. Sizes not divisible by the group size
are split with formulas.even_split (larger chunks first).

Pure: stdlib only.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from runtime.sim.formulas import even_split
from runtime.sim.program import Action


def _ring_phase(
    group: Sequence[int],
    numel: int,
    itemsize: int,
    *,
    phase: str,
    prefix: str = "",
    step: int | None = None,
    series: str | None = None,
) -> dict[int, list[Action]]:
    n = len(group)
    sizes = [c * itemsize for c in even_split(numel, n)]
    reduce = phase == "reduce-scatter"
    # Reduce-scatter: at step k, position i sends chunk (i-k-1) and receives (i-k-2),
    # so that after n-1 steps it holds chunk i fully reduced. All-gather: at step k,
    # position i forwards chunk (i-k) and receives (i-k-1).
    offset = 1 if reduce else 0
    short = "rs" if reduce else "ag"
    out: dict[int, list[Action]] = {r: [] for r in group}
    for k in range(n - 1):
        for i, rank in enumerate(group):
            send_chunk = (i - k - offset) % n
            recv_chunk = (i - k - offset - 1) % n
            out[rank].append(
                Action(
                    id=f"{prefix}{short}{k}@r{rank}",
                    rank=rank,
                    kind="sendrecv",
                    label=f"{short.upper()} {k + 1}/{n - 1} c{send_chunk}",
                    dst=group[(i + 1) % n],
                    src=group[(i - 1) % n],
                    bytes=sizes[send_chunk],
                    recv_bytes=sizes[recv_chunk],
                    reduce=reduce,
                    chunk=send_chunk,
                    step=step,
                    phase=phase,
                    series=series,
                    args=(("send_chunk", send_chunk), ("recv_chunk", recv_chunk), ("parts", n)),
                )
            )
    return out


# The two halves of a ring all-reduce: (group, numel, itemsize, *, prefix, step, series).
ring_reduce_scatter = functools.partial(_ring_phase, phase="reduce-scatter")
ring_all_gather = functools.partial(_ring_phase, phase="all-gather")


def ring_all_reduce(
    group: Sequence[int],
    numel: int,
    itemsize: int,
    *,
    prefix: str = "",
    step: int | None = None,
    series: str | None = None,
) -> dict[int, list[Action]]:
    """Ring all-reduce = ring reduce-scatter followed by ring all-gather; `series`: the
    series its steps belong to (Action.series)."""
    rs = ring_reduce_scatter(group, numel, itemsize, prefix=prefix, step=step, series=series)
    ag = ring_all_gather(group, numel, itemsize, prefix=prefix, step=step, series=series)
    return {r: rs[r] + ag[r] for r in group}


def _binomial(
    group: Sequence[int],
    nbytes: int,
    *,
    phase: str,
    root: int | None = None,
    prefix: str = "",
    step: int | None = None,
    series: str | None = None,
) -> dict[int, list[Action]]:
    """Binomial tree over virtual ranks vr = (position - root position) mod n (MPICH's)."""
    n = len(group)
    root_pos = 0 if root is None else list(group).index(root)
    out: dict[int, list[Action]] = {r: [] for r in group}

    def real(vr: int) -> int:
        return group[(vr + root_pos) % n]

    short = "bc" if phase == "broadcast" else "rd"
    for pos, rank in enumerate(group):
        vr = (pos - root_pos) % n
        actions: list[Action] = []

        def add(
            kind: str, peer: int, round_: int, rank: int = rank, actions: list[Action] = actions
        ) -> None:
            is_send = kind == "send"
            actions.append(
                Action(
                    id=f"{prefix}{short}{round_}@r{rank}",
                    rank=rank,
                    kind=kind,
                    label=f"{short.upper()} {'→' if is_send else '←'}{peer}",
                    dst=peer if is_send else None,
                    src=None if is_send else peer,
                    bytes=nbytes,
                    reduce=(phase == "reduce" and not is_send),
                    series=series,
                    step=step,
                    phase=phase,
                )
            )

        if phase == "broadcast":
            mask, round_ = 1, 0
            while mask < n:
                if vr & mask:
                    add("recv", real(vr - mask), round_)
                    break
                mask <<= 1
                round_ += 1
            mask >>= 1
            round_ -= 1
            while mask > 0:
                if vr + mask < n:
                    add("send", real(vr + mask), round_)
                mask >>= 1
                round_ -= 1
        else:
            mask, round_ = 1, 0
            while mask < n:
                if vr & mask:
                    add("send", real(vr - mask), round_)
                    break
                if vr + mask < n:
                    add("recv", real(vr + mask), round_)
                mask <<= 1
                round_ += 1
        out[rank] = actions
    return out


def tree_broadcast(group: Sequence[int], nbytes: int, **kw: Any) -> dict[int, list[Action]]:
    """Binomial-tree broadcast from `root` (default: the group's first rank)."""
    return _binomial(group, nbytes, phase="broadcast", **kw)


def tree_reduce(group: Sequence[int], nbytes: int, **kw: Any) -> dict[int, list[Action]]:
    """Binomial-tree sum to `root` (default: the group's first rank)."""
    return _binomial(group, nbytes, phase="reduce", **kw)


def tree_all_reduce(
    group: Sequence[int],
    nbytes: int,
    *,
    prefix: str = "",
    step: int | None = None,
    series: str | None = None,
) -> dict[int, list[Action]]:
    """Reduce to the group's first rank on a binomial tree, then broadcast back."""
    rd = tree_reduce(group, nbytes, prefix=prefix, step=step, series=series)
    bc = tree_broadcast(group, nbytes, prefix=prefix, step=step, series=series)
    return {r: rd[r] + bc[r] for r in group}
