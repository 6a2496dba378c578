"""Lesson 1: data parallelism needs an all-reduce, and the ring does it in 2(n-1) steps.

Parameters, narrative, Program and metrics of the `ring-allreduce` scenario.
Each timed iteration starts with a barrier (so all ranks start together) and
then runs the chosen algorithm on a buffer of `size` bytes per rank:

- ring: the hand-made ring reduce-scatter + all-gather (runtime.collectives),
  one sendrecv Span per step with its bytes, peer and chunk;
- tree: binomial-tree reduce to rank 0, then binomial-tree broadcast;
- builtin: torch.distributed.all_reduce, one Span per rank.

Whatever the algorithm, every iteration ends with a reference: a barrier and
torch's own all_reduce on the same data (`builtin_busbw_gbps`), timed as Spans
of the same Program, side by side with the hand-made one; the rank code checks
that the hand result equals torch's. The rank side lives in
scenarios.ring_allreduce_rank.

Metrics follow nccl-tests' definitions: algbw = S/t, busbw = algbw·2(n-1)/n.
"""

from __future__ import annotations

import statistics
from typing import Any

from runtime import collectives, formulas
from runtime.program import Action, Program
from runtime.trace import Timeline
from scenarios.base import NarrativeStep, Param, ParamError, Scenario

DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
# Above this many ranks `predict` costs each rank's whole all-reduce as one action
# (the same formula the step-by-step ring adds up to), so 4096 ranks stay fast.
STEPWISE_MAX_RANKS = 64
# Id marker of the reference actions (torch's all_reduce timed in each iteration).
REFERENCE = "ref."


def _iteration_prefix(step: int) -> str:
    return f"it{step}."


