"""Pipeline schedules as data: GPipe, 1F1B, interleaved 1F1B and ZB-H1 as Programs.

Lesson 5 of the course, in docs/design.md's "one program, two engines" picture: each
schedule's order of work (scenarios.pipeline.orders) becomes, for every rank,
its ordered compute and point-to-point Actions, which the simulator costs and
the real engine (scenarios.pipeline.rank) runs with autograd. The order of a
rank's list *is* the schedule; every Action carries its schedule as `series`.

Vocabulary (docs/references.md, "Pipeline schedules"): p ranks, m
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

Imports: runtime's pure part and scenarios.params (a ScheduleError is a
ParamError naming the knob at fault).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.sim.effects import NO_EFFECTS, NONBLOCKING
from runtime.sim.program import Action, Program, barriers
from scenarios.params import ParamError
from scenarios.pipeline.orders import ORDERS, Slot, phases_of

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
MAX_MICROBATCHES = 256


class ScheduleError(ParamError):
    """A (schedule, p, m, v) combination the schedule does not allow: says which rule,
    and `field` names the knob (schedule, stages, microbatches, chunks)."""


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
        raise ScheduleError(
            "schedule",
            f"unknown schedule {schedule!r}; allowed: {', '.join(SCHEDULES)}",
            es=f"planificación desconocida {schedule!r}; se admiten: {', '.join(SCHEDULES)}",
        )
    if p < 2:
        raise ScheduleError(
            "stages",
            f"stages={p}: a pipeline needs p >= 2 stages",
            es=f"stages={p}: un pipeline necesita p >= 2 etapas",
        )
    if not 1 <= m <= MAX_MICROBATCHES:
        raise ScheduleError(
            "microbatches",
            f"microbatches={m}: must be from 1 to {MAX_MICROBATCHES}",
            es=f"microbatches={m}: debe estar entre 1 y {MAX_MICROBATCHES}",
        )
    if schedule == "interleaved":
        if v < 2:
            raise ScheduleError(
                "chunks",
                f"chunks={v}: interleaved needs v >= 2 chunks per rank",
                es=f"chunks={v}: interleaved necesita v >= 2 trozos por rango",
            )
        if m % p:
            raise ScheduleError(
                "microbatches",
                f"microbatches={m}: interleaved needs m to be a multiple of p={p} (Megatron's rule)",
                es=f"microbatches={m}: interleaved necesita que m sea múltiplo de p={p} "
                "(la regla de Megatron)",
            )
    elif v != 1:
        raise ScheduleError(
            "chunks",
            f"chunks={v}: only the interleaved schedule uses v > 1 chunks per rank",
            es=f"chunks={v}: solo la planificación interleaved usa v > 1 trozos por rango",
        )


def cost_key(kind: str, stage: int, shape: Shape | int) -> str:
    """The compute-table key of a stage's F/B/Bi/W: "F.s3of8" is the forward of
    stage 3 when the model is cut into 8 (a stage of 8 is not one of 4)."""
    stages = shape if isinstance(shape, int) else shape.virtual_stages
    return f"{kind}.s{stage}of{stages}"


def _tag(boundary: int, backward: bool) -> int:
    """The message channel of a stage boundary (s -> s+1) and direction."""
    return 2 * boundary + (1 if backward else 0)


# -- from slots to Actions -------------------------------------------------------------
def build(schedule: str, shape: Shape, *, prefix: str = "") -> Program:
    """The Program of `schedule` for `shape`, validated (every slot once, messages pair);
    every Action's `series` is the schedule."""
    check(schedule, shape)
    program = Program(shape.stages, name=f"{prefix}{schedule}")
    for rank in range(shape.stages):
        order = ORDERS[schedule](shape, rank)
        for slot, phase in zip(order, phases_of(schedule, order), strict=True):
            program.extend(slot_actions(schedule, shape, rank, slot, phase, prefix))
    program.validate()
    check_complete(schedule, shape, program)
    return program


