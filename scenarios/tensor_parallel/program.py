"""Lesson 4's Program: one training step of the tensor-parallel MiniGPT, each rank's
computes and collectives in the order autograd runs them.

docs/design.md's "one program, two engines": the hand-written Megatron TP step is a
chain where every collective depends on the one before it (the residual stream
passes through each), so its order is fixed and written here as data:

- forward: the vocab-parallel embedding (its g), then per layer the attention
  (f at attn-in, g at attn-out) and the MLP (f at mlp-in, g at mlp-out); then the
  head (f at head-in) and the three all-reduces of the vocab-parallel loss;
- backward: the loss needs none; the head's f, then per layer from the last the
  MLP's f and the attention's f (g needs none backward);
- sequence parallel (`sp`): every g becomes a reduce-scatter (its backward an
  all-gather) and every f an all-gather (its backward a reduce-scatter); the
  LayerNorms run on sequence shards between them, and their weights' gradients
  (with the row-parallel biases and the positions) are all-reduced at the end;
- the `missing-f` mistake drops f's backward all-reduce, so two backward
  computes meet with nothing between them (merged into one Action).

Between two collectives there is always one compute Action: the real engine
times it from the end of one collective to the start of the next (the Tracer
of scenarios.tensor_parallel.layers, read by scenarios.tensor_parallel.rank),
the simulator costs it from its segment costs (scenarios.tensor_parallel.costs).
Torch's own implementation (`parallelize_module`) runs as one forward and one
backward Action: its collectives happen inside DTensor and are counted by
CommDebugMode.

Every Action carries its implementation as `series` ("hand", "torch"), its
block as `chunk` (None outside the blocks), and in `args` the place and direction
the rank code checks each collective against.

Pure: stdlib only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime.sim.program import Action, Program, barriers

FORWARD, BACKWARD = "forward", "backward"
AR, AG, RS = "all_reduce", "all_gather", "reduce_scatter"
SHORT = {AR: "AR", AG: "AG", RS: "RS"}
LOSS_PLACES = ("loss-max", "loss-target", "loss-sumexp")
MISTAKES = ("none", "fused-qkv-split", "untied-embedding", "missing-f")


@dataclass(frozen=True)
class Item:
    """One step of the hand-written plan: a compute segment ("F"/"B") or a collective."""

    kind: str
    place: str  # compute: what it computes (attn, mlp, ln1…); collective: where it sits
    layer: int | None
    direction: str
    parts: tuple[str, ...] = ()  # compute: the segments it stands for (merged ones)

    @property
    def is_compute(self) -> bool:
        return self.kind in ("F", "B")

    @property
    def cost_key(self) -> str:
        """Segments merged by a dropped collective cost their sum: "B.mlp+B.attn"."""
        return "+".join(f"{self.kind}.{part}" for part in self.parts)


def hand_plan(layers: int, sp: bool, mistake: str = "none") -> list[Item]:
    """The hand-written step in the order one rank runs it (every rank alike)."""
    items: list[Item] = []
    direction = FORWARD

    def compute(kind: str, part: str, layer: int | None = None) -> None:
        last = items[-1] if items else None
        if last is not None and last.is_compute and last.direction == direction:
            # Nothing between them any more (a dropped collective): one segment.
            items[-1] = Item(kind, last.place, last.layer, direction, (*last.parts, part))
        else:
            items.append(Item(kind, part, layer, direction, (part,)))

    def collective(kind: str, place: str, layer: int | None = None) -> None:
        items.append(Item(kind, place, layer, direction))

    g = RS if sp else AR  # a row-parallel output: summed (or summed and scattered)
    f_back = RS if sp else AR  # a column-parallel input's gradient, backward
    compute("F", "embed")
    collective(g, "embed")
    for layer in range(layers):
        if sp:
            compute("F", "ln1", layer)
            collective(AG, "attn-in", layer)
        compute("F", "attn", layer)
        collective(g, "attn-out", layer)
        if sp:
            compute("F", "ln2", layer)
            collective(AG, "mlp-in", layer)
        compute("F", "mlp", layer)
        collective(g, "mlp-out", layer)
    if sp:
        compute("F", "ln_f")
        collective(AG, "head-in")
    compute("F", "logits")
    for place, part in zip(LOSS_PLACES, ("loss-target", "loss-sumexp", "loss"), strict=True):
        collective(AR, place)
        compute("F", part)
    direction = BACKWARD
    compute("B", "head")
    collective(f_back, "head-in")
    if sp:
        compute("B", "ln_f")
    keep_f = mistake != "missing-f"
    for layer in reversed(range(layers)):
        if sp:
            collective(AG, "mlp-out", layer)
        compute("B", "mlp", layer)
        if keep_f:
            collective(f_back, "mlp-in", layer)
        if sp:
            compute("B", "ln2", layer)
            collective(AG, "attn-out", layer)
        compute("B", "attn", layer)
        if keep_f:
            collective(f_back, "attn-in", layer)
        if sp:
            compute("B", "ln1", layer)
    if sp:
        collective(AG, "embed")
    compute("B", "embed")
    if sp:
        collective(AR, "grads")
    return items


def phase(item: Item, sp: bool, mistake: str) -> str:
    """The narrative step an Action belongs to (scenarios/tensor_parallel/texts.toml)."""
    if mistake == "fused-qkv-split" and item.is_compute and item.place == "attn":
        return mistake
    if mistake == "untied-embedding" and item.is_compute and item.place in ("embed", "head"):
        return mistake
    if mistake == "missing-f" and item.kind == "B" and item.layer is not None:
        return mistake
    if item.is_compute:
        if item.place in ("ln1", "ln2", "ln_f"):
            return "sp"
        if item.layer is None:
            return "vocab"
        if item.kind == "B":
            return "memory"
        return "heads" if item.place == "attn" else "column-row"
    if item.place == "grads" or (sp and item.place not in ("embed", *LOSS_PLACES)):
        return "sp"
    if item.place in ("embed", *LOSS_PLACES):
        return "vocab"
    return "g" if item.place.endswith("-out") else "f"


def label(item: Item) -> str:
    where = f" l{item.layer}" if item.layer is not None else ""
    if item.is_compute:
        return f"{item.kind} {'+'.join(item.parts)}{where}"
    back = " (bwd)" if item.direction == BACKWARD else ""
    return f"{SHORT[item.kind]}{where} {item.place}{back}"


@dataclass(frozen=True)
class Sizes:
    """Bytes of the collectives, fp32 as the run moves them."""

    activation: int  # b·s·h·4: every f, g, embed and head-in collective
    loss: int  # b·s·4: each of the loss's all-reduces
    grads: int  # the sequence-parallel replicated parameters' gradients, all-reduced once


def item_bytes(item: Item, sizes: Sizes) -> int:
    if item.place in LOSS_PLACES:
        return sizes.loss
    return sizes.grads if item.place == "grads" else sizes.activation


def hand_fields(
    plan: Sequence[Item], group: tuple[int, ...], sizes: Sizes, *, sp: bool, mistake: str
) -> list[dict[str, Any]]:
    """What every rank's Action of each plan item shares (all but its id and rank): worked
    out once, since every rank of the group runs the same plan."""
    out: list[dict[str, Any]] = []
    for item in plan:
        common: dict[str, Any] = dict(
            kind=item.kind,
            label=label(item),
            series="hand",
            chunk=item.layer,
            phase=phase(item, sp, mistake),
            args=(("place", item.place), ("layer", item.layer), ("direction", item.direction)),
        )
        if item.is_compute:
            common["cost_key"] = item.cost_key
        else:
            common.update(bytes=item_bytes(item, sizes), group=group)
            common["algorithm"] = "builtin"  # torch.distributed's own collectives (gloo, NCCL)
        out.append(common)
    return out


def hand_actions(fields: Sequence[dict[str, Any]], rank: int) -> list[Action]:
    """One rank's Actions of the hand series (after its barrier)."""
    return [Action(id=f"hand/{n}@r{rank}", rank=rank, **f) for n, f in enumerate(fields)]