class RingAllReduce(Scenario):
    def check(self, params: dict[str, Any], mode: str) -> None:
        itemsize = DTYPE_BYTES[params["dtype"]]
        size = params["size"]
        if size % itemsize:
            raise ParamError(
                f"size={size}: must be a whole number of {params['dtype']} elements ({itemsize} bytes each)"
            )

    def numel(self, params: dict[str, Any]) -> int:
        return params["size"] // DTYPE_BYTES[params["dtype"]]

    def stepwise(self, params: dict[str, Any]) -> bool:
        """True when the Program lists every step of a hand-made algorithm."""
        return params["algorithm"] != "builtin" and params["ranks"] <= STEPWISE_MAX_RANKS

    def build(self, params: dict[str, Any]) -> Program:
        n, algorithm = params["ranks"], params["algorithm"]
        group = list(range(n))
        members = tuple(group)  # one shared tuple: the simulator keys collectives by it
        numel, itemsize = self.numel(params), DTYPE_BYTES[params["dtype"]]
        size = numel * itemsize
        program = Program(n, name=self.name)
        for step in range(params["repeat"]):
            prefix = _iteration_prefix(step)
            for rank in group:
                program.add(
                    Action(
                        id=f"{prefix}barrier@r{rank}",
                        rank=rank,
                        kind="barrier",
                        label="barrier",
                        group=members,
                        step=step,
                        phase="start",
                    )
                )
            if not self.stepwise(params):
                # One action per rank, costed by the algorithm's formula.
                for rank in group:
                    program.add(
                        Action(
                            id=f"{prefix}allreduce@r{rank}",
                            rank=rank,
                            kind="all_reduce",
                            label="all_reduce"
                            if algorithm == "builtin"
                            else f"{algorithm} all_reduce",
                            bytes=size,
                            group=members,
                            algorithm=algorithm,
                            step=step,
                            phase="all-reduce",
                        )
                    )
                program.extend(self._reference(prefix, step, members, size))
                continue
            if algorithm == "ring":
                schedule = collectives.ring_all_reduce(
                    group, numel, itemsize, prefix=prefix, step=step
                )
            else:
                schedule = collectives.tree_all_reduce(group, size, prefix=prefix, step=step)
            for rank in group:
                program.extend(schedule[rank])
            program.extend(self._reference(prefix, step, members, size))
        return program

    def _reference(
        self, prefix: str, step: int, members: tuple[int, ...], size: int
    ) -> list[Action]:
        """torch's own all_reduce on the same data, after a barrier, in every iteration:
        measured side by side with the hand-made one, so drifts in the machine's load
        hit both alike (and the learner sees both on one timeline)."""
        out = []
        for rank in members:
            common = dict(rank=rank, group=members, step=step, phase="reference")
            out.append(
                Action(
                    id=f"{prefix}{REFERENCE}barrier@r{rank}",
                    kind="barrier",
                    label="barrier",
                    **common,
                )
            )
            out.append(
                Action(
                    id=f"{prefix}{REFERENCE}all_reduce@r{rank}",
                    kind="all_reduce",
                    label="torch all_reduce",
                    bytes=size,
                    algorithm="builtin",
                    **common,
                )
            )
        return out

    # -- metrics ---------------------------------------------------------------
    def metrics(
        self,
        params: dict[str, Any],
        predicted: Timeline,
        measured: Timeline | None = None,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        n, size = params["ranks"], params["size"]
        predicted_s = statistics.median(iteration_times(predicted))
        program = self.build(params) if self.stepwise(params) else None
        out: dict[str, Any] = {
            "predicted_s": predicted_s,
            "builtin_predicted_s": statistics.median(iteration_times(predicted, reference=True)),
            "predicted_busbw_gbps": formulas.busbw("all_reduce", n, size, predicted_s) / 1e9
            if predicted_s
            else None,
            "expected_bytes_per_rank": expected_bytes(params, program),
        }
        if measured is None:
            return out
        measured_s = statistics.median(iteration_times(measured))
        out["measured_s"] = measured_s
        out["prediction_error"] = formulas.relative_error(predicted_s, measured_s)
        out["algbw_gbps"] = formulas.algbw(size, measured_s) / 1e9
        out["busbw_gbps"] = formulas.busbw("all_reduce", n, size, measured_s) / 1e9
        if rank_results:
            builtin_s = statistics.median(iteration_times(measured, reference=True))
            out["builtin_s"] = builtin_s
            out["builtin_busbw_gbps"] = formulas.busbw("all_reduce", n, size, builtin_s) / 1e9
            out["busbw_vs_builtin"] = out["busbw_gbps"] / out["builtin_busbw_gbps"]
            sent = [r.get("bytes_sent_per_iteration") for r in rank_results]
            out["bytes_sent_per_rank"] = None if any(s is None for s in sent) else sent
            out["max_abs_diff_vs_builtin"] = max(r["max_abs_diff_vs_builtin"] for r in rank_results)
            out["equals_builtin"] = all(r["equals_builtin"] for r in rank_results)
        return out


def iteration_times(timeline: Timeline, *, reference: bool = False) -> list[float]:
    """Per iteration: from the first rank starting the algorithm to the last one
    finishing (or, with `reference`, the same for torch's all_reduce)."""
    bounds: dict[int, list[float]] = {}
    for span in timeline.spans:
        if span.kind == "barrier" or span.step is None:
            continue
        if (REFERENCE in (span.action_id or "")) != reference:
            continue
        lo_hi = bounds.setdefault(span.step, [span.start, span.end])
        lo_hi[0] = min(lo_hi[0], span.start)
        lo_hi[1] = max(lo_hi[1], span.end)
    return [hi - lo for _, (lo, hi) in sorted(bounds.items())] or [0.0]


def expected_bytes(params: dict[str, Any], program: Program | None) -> float | list[int]:
    """Ring: the formula 2S(n-1)/n. Tree: what each rank's schedule sends (it differs by rank)."""
    n, size = params["ranks"], params["size"]
    if params["algorithm"] != "tree" or program is None:
        return formulas.ring_all_reduce_bytes_per_rank(n, size)
    per_rank = [0] * n
    for action in program.actions():
        if action.step == 0:
            for _dst, nbytes in action.sends():
                per_rank[action.rank] += nbytes
    return per_rank


SCENARIO = RingAllReduce(
    name="ring-allreduce",
    lesson=1,
    title={
        "es": "Paralelismo de datos y all-reduce en anillo",
        "en": "Data parallelism and ring all-reduce",
    },
    summary={
        "es": "Cada rango suma sus gradientes con los de todos: reduce-scatter + all-gather en un anillo.",
        "en": "Every rank sums its gradients with everyone's: reduce-scatter + all-gather around a ring.",
    },
    params=(
        Param(
            "ranks",
            "int",
            4,
            {"es": "número de rangos (procesos)", "en": "number of ranks (processes)"},
            minimum=2,
            maximum=16,
            predict_maximum=4096,
        ),
        Param(
            "size",
            "bytes",
            "4MiB",
            {"es": "bytes del búfer de cada rango", "en": "bytes of each rank's buffer"},
            minimum=1,
            maximum=256 * 2**20,
            predict_maximum=2**40,
        ),
        Param(
            "algorithm",
            "choice",
            "ring",
            {"es": "algoritmo del all-reduce", "en": "all-reduce algorithm"},
            choices=("ring", "tree", "builtin"),
        ),
        Param(
            "dtype",
            "choice",
            "float32",
            {"es": "tipo de dato", "en": "data type"},
            choices=tuple(DTYPE_BYTES),
        ),
        Param(
            "repeat",
            "int",
            3,
            {
                "es": "iteraciones medidas (se informa la mediana)",
                "en": "timed iterations (the median is reported)",
            },
            minimum=1,
            maximum=50,
        ),
    ),
    narrative=(
        NarrativeStep(
            "ddp-needs",
            {"es": "Qué necesita DDP", "en": "What DDP needs"},
            {
                "es": "En paralelismo de datos cada rango calcula gradientes con su parte del lote. Antes del "
                "paso del optimizador todos necesitan la suma de los gradientes de todos: un all-reduce. "
                "Una barrera alinea a los rangos al empezar cada iteración.",
                "en": "In data parallelism each rank computes gradients on its share of the batch. Before the "
                "optimizer step every rank needs the sum of everyone's gradients: an all-reduce. A barrier "
                "lines the ranks up at the start of each iteration.",
            },
            formula="grad = Σ_r grad_r   (all-reduce, op = SUM)",
            phases=("start",),
        ),
        NarrativeStep(
            "reduce-scatter",
            {"es": "Fase 1: reduce-scatter", "en": "Phase 1: reduce-scatter"},
            {
                "es": "El búfer se parte en n trozos. En cada uno de los n−1 pasos, cada rango envía un trozo "
                "a su vecino de la derecha y suma el que recibe de la izquierda. Al final, el rango i tiene "
                "el trozo i completamente sumado.",
                "en": "The buffer is cut into n chunks. In each of the n−1 steps every rank sends one chunk "
                "to its right neighbour and adds the one it receives from the left. At the end rank i holds "
                "chunk i fully summed.",
            },
            formula="T_RS = (n−1)·α + S·(n−1)/n·(β+γ)",
            metric="measured_s",
            phases=("reduce-scatter", "reduce"),
        ),
        NarrativeStep(
            "all-gather",
            {"es": "Fase 2: all-gather", "en": "Phase 2: all-gather"},
            {
                "es": "Otros n−1 pasos: cada rango reenvía el último trozo completo que tiene, sin sumar, hasta "
                "que todos tienen todos los trozos. Cada rango envía en total 2·S·(n−1)/n bytes, casi "
                "independiente de n: por eso el anillo escala.",
                "en": "Another n−1 steps: each rank forwards the latest complete chunk it holds, without "
                "adding, until everyone has every chunk. Each rank sends 2·S·(n−1)/n bytes in all, nearly "
                "independent of n: that is why the ring scales.",
            },
            formula="T_AG = (n−1)·α + S·(n−1)/n·β ;  bytes/rank = 2·S·(n−1)/n",
            metric="bytes_sent_per_rank",
            phases=("all-gather", "broadcast"),
        ),
        NarrativeStep(
            "cost",
            {"es": "El coste y el ancho de banda de bus", "en": "The cost and the bus bandwidth"},
            {
                "es": "Sumando las dos fases: 2(n−1) latencias α, 2S(n−1)/n bytes por el enlace y S(n−1)/n "
                "bytes reducidos. nccl-tests define busbw = (S/t)·2(n−1)/n, comparable con el ancho de banda "
                "del enlace para cualquier n. Compárelo con el all_reduce de torch medido en la misma ejecución.",
                "en": "Adding both phases: 2(n−1) latencies α, 2S(n−1)/n bytes over the link and S(n−1)/n "
                "bytes reduced. nccl-tests defines busbw = (S/t)·2(n−1)/n, comparable with the link's "
                "bandwidth for any n. Compare it with torch's all_reduce measured in the same run.",
            },
            formula="T = 2(n−1)·α + 2S(n−1)/n·β + S(n−1)/n·γ ;  busbw = S/t · 2(n−1)/n",
            metric="busbw_vs_builtin",
            phases=("all-reduce", "reference"),
        ),
    ),
    rank_entry="scenarios.ring_allreduce_rank:run_rank",
)
