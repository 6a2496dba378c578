"""Pipeline schedules as data: GPipe, 1F1B, interleaved 1F1B and ZB-H1 as Programs.

Lesson 5 of the course, in DESIGN.md's "one program, two engines" picture: each
function returns, for every rank, its ordered compute and point-to-point
Actions, which the simulator costs and the real engine (scenarios.pipeline_rank)
runs with autograd. The order of a rank's list *is* the schedule.

Vocabulary (../shared/REFERENCES.md, "Pipeline schedules"): p ranks, m
microbatches, v model chunks per rank, so p·v stages; stage s lives on rank
s mod p (Megatron's placement), chunk s // p of that rank.

- F: forward of one (stage, microbatch). Receives the activation from the rank of
  stage s−1 first (except on stage 0) and sends its output to stage s+1 (except
  on the last stage, which computes the loss).
- B: backward. Receives the output gradient from stage s+1 first (except on the
  last stage) and sends the input gradient to stage s−1 (except on stage 0).
  In `zb-h1` B is only the input gradient and W the weight gradient.

Sends are non-blocking (an isend, waited for at the end of the step), so two
neighbours that send to each other at once, as in 1F1B's steady state, never
deadlock. Each stage boundary and direction is its own message channel (the `tag` arg),
and on a channel both ends go through microbatches in the same order, so a
message can never be taken for another one: interleaved schedules send
activations and gradients between the same two ranks in both directions.

Costs: compute actions carry `cost_key` "F.s<stage>of<stages>", "B.s…" (or
"Bi.s…" for the split input gradient) and "W.s…" (see `cost_key`), with the
`fraction` of a full model stage they represent (1/v), so a calibrated table
can give each stage its measured time and the `unit` profile its textbook
F = 1, B = 2 per full stage.

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime.program import Action, Program

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
MAX_MICROBATCHES = 256


class ScheduleError(ValueError):
    """A (schedule, p, m, v) combination the schedule does not allow; says which rule."""


@dataclass(frozen=True)
class Shape:
    """The knobs every schedule takes."""

    stages: int  # p: pipeline ranks
    microbatches: int  # m
    chunks: int = 1  # v: model chunks per rank
    activation_bytes: int = 0  # bytes of one microbatch's activation (= its gradient)

    @property
    def virtual_stages(self) -> int:
        return self.stages * self.chunks


def check(schedule: str, shape: Shape) -> None:
    """Raise ScheduleError naming the rule a combination breaks."""
    p, m, v = shape.stages, shape.microbatches, shape.chunks
    if schedule not in SCHEDULES:
        raise ScheduleError(f"unknown schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}")
    if p < 2:
        raise ScheduleError(f"stages={p}: a pipeline needs p >= 2 stages")
    if not 1 <= m <= MAX_MICROBATCHES:
        raise ScheduleError(f"microbatches={m}: must be from 1 to {MAX_MICROBATCHES}")
    if schedule == "interleaved":
        if v < 2:
            raise ScheduleError(f"chunks={v}: interleaved needs v >= 2 chunks per rank")
        if m % p:
            raise ScheduleError(
                f"microbatches={m}: interleaved needs m to be a multiple of p={p} (Megatron's rule)"
            )
    elif v != 1:
        raise ScheduleError(f"chunks={v}: only the interleaved schedule uses v > 1 chunks per rank")


# -- the order of work on each rank ----------------------------------------------
# A "slot" is one unit of a rank's work: ("F" | "B" | "W", chunk, microbatch).
Slot = tuple[str, int, int]


def warmup_1f1b(p: int, m: int, rank: int) -> int:
    """Forwards rank r runs before its first backward in 1F1B: min(p - r - 1, m)."""
    return min(p - rank - 1, m)


def warmup_interleaved(p: int, m: int, v: int, rank: int) -> int:
    """Megatron's rule: 2(p - r - 1) + (v - 1)p, capped at m·v; all of them when m == p."""
    total = m * v
    if m == p:
        return total
    return min(2 * (p - rank - 1) + (v - 1) * p, total)


def _order_gpipe(p: int, m: int, rank: int) -> list[Slot]:
    return [("F", 0, j) for j in range(m)] + [("B", 0, j) for j in range(m)]


def _order_1f1b(p: int, m: int, rank: int) -> list[Slot]:
    warm = warmup_1f1b(p, m, rank)
    order: list[Slot] = [("F", 0, j) for j in range(warm)]
    for j in range(m - warm):
        order += [("F", 0, warm + j), ("B", 0, j)]
    order += [("B", 0, j) for j in range(m - warm, m)]
    return order


