"""Program and Action: what each rank does, as data both engines interpret.

This is the centre of docs/design.md's picture ("one program, two engines"). A
scenario's `build(params)` returns a Program; the real engine (runtime.engine.worker)
executes its Actions with torch.distributed and the simulator (runtime.sim.simulate)
executes the same Actions on a virtual clock. Both emit one Span per Action,
keyed by the Action's id, so measured and predicted timelines pair one to one.

Point-to-point messages are matched the way MPI and NCCL match them: the k-th
send from rank a to rank b pairs with the k-th receive on b from a (the
non-overtaking rule), so most Programs need no tags; a Program that sends two
kinds of message between the same two ranks in the same direction puts them
on separate channels with a `tag` arg (pipelines: activations of different
stage boundaries), and pairing is then per (src, dst, tag). Collectives are
matched by order within their group, as NCCL requires every member to issue
the group's collectives in the same order.

What an Action does beyond its kind is typed (`Effects`), never a string in `args`:
a non-blocking collective or send, a compute that ends with its group, one that waits
on a device, an idle wait until a moment, a collective timed inside another span.
`args` holds only the executor's own data (a chunk map, a checkpoint's op, a tag).

Pure: stdlib only.
"""

from __future__ import annotations

from collections import Counter as _Count
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from runtime.sim.collective_kinds import COLLECTIVE_KINDS
from runtime.sim.effects import NO_EFFECTS, Effects
from runtime.sim.trace import POSITION_FIELDS, Span

# Kinds of action. Compute kinds are open-ended (any name with a cost key), but
# these are the ones the lessons use and the exports colour.
COMPUTE_KINDS = frozenset({"compute", "F", "B", "W", "opt", "reduce", "decode", "prefill"})
P2P_KINDS = frozenset({"send", "recv", "sendrecv"})
# The collective kinds: runtime.sim.collective_kinds.COLLECTIVE_KINDS (imported here).
# Waiting for the rank's own non-blocking collectives to end (DDP's wait for its buckets
# before the optimizer step): neither compute nor a collective of its own.
WAIT_KINDS = frozenset({"wait"})


class ProgramError(ValueError):
    """A Program that cannot be run: unmatched messages, bad ranks, duplicate ids."""


@dataclass(frozen=True)
class Action:
    """One thing one rank does.

    - compute: `kind` in COMPUTE_KINDS (or any other name), `cost_key` names the
      entry of the CostModel's compute table, scaled by `work`.
    - send: `dst`, `bytes`. recv: `src`, `bytes`. sendrecv: both at once, the
      step of a ring (send to `dst` while receiving `recv_bytes` from `src`),
      optionally reducing what arrives (`reduce=True`).
    - collective: a kind of runtime.sim.collective_kinds, `group` (ranks), `bytes`
      (the buffer size per rank, S), `algorithm` ("ring", "tree", "builtin"); where
      members send different amounts (an uneven all-to-all), `sizes`: the bytes each
      member of `group` sends, in group order, the same tuple on every member (`bytes`
      is then this rank's own). Non-blocking (Effects.nonblocking) it is launched and
      the rank goes on: it runs on the rank's communication stream, after the
      collectives launched before it, and a later `wait` action waits for every one
      still running.

    `series` is the group the action belongs to when one Program runs several
    variants one after the other (a pipeline schedule, a ZeRO stage, a config):
    metrics, exports and the narrative group by it; the id is an opaque key.

    `effects` says what it does beyond its kind (Effects). `args` holds what the
    executor needs and the timeline does not (which data chunk goes where); it is a
    tuple of pairs so the Action stays hashable.
    """

    id: str
    rank: int
    kind: str
    label: str = ""
    cost_key: str | None = None
    work: float = 1.0
    dst: int | None = None
    src: int | None = None
    bytes: int = 0
    recv_bytes: int = 0
    reduce: bool = False
    group: tuple[int, ...] | None = None
    algorithm: str | None = None
    series: str | None = None
    stage: int | None = None
    microbatch: int | None = None
    chunk: int | None = None
    step: int | None = None
    phase: str | None = None
    args: tuple[tuple[str, Any], ...] = ()
    effects: Effects = NO_EFFECTS
    sizes: tuple[int, ...] | None = None

    @property
    def is_p2p(self) -> bool:
        return self.kind in P2P_KINDS

    @property
    def is_collective(self) -> bool:
        return self.kind in COLLECTIVE_KINDS

    @property
    def is_wait(self) -> bool:
        return self.kind in WAIT_KINDS

    @property
    def nonblocking(self) -> bool:
        """A collective launched without waiting for it (ended by a later `wait`)."""
        return self.effects.nonblocking and self.kind in COLLECTIVE_KINDS

    @property
    def is_compute(self) -> bool:
        return not (self.is_p2p or self.is_collective or self.is_wait)

    @property
    def tag(self) -> int:
        """The message channel (as in MPI and gloo tags): messages pair in order per
        (src, dst, tag); 0 unless the Program separates channels."""
        return int(self.arg("tag", 0))

    @property
    def peer(self) -> int | None:
        """The peer a Span reports: where the data goes, else where it comes from."""
        return self.dst if self.dst is not None else self.src

    def arg(self, name: str, default: Any = None) -> Any:
        for key, value in self.args:
            if key == name:
                return value
        return default

    def sends(self) -> Iterator[tuple[int, int]]:
        """(destination, bytes) of the messages this action puts on the wire."""
        if self.kind in ("send", "sendrecv") and self.dst is not None:
            yield self.dst, self.bytes

    def receives(self) -> Iterator[tuple[int, int]]:
        """(source, bytes) of the messages this action takes off the wire."""
        if self.kind == "recv" and self.src is not None:
            yield self.src, self.bytes
        elif self.kind == "sendrecv" and self.src is not None:
            yield self.src, self.recv_bytes

    def span_fields(self) -> dict[str, Any]:
        """The optional Span fields this action fills in (see runtime.sim.trace.Span)."""
        out: dict[str, Any] = {"action_id": self.id}
        for name in POSITION_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.is_p2p or self.is_collective:
            out["bytes"] = self.bytes
        if self.peer is not None:
            out["peer"] = self.peer
        return out


