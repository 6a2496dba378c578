"""A planned serving run as a Program: each rank's Actions, iteration by iteration.

Part of lesson 7's mechanism, pure (docs/design.md: one program, two engines). The
scheduler's plan (scenarios.inference.plan) fixes which sequences run in each
iteration; this module writes what each rank does for it, so that the real
ranks (scenarios.inference.rank) and the simulator run the same steps:

- a `wait` action before an iteration with newcomers: the rank idles until the
  latest of them has arrived (its `until` effect: seconds after the series' start
  barrier on this rank), since a server cannot answer a request before it
  comes;
- tp: per layer, attention's compute, an all-reduce of the T·h partial sums
  (row-parallel output projection), the MLP's compute, another all-reduce;
  then the head's compute over each sequence's last position and an
  all-gather of the vocab-parallel logits: 2·layers all-reduces and one
  all-gather per iteration (Megatron-LM's TP, decoding), both the project's
  hand-made rings (runtime.engine.comm), timed and refined like every ring;
- pp: a stage receives the activations, computes its layers, sends them on;
  the last stage samples and sends the tokens that feed back to the first
  stage (one channel per virtual engine). The ranks post the sends with isend,
  so no cycle of waits can form, but a send is costed as a blocking one: on
  gloo, posting a message costs the sender about a latency;
- replicas: each rank runs its own engine's iterations, no communication.

Compute actions cost `prefill` or `decode` seconds scaled by `work`, the part's
seconds on the planning clock: a run refines the two scales from what it
measured (runtime.fit.refine.refine), i.e. it calibrates the step model.

`build(params)`: every mode's series, planned on the planning clock (`layout`
also says where each series' facts sit in the Program, for the metrics and the
ranks).

Pure: stdlib and the lesson's params and pure modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from runtime.sim.effects import Effects, Until
from runtime.sim.program import Action, Program, barriers
from scenarios.inference.iteration import Iteration
from scenarios.inference.params import InferenceParams
from scenarios.inference.plan import Clock, Plan, plan
from scenarios.inference.stepmodel import TOKEN_BYTES, Shape, part_seconds, planning_device
from scenarios.inference.trace import make_trace

FP32 = 4


@dataclass
class SeriesIndex:
    """Where a series' facts sit in the Program: for each iteration, the action whose end
    is the moment its tokens exist and the rank whose clock its arrivals count on."""

    series: str
    plan: Plan
    marker: list[str] = field(default_factory=list)  # per iteration: token time action id
    anchor: dict[int, str] = field(default_factory=dict)  # rank -> its start barrier id
    arrival_rank: list[int] = field(default_factory=list)  # per iteration
    token_rank: list[int] = field(default_factory=list)  # per iteration: where it samples
    collectives: list[int] = field(default_factory=list)  # per iteration, on its marker rank


def requests_label(it: Iteration) -> str:
    ids = [p.request for p in it.pieces if not p.padding]
    shown = ",".join(str(i) for i in ids[:4]) + ("…" if len(ids) > 4 else "")
    # "req 3", never "r3": the timeline names rank 3 that way.
    return f"{'prefill' if it.prefill else 'decode'} req {shown}"


class _Writer:
    def __init__(self, program: Program, series: str, clock: Clock, index: SeriesIndex) -> None:
        self.program = program
        self.series = series
        self.clock = clock
        self.index = index
        self.start_at = {r: len(program.ranks[r]) for r in range(program.world_size)}

    def add(self, rank: int, k: int, name: str, kind: str, it: Iteration, **kw: object) -> str:
        action_id = f"{self.series}:i{k}:{name}@r{rank}"
        self.program.add(
            Action(
                id=action_id,
                rank=rank,
                kind=kind,
                series=self.series,
                step=k,
                phase="prefill" if it.prefill else "decode",
                **kw,  # type: ignore[arg-type]
            )
        )
        return action_id

    def wait(self, rank: int, k: int, it: Iteration) -> None:
        if it.wait_until is None:
            return
        back = len(self.program.ranks[rank]) - self.start_at[rank]
        self.program.add(
            Action(
                id=f"{self.series}:i{k}:wait@r{rank}",
                rank=rank,
                kind="wait",
                label="wait for " + requests_label(it).split(" ", 1)[1],
                series=self.series,
                step=k,
                phase="wait",
                args=(("iteration", k),),
                effects=Effects(until=Until(back, it.wait_until)),
            )
        )

    def compute(
        self, rank: int, k: int, it: Iteration, part: str, layer: int, seconds: float
    ) -> str:
        key = "prefill" if it.prefill else "decode"
        name = f"L{layer}.{part}" if layer >= 0 else part
        return self.add(
            rank,
            k,
            name,
            key,
            it,
            label=f"{requests_label(it)} {name}",
            cost_key=key,
            work=seconds,
            args=(("iteration", k), ("part", part), ("layer", layer)),
        )


def write_series(
    program: Program, series: str, clock: Clock, plan: Plan, ranks: tuple[int, ...]
) -> SeriesIndex:
    """Append one series (a mode's planned run) to `program` on `ranks`."""
    index = SeriesIndex(series, plan)
    writer = _Writer(program, series, clock, index)  # `until` counts from the barrier
    for action in barriers(f"{series}:start", ranks, series=series, phase="start"):
        program.add(action)
        index.anchor[action.rank] = action.id
    serving = plan.serving
    if serving.pp > 1:
        _pipeline(writer, ranks)
    elif serving.replicas > 1:
        for k, it in enumerate(plan.iterations):
            _whole(writer, ranks[it.engine], k, it)
    else:
        for k, it in enumerate(plan.iterations):
            _tensor_parallel(writer, ranks, k, it)
    return index


def _whole(w: _Writer, rank: int, k: int, it: Iteration) -> None:
    """A replica's iteration: the whole model on one rank."""
    w.wait(rank, k, it)
    seconds = w.clock.stage(0, it.work)
    marker = w.compute(rank, k, it, "model", -1, seconds)
    w.index.marker.append(marker)
    w.index.arrival_rank.append(rank)
    w.index.token_rank.append(rank)
    w.index.collectives.append(0)


def _tensor_parallel(w: _Writer, ranks: tuple[int, ...], k: int, it: Iteration) -> None:
    shape, device, tp = w.clock.shape, w.clock.device, len(ranks)
    work = it.work
    # What every rank and layer of this iteration shares, computed once: each part's
    # seconds, the labels, the collectives' bytes (Actions as _Writer.add writes them).
    key = "prefill" if it.prefill else "decode"
    said = requests_label(it)
    seconds = {part: part_seconds(shape, device, part, work, tp) for part in ("attn", "mlp")}
    first_attn = seconds["attn"] + part_seconds(shape, device, "embed", work, tp)
    head_seconds = part_seconds(shape, device, "head", work, tp)
    reduced = work.tokens * shape.hidden * FP32
    gathered = work.outs * shape.vocab * FP32
    series, add = w.series, w.program.add
    marker = ""
    for rank in ranks:
        w.wait(rank, k, it)
        for layer in range(shape.layers):
            for part in ("attn", "mlp"):
                name = f"L{layer}.{part}"
                part_args = (("iteration", k), ("part", part), ("layer", layer))
                add(
                    Action(
                        id=f"{series}:i{k}:{name}@r{rank}",
                        rank=rank,
                        kind=key,
                        series=series,
                        step=k,
                        phase=key,
                        label=f"{said} {name}",
                        cost_key=key,
                        work=first_attn if part == "attn" and layer == 0 else seconds[part],
                        args=part_args,
                    )
                )
                if tp > 1:
                    add(
                        Action(
                            id=f"{series}:i{k}:{name}.ar@r{rank}",
                            rank=rank,
                            kind="all_reduce",
                            series=series,
                            step=k,
                            phase=key,
                            label=f"all-reduce {name}",
                            group=ranks,
                            bytes=reduced,
                            algorithm="ring",
                            args=part_args,
                        )
                    )
        head = w.compute(rank, k, it, "head", -1, head_seconds)
        if tp > 1:
            head = w.add(
                rank,
                k,
                "head.ag",
                "all_gather",
                it,
                label="all-gather logits",
                group=ranks,
                bytes=gathered,
                algorithm="ring",
                args=(("iteration", k), ("part", "head"), ("layer", -1)),
            )
        if rank == ranks[0]:
            marker = head
    w.index.marker.append(marker)
    w.index.arrival_rank.append(ranks[0])
    w.index.token_rank.append(ranks[0])  # every TP rank samples alike; the first reports
    w.index.collectives.append(2 * shape.layers + 1 if tp > 1 else 0)


def _pipeline(w: _Writer, ranks: tuple[int, ...]) -> None:
    clock, plan = w.clock, w.index.plan
    first, last = ranks[0], ranks[-1]
    feeding: dict[int, int] = {}  # engine -> tokens its last iteration sends back
    for k, it in enumerate(plan.iterations):
        work = it.work
        activation = work.tokens * clock.shape.hidden * FP32
        back = feeding.pop(it.engine, 0)
        if back:
            w.add(
                first,
                k,
                "tokens.recv",
                "recv",
                it,
                label="tokens back",
                src=last,
                bytes=back * TOKEN_BYTES,
                args=(("iteration", k), ("tag", 1 + it.engine)),
            )
        for s, rank in enumerate(ranks):
            if s == 0:
                w.wait(rank, k, it)
            else:
                w.add(
                    rank,
                    k,
                    "act.recv",
                    "recv",
                    it,
                    label="activations",
                    src=ranks[s - 1],
                    bytes=activation,
                    args=(("iteration", k), ("tag", 0)),
                )
            marker = w.compute(rank, k, it, "stage", -1, clock.stage(s, work))
            if s < len(ranks) - 1:
                w.add(
                    rank,
                    k,
                    "act.send",
                    "send",
                    it,
                    label="activations",
                    dst=ranks[s + 1],
                    bytes=activation,
                    args=(("iteration", k), ("tag", 0)),
                )
        if any(p.feeds_back for p in it.pieces):  # every piece's token: work.outs of them
            fed = len(it.pieces)
            feeding[it.engine] = fed
            w.add(
                last,
                k,
                "tokens.send",
                "send",
                it,
                label="tokens back",
                dst=first,
                bytes=fed * TOKEN_BYTES,
                args=(("iteration", k), ("tag", 1 + it.engine)),
            )
        w.index.marker.append(marker)
        w.index.arrival_rank.append(first)
        w.index.token_rank.append(last)
        w.index.collectives.append(0)


def kv_bytes_per_block(shape: Shape, serving_tp: int, layers: int, block: int) -> int:
    """One rank's bytes for one KV block: its layers, its KV heads."""
    return (
        2
        * layers
        * shape.kv_heads_per_rank(serving_tp)
        * shape.head_dim
        * block
        * shape.dtype_bytes
    )


@lru_cache(maxsize=8)
def planning_plans(params: InferenceParams) -> list[Plan]:
    """Each mode's plan on the planning clock: what a real run executes."""
    requests = make_trace(params.trace_spec)
    return [plan(params.shape, planning_device(), params.serving(m), requests) for m in params.mode]


@lru_cache(maxsize=8)
def layout(params: InferenceParams) -> tuple[Program, tuple[SeriesIndex, ...]]:
    """The Program and where each series' facts sit in it (cached: metrics read it)."""
    program = Program(world_size=params.world_size, name="inference")
    indexes = []
    for mode, planned in zip(params.mode, planning_plans(params), strict=True):
        clock = Clock(params.shape, planning_device(), planned.serving)
        ranks = tuple(range(planned.serving.gpus))
        indexes.append(write_series(program, mode, clock, planned, ranks))
    return program, tuple(indexes)


def build(params: InferenceParams) -> Program:
    return layout(params)[0]