def _interleaved_unit(p: int, v: int, k: int, forward: bool) -> tuple[int, int]:
    """(chunk, microbatch) of a rank's k-th forward (or backward), as Megatron counts them."""
    in_group = k % (p * v)
    chunk = in_group // p
    if not forward:
        chunk = v - 1 - chunk
    microbatch = (k // (p * v)) * p + k % p
    return chunk, microbatch


def _order_interleaved(p: int, m: int, v: int, rank: int) -> list[Slot]:
    total = m * v
    warm = warmup_interleaved(p, m, v, rank)
    order: list[Slot] = [("F", *_interleaved_unit(p, v, k, True)) for k in range(warm)]
    for k in range(total - warm):
        order.append(("F", *_interleaved_unit(p, v, warm + k, True)))
        order.append(("B", *_interleaved_unit(p, v, k, False)))
    order += [("B", *_interleaved_unit(p, v, k, False)) for k in range(total - warm, total)]
    return order


def _order_zb_h1(p: int, m: int, rank: int) -> list[Slot]:
    """1F1B with the backward split; rank r runs each W `rank` microbatches late.

    The later a stage, the sooner its input gradients are needed upstream, so it
    runs B (input gradient) at once and postpones W (weight gradient) into what
    would have been its cool-down bubble. With F = B = W the makespan falls from
    (m + p - 1)(F + B + W) to m(F + B + W) + (p - 1)(F + B - W), and no rank holds
    more than p microbatches, 1F1B's peak (Qi et al. 2023, ZB-H1).
    """
    lag = rank
    order: list[Slot] = []
    next_w = 0
    for kind, chunk, j in _order_1f1b(p, m, rank):
        order.append((kind, chunk, j))
        if kind == "B" and j - lag >= 0:
            order.append(("W", 0, j - lag))
            next_w = j - lag + 1
    order += [("W", 0, j) for j in range(next_w, m)]
    return order


ORDERS: dict[str, Callable[[Shape, int], list[Slot]]] = {
    "gpipe": lambda s, r: _order_gpipe(s.stages, s.microbatches, r),
    "1f1b": lambda s, r: _order_1f1b(s.stages, s.microbatches, r),
    "interleaved": lambda s, r: _order_interleaved(s.stages, s.microbatches, s.chunks, r),
    "zb-h1": lambda s, r: _order_zb_h1(s.stages, s.microbatches, r),
}


def phase_of(schedule: str, shape: Shape, rank: int, index: int, order: list[Slot]) -> str:
    """The lesson phase a rank's index-th slot belongs to (the narrative follows it)."""
    if schedule == "gpipe":
        return "forward" if order[index][0] == "F" else "backward"
    if schedule == "interleaved":
        return "interleaved"
    if schedule == "zb-h1":
        return "zero-bubble"
    first_b = next(i for i, slot in enumerate(order) if slot[0] != "F")
    last_f = max(i for i, slot in enumerate(order) if slot[0] == "F")
    if index < first_b:
        return "warmup"
    if index > last_f:
        return "cooldown"
    return "steady"


# -- from slots to Actions -------------------------------------------------------------
def cost_key(kind: str, stage: int, shape: Shape | int) -> str:
    """The compute-table key of a stage's F/B/Bi/W: "F.s3of8" is the forward of
    stage 3 when the model is cut into 8 (a stage of 8 is not one of 4)."""
    stages = shape if isinstance(shape, int) else shape.virtual_stages
    return f"{kind}.s{stage}of{stages}"


def _tag(boundary: int, backward: bool) -> int:
    """The message channel of a stage boundary (s -> s+1) and direction."""
    return 2 * boundary + (1 if backward else 0)


def build(schedule: str, shape: Shape, *, prefix: str = "") -> Program:
    """The Program of `schedule` for `shape`, validated (every slot once, messages pair)."""
    check(schedule, shape)
    p, v = shape.stages, shape.chunks
    last = shape.virtual_stages - 1
    split = schedule == "zb-h1"
    fraction = 1.0 / v
    program = Program(p, name=f"{prefix}{schedule}")
    nbytes = shape.activation_bytes
    for rank in range(p):
        order = ORDERS[schedule](shape, rank)
        for index, (kind, chunk, mb) in enumerate(order):
            stage = chunk * p + rank
            phase = phase_of(schedule, shape, rank, index, order)
            common = dict(rank=rank, stage=stage, microbatch=mb, chunk=chunk, phase=phase)
            if kind == "F":
                if stage > 0:
                    program.add(
                        Action(
                            id=f"{prefix}recv.act.s{stage}.mb{mb}",
                            kind="recv",
                            label=f"recv act {mb}",
                            src=(stage - 1) % p,
                            bytes=nbytes,
                            args=(("tag", _tag(stage - 1, False)), ("buffer", "activation")),
                            **common,
                        )
                    )
                program.add(
                    Action(
                        id=f"{prefix}F.s{stage}.mb{mb}",
                        kind="F",
                        label=f"F{mb}",
                        cost_key=cost_key("F", stage, shape),
                        args=(("fraction", fraction), ("split", split)),
                        **common,
                    )
                )
                if stage < last:
                    program.add(
                        Action(
                            id=f"{prefix}send.act.s{stage}.mb{mb}",
                            kind="send",
                            label=f"send act {mb}",
                            dst=(stage + 1) % p,
                            bytes=nbytes,
                            args=(
                                ("tag", _tag(stage, False)),
                                ("buffer", "activation"),
                                ("nonblocking", True),
                            ),
                            **common,
                        )
                    )
            elif kind == "B":
                if stage < last:
                    program.add(
                        Action(
                            id=f"{prefix}recv.grad.s{stage}.mb{mb}",
                            kind="recv",
                            label=f"recv grad {mb}",
                            src=(stage + 1) % p,
                            bytes=nbytes,
                            args=(("tag", _tag(stage, True)), ("buffer", "gradient")),
                            **common,
                        )
                    )
                program.add(
                    Action(
                        id=f"{prefix}B.s{stage}.mb{mb}",
                        kind="B",
                        label=f"B{mb}",
                        cost_key=cost_key("Bi" if split else "B", stage, shape),
                        args=(("fraction", fraction), ("split", split)),
                        **common,
                    )
                )
                if stage > 0:
                    program.add(
                        Action(
                            id=f"{prefix}send.grad.s{stage}.mb{mb}",
                            kind="send",
                            label=f"send grad {mb}",
                            dst=(stage - 1) % p,
                            bytes=nbytes,
                            args=(
                                ("tag", _tag(stage - 1, True)),
                                ("buffer", "gradient"),
                                ("nonblocking", True),
                            ),
                            **common,
                        )
                    )
            else:
                program.add(
                    Action(
                        id=f"{prefix}W.s{stage}.mb{mb}",
                        kind="W",
                        label=f"W{mb}",
                        cost_key=cost_key("W", stage, shape),
                        args=(("fraction", fraction), ("split", split)),
                        **common,
                    )
                )
    program.validate()
    _check_complete(schedule, shape, program)
    return program


def _check_complete(schedule: str, shape: Shape, program: Program) -> None:
    """Every (stage, microbatch) has exactly one F and one B (and one W when split),
    on the rank that owns the stage, with F before B before W."""
    kinds = ("F", "B", "W") if schedule == "zb-h1" else ("F", "B")
    seen: dict[tuple[str, int, int], int] = {}
    for rank, actions in enumerate(program.ranks):
        for index, action in enumerate(actions):
            if action.kind in kinds:
                key = (action.kind, action.stage or 0, action.microbatch or 0)
                if key in seen:
                    raise ScheduleError(f"{schedule}: {key} appears twice")
                if (action.stage or 0) % shape.stages != rank:
                    raise ScheduleError(f"{schedule}: stage {action.stage} placed on rank {rank}")
                seen[key] = index
    for stage in range(shape.virtual_stages):
        for mb in range(shape.microbatches):
            positions = []
            for kind in kinds:
                if (kind, stage, mb) not in seen:
                    raise ScheduleError(
                        f"{schedule}: {kind} of stage {stage}, microbatch {mb} is missing"
                    )
                positions.append(seen[(kind, stage, mb)])
            if positions != sorted(positions):
                raise ScheduleError(
                    f"{schedule}: stage {stage}, microbatch {mb} runs {'/'.join(kinds)} out of order"
                )


def build_many(runs: list[tuple[str, Shape]]) -> Program:
    """Several schedules one after the other on the same ranks (ids prefixed
    "<schedule>/"), each starting after a barrier so their times do not mix."""
    world = runs[0][1].stages
    program = Program(world, name="+".join(name for name, _ in runs))
    everyone = tuple(range(world))
    for schedule, shape in runs:
        part = build(schedule, shape, prefix=f"{schedule}/")
        for rank in range(world):
            program.add(
                Action(
                    id=f"{schedule}/barrier@r{rank}",
                    rank=rank,
                    kind="barrier",
                    label="barrier",
                    group=everyone,
                    phase="start",
                )
            )
            program.extend(part.ranks[rank])
    program.validate()
    return program


def inflight_profile(actions: list[Action]) -> list[int]:
    """Microbatch-stages whose activations a rank holds after each of its actions:
    +1 at F, -1 when the last backward action of that (stage, microbatch) ends
    (B, or W when the backward is split)."""
    has_w = any(a.kind == "W" for a in actions)
    release = "W" if has_w else "B"
    held = 0
    out = []
    for action in actions:
        if action.kind == "F":
            held += 1
        elif action.kind == release:
            held -= 1
        out.append(held)
    return out


def peak_inflight(program: Program) -> list[int]:
    return [max(inflight_profile(actions), default=0) for actions in program.ranks]