def past_warmup(step: int | None, warmup_steps: int) -> bool:
    """Whether an Action (or its Span) of `step` counts once a lesson leaves its first
    `warmup_steps` steps out of its times (Hooks.warmup_steps); one of no step counts."""
    return step is None or step >= warmup_steps


def barriers(
    name: str,
    group: tuple[int, ...],
    *,
    series: str | None = None,
    phase: str | None = None,
    step: int | None = None,
) -> list[Action]:
    """A barrier on every rank of `group` (ids `<name>@r<rank>`): where a series or an
    iteration starts, so that every rank starts it together. Pass one shared `group`
    tuple: the simulator keys collectives by it."""
    return [
        Action(
            id=f"{name}@r{rank}",
            rank=rank,
            kind="barrier",
            label="barrier",
            group=group,
            series=series,
            phase=phase,
            step=step,
        )
        for rank in group
    ]


@dataclass
class Program:
    """For each rank, its ordered list of Actions."""

    world_size: int
    ranks: list[list[Action]] = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        if not self.ranks:
            self.ranks = [[] for _ in range(self.world_size)]

    def add(self, action: Action) -> Action:
        self.ranks[action.rank].append(action)
        return action

    def extend(self, actions: Iterable[Action]) -> None:
        for action in actions:
            self.add(action)

    def actions(self) -> Iterator[Action]:
        for rank_actions in self.ranks:
            yield from rank_actions

    def __len__(self) -> int:
        return sum(len(r) for r in self.ranks)

    def validate(self) -> None:
        """Check what can be checked without running: ids, ranks, message pairing.

        Deadlocks need the order of events and are found by the simulator
        (runtime.sim.simulate.simulate raises DeadlockError naming the stuck ranks).
        """
        if len(self.ranks) != self.world_size:
            raise ProgramError(
                f"program has {len(self.ranks)} rank lists for world size {self.world_size}"
            )
        seen: set[str] = set()
        sent: _Count[tuple[int, int, int]] = _Count()
        received: _Count[tuple[int, int, int]] = _Count()
        sent_bytes: dict[tuple[int, int, int], list[int]] = {}
        recv_bytes: dict[tuple[int, int, int], list[int]] = {}
        for rank, actions in enumerate(self.ranks):
            launched: Action | None = None  # a non-blocking collective not yet waited for
            for action in actions:
                if action.rank != rank:
                    raise ProgramError(
                        f"action {action.id} says rank {action.rank} but sits on rank {rank}"
                    )
                if action.id in seen:
                    raise ProgramError(f"duplicate action id {action.id}")
                seen.add(action.id)
                for peer in (action.dst, action.src):
                    if peer is not None and not 0 <= peer < self.world_size:
                        raise ProgramError(
                            f"action {action.id} names peer {peer} outside 0..{self.world_size - 1}"
                        )
                if action.kind == "sendrecv" and (action.dst is None or action.src is None):
                    raise ProgramError(f"sendrecv {action.id} needs both dst and src")
                if action.kind == "send" and action.dst is None:
                    raise ProgramError(f"send {action.id} has no dst")
                if action.kind == "recv" and action.src is None:
                    raise ProgramError(f"recv {action.id} has no src")
                if action.is_collective and (not action.group or rank not in action.group):
                    raise ProgramError(f"collective {action.id} on rank {rank} is not in its group")
                if action.sizes is not None:
                    _check_sizes(action)
                if action.nonblocking:
                    launched = action
                elif action.is_wait:
                    launched = None
                for dst, nbytes in action.sends():
                    sent[(rank, dst, action.tag)] += 1
                    sent_bytes.setdefault((rank, dst, action.tag), []).append(nbytes)
                for src, nbytes in action.receives():
                    received[(src, rank, action.tag)] += 1
                    recv_bytes.setdefault((src, rank, action.tag), []).append(nbytes)
            if launched is not None:
                raise ProgramError(
                    f"non-blocking {launched.kind} {launched.id} is never waited for (add a wait)"
                )
        for pair in sorted(set(sent) | set(received)):
            a, b, tag = pair
            channel = f" on tag {tag}" if tag else ""
            if sent[pair] != received[pair]:
                raise ProgramError(
                    f"rank {a} sends {sent[pair]} message(s) to rank {b}{channel} but rank {b} receives {received[pair]}"
                )
            if sent_bytes.get(pair) != recv_bytes.get(pair):
                raise ProgramError(
                    f"message sizes from rank {a} to rank {b}{channel} differ between send and recv"
                )


def _check_sizes(action: Action) -> None:
    """A collective's per-member sizes name every member once, this rank's as its bytes."""
    group = action.group or ()
    if not action.is_collective or len(action.sizes or ()) != len(group):
        raise ProgramError(
            f"{action.id}: `sizes` needs a collective and one size per member of its group"
        )
    if action.sizes[group.index(action.rank)] != action.bytes:  # type: ignore[index]
        raise ProgramError(f"{action.id}: its own entry of `sizes` differs from its bytes")


def span_for(action: Action, start: float, end: float) -> Span:
    """The Span of `action` from `start` to `end`: what the simulator predicts and what a
    rank records (runtime.engine.span_buffer) build it alike."""
    return Span(
        rank=action.rank,
        kind=action.kind,
        label=action.label,
        start=start,
        end=end,
        **action.span_fields(),
    )