def slot_actions(
    schedule: str, shape: Shape, rank: int, slot: Slot, phase: str, prefix: str
) -> list[Action]:
    """One compute slot with its messages: F receives the activation from stage s−1
    and sends its output to stage s+1; B receives the output gradient from stage
    s+1 and sends the input gradient to stage s−1; W exchanges nothing."""
    kind, chunk, mb = slot
    split = schedule == "zb-h1"
    stage = chunk * shape.stages + rank
    common: dict[str, Any] = dict(
        rank=rank, stage=stage, microbatch=mb, chunk=chunk, phase=phase, series=schedule
    )
    compute = Action(
        id=f"{prefix}{kind}.s{stage}.mb{mb}",
        kind=kind,
        label=f"{kind}{mb}",
        cost_key=cost_key("Bi" if kind == "B" and split else kind, stage, shape),
        args=(("fraction", 1.0 / shape.chunks), ("split", split)),
        **common,
    )
    if kind == "W":
        return [compute]
    forward = kind == "F"
    came_from, goes_to = (stage - 1, stage + 1) if forward else (stage + 1, stage - 1)
    out = []
    if 0 <= came_from < shape.virtual_stages:
        out.append(_message("recv", came_from, forward, shape, prefix, common))
    out.append(compute)
    if 0 <= goes_to < shape.virtual_stages:
        out.append(_message("send", goes_to, forward, shape, prefix, common))
    return out


def _message(
    kind: str, peer_stage: int, forward: bool, shape: Shape, prefix: str, common: dict[str, Any]
) -> Action:
    """The send or recv of an activation (forward) or a gradient (backward) between
    this stage and `peer_stage`, on the channel of their boundary and direction."""
    stage, mb = common["stage"], common["microbatch"]
    short, buffer = ("act", "activation") if forward else ("grad", "gradient")
    args: tuple[tuple[str, Any], ...] = (
        ("tag", _tag(min(stage, peer_stage), not forward)),
        ("buffer", buffer),
    )
    peer = peer_stage % shape.stages
    return Action(
        id=f"{prefix}{kind}.{short}.s{stage}.mb{mb}",
        kind=kind,
        label=f"{kind} {short} {mb}",
        bytes=shape.activation_bytes,
        args=args,
        effects=NONBLOCKING if kind == "send" else NO_EFFECTS,
        **({"dst": peer} if kind == "send" else {"src": peer}),
        **common,
    )


def check_complete(schedule: str, shape: Shape, program: Program) -> None:
    """Every (stage, microbatch) has exactly one F and one B (and one W when split),
    on the rank that owns the stage, with F before B before W."""
    kinds = ("F", "B", "W") if schedule == "zb-h1" else ("F", "B")
    seen: dict[tuple[str, int, int], int] = {}
    for rank, actions in enumerate(program.ranks):
        for index, action in enumerate(actions):
            if action.kind in kinds:
                key = (action.kind, action.stage or 0, action.microbatch or 0)
                if key in seen:
                    raise ScheduleError("schedule", f"{schedule}: {key} appears twice")
                if (action.stage or 0) % shape.stages != rank:
                    raise ScheduleError(
                        "schedule", f"{schedule}: stage {action.stage} placed on rank {rank}"
                    )
                seen[key] = index
    for stage in range(shape.virtual_stages):
        for mb in range(shape.microbatches):
            positions = []
            for kind in kinds:
                if (kind, stage, mb) not in seen:
                    raise ScheduleError(
                        "schedule",
                        f"{schedule}: {kind} of stage {stage}, microbatch {mb} is missing",
                    )
                positions.append(seen[(kind, stage, mb)])
            if positions != sorted(positions):
                raise ScheduleError(
                    "schedule",
                    f"{schedule}: stage {stage}, microbatch {mb} runs {'/'.join(kinds)} out of order",
                )


def build_many(runs: list[tuple[str, Shape]]) -> Program:
    """Several schedules one after the other on the same ranks, each starting after a
    barrier so their times do not mix; every Action (barriers too) has its schedule
    as `series`. Ids stay unique (each schedule's are prefixed) but are opaque keys."""
    world = runs[0][1].stages
    program = Program(world, name="+".join(name for name, _ in runs))
    everyone = tuple(range(world))
    for schedule, shape in runs:
        part = build(schedule, shape, prefix=f"{schedule}/")
        start = barriers(f"{schedule}/barrier", everyone, series=schedule, phase="start")
        for rank in range(world):
            program.add(start[rank])
            program.extend(part.ranks[rank])
    program.validate()
    return program


def inflight_profile(actions: list[Action]) -> list[int]:
    """Microbatch-stages whose activations a rank holds after each of its actions:
    +1 at F, -1 when the last backward action of that (stage, microbatch) ends
    (B, or W when the backward is split)."""
    release = "W" if any(a.kind == "W" for a in actions) else "B"
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