def torch_actions(rank: int) -> list[Action]:
    """torch's `parallelize_module` step: its collectives live inside DTensor."""
    return [
        Action(
            f"torch/{kind}@r{rank}",
            rank,
            kind,
            f"{kind} (parallelize_module)",
            cost_key=f"{kind}.torch",
            series="torch",
            phase="torch",
            args=(("direction", FORWARD if kind == "F" else BACKWARD),),
        )
        for kind in ("F", "B")
    ]


def build_program(
    tp: int, series: Sequence[str], plan: Sequence[Item], sizes: Sizes, *, sp: bool, mistake: str
) -> Program:
    group = tuple(range(tp))  # one shared tuple: the simulator keys collectives by it
    program = Program(tp, name="tensor-parallel")
    fields = hand_fields(plan, group, sizes, sp=sp, mistake=mistake)
    for name in series:
        program.extend(barriers(f"{name}/start", group, series=name, phase="start"))
        for rank in range(tp):
            if name == "hand":
                program.extend(hand_actions(fields, rank))
            else:
                program.extend(torch_actions(rank))
    return program


def plan_counts(plan: Sequence[Item], layers: int) -> dict[str, float]:
    """Collectives of the plan by "scope.direction.kind": scope `layer` is per layer
    (the blocks' total over `layers`), `loss` the loss's, `total` the whole step's."""
    totals: dict[str, int] = {}
    for item in plan:
        if item.is_compute:
            continue
        scopes = ["total"]
        if item.layer is not None:
            scopes.append("layer")
        elif item.place in LOSS_PLACES:
            scopes.append("loss")
        for scope in scopes:
            key = f"{scope}.{item.direction}.{item.kind}"
            totals[key] = totals.get(key, 0) + 1
    return {k: v / layers if k.startswith("layer.") else v for k, v in totals.items()}
