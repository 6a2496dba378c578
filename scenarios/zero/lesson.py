"""Lesson 2: ZeRO and FSDP — where the memory of training goes, and what each stage removes.

Parameters, narrative, Program and metrics of the `zero` scenario. MiniGPT
(runtime.models) is trained for `steps` Adam steps by each stage of the
`stage` list, one after the other on the same ranks, each from the same
initial weights and on the same global batches (`microbatch` sequences per
rank per step):

- ddp: every rank holds everything; gradients all-reduced per unit (DDP's buckets);
- zero1 (P_os): Adam's states sharded; gradients reduce-scattered after backward,
  params all-gathered after the step;
- zero2 (P_os+g): gradients sharded too, reduce-scattered unit by unit as backward
  produces them;
- zero3 (P_os+g+p): params sharded too, all-gathered per unit before its forward
  and again before its backward, freed after each use;
- fsdp2: torch's `fully_shard` on the same units (it runs on gloo on CPU in torch
  2.13), its memory measured the same way.

The rank side (scenarios.zero_rank, with runtime.zero_exec) measures, from the
live tensors, the bytes of params, grads, optimizer states, activations and
communication buffers on each rank after every Action, and counts the bytes each
rank puts on the wire. The prediction is the ZeRO paper's arithmetic
(runtime.formulas), exactly for any Ψ, N_d and K; for the real run it is also
worked out per rank with the shards' rounding, so measured and predicted bars
stand side by side. `predict` goes far beyond this machine: `-p params=70B
-p dp=1024 -p precision=mixed -p gpu_memory=80GB`.

Imports: runtime's pure part only (the UI imports this module; it never loads torch).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from runtime import formulas
from runtime.costmodel import CostModel
from runtime.program import Action, Program
from runtime.trace import Span, Timeline
from runtime.units import parse_count
from scenarios.base import (
    Mode,
    NarrativeStep,
    Param,
    ParamError,
    Scenario,
    check_run_size,
    gpt_parameters,
    int_param,
)

STAGES = ("ddp", "zero1", "zero2", "zero3", "fsdp2")
HAND_STAGES = ("ddp", "zero1", "zero2", "zero3")
CATEGORIES = ("params", "grads", "optimizer", "activations", "buffers")
FP32 = 4
MAX_RUN_PARAMETERS = 2_000_000
# A rough CPU rate for `predict` before a run has timed the units (one core, small
# matmuls through PyTorch's eager overhead); a run replaces it with its timings.
CPU_FLOPS_PER_S = 2e9
# Adam's update on CPU, seconds per element (a handful of elementwise passes).
ADAM_S_PER_ELEMENT = 5e-9
# The knobs that describe the model's shape; giving one turns the activations on.
# Above this many ranks the Program lumps the units together (see program_units).
STEPWISE_MAX_RANKS = 64
SHAPE_KNOBS = ("layers", "hidden", "heads", "seq", "vocab", "microbatch")


# -- parameters ----------------------------------------------------------------------


@dataclass(frozen=True)
class CountParam(Param):
    """A count of model parameters: 7e9, 7B, 70B, 125M, or `auto` (the MiniGPT's own)."""

    def allowed(self, mode: Mode) -> str:
        return "a whole number of at least 1 (e.g. 7e9, 7B, 70B, 125M) or auto"

    def parse(self, text: Any, mode: Mode) -> Any:
        if text == "auto" or isinstance(text, int) and not isinstance(text, bool):
            value = text
        else:
            try:
                value = parse_count(str(text))
            except ValueError:
                raise ParamError(
                    f"{self.name}={text}: {self.name} must be {self.allowed(mode)}"
                ) from None
        if value != "auto" and value < 1:
            raise ParamError(f"{self.name}={text}: {self.name} must be {self.allowed(mode)}")
        return value


# -- the model's shape, without torch -----------------------------------------------------


def param_shapes(params: dict[str, Any]) -> list[list[tuple[int, ...]]]:
    """Parameter shapes of MiniGPT (runtime.models), grouped by unit: embedding,
    each block, head, in module order (what FSDP2 shards on dim 0)."""
    h, v, s = params["hidden"], params["vocab"], params["seq"]
    block = [
        (h,), (h,),  # ln1
        (3 * h, h), (3 * h,),  # qkv
        (h, h), (h,),  # proj
        (h,), (h,),  # ln2
        (4 * h, h), (4 * h,),  # fc
        (h, 4 * h), (h,),  # out
    ]  # fmt: skip
    return [[(v, h), (s, h)], *[block] * params["layers"], [(h,), (h,), (v, h)]]


def unit_numels(params: dict[str, Any]) -> list[int]:
    return [sum(math.prod(shape) for shape in unit) for unit in param_shapes(params)]


def chunk_rows(rows: int, n: int, rank: int) -> int:
    """Rows of dim 0 that torch.chunk gives rank `rank` of n (FSDP2's sharding)."""
    size = -(-rows // n)
    return max(0, min(size, rows - rank * size))


def stage_of(span: Span) -> str:
    """The stage a Span belongs to: its action id starts with "<stage>/"."""
    return (span.action_id or "").split("/", 1)[0]


class Zero(Scenario):
    def resolve(self, raw: dict[str, Any], mode: Mode) -> dict[str, Any]:
        """`dp` is the ZeRO paper's N_d, an alias of `ranks`; and the activations are
        counted when the shape describes the model (Ψ from the shape, or a shape
        knob given)."""
        raw = dict(raw)
        if "dp" in raw:
            dp = int_param("dp", 4, "", "", 1, 8, 1 << 20).parse(raw.pop("dp"), mode)
            if "ranks" in raw and str(raw["ranks"]) != str(dp):
                raise ParamError(
                    f"dp={dp} and ranks={raw['ranks']}: dp is N_d, the number of ranks; give one of them"
                )
            raw["ranks"] = dp
        if raw.get("activations", "auto") == "auto":
            # A knob counts as given when it differs from its default: the app's form
            # sends every field, changed or not.
            shaped = raw.get("params", "auto") == "auto" or any(
                k in raw and str(raw[k]) != str(self.param(k).default) for k in SHAPE_KNOBS
            )
            raw["activations"] = "on" if shaped else "off"
        return super().resolve(raw, mode)

    def check(self, params: dict[str, Any], mode: str) -> None:
        if len(set(params["stage"])) != len(params["stage"]):
            raise ParamError("stage: list each stage once")
        if params["hidden"] % params["heads"]:
            raise ParamError(
                f"hidden={params['hidden']}: must be a multiple of heads={params['heads']}"
            )
        count = self.shape_parameters(params)
        if params["params"] == "auto":
            params["params"] = count
        psi = params["params"]
        if mode == "run":
            if params["precision"] != "fp32":
                raise ParamError(
                    f"precision={params['precision']}: a real run here trains in fp32; "
                    "mixed (fp16 params and grads, K = 12) is for predict"
                )
            if psi != count:
                raise ParamError(
                    f"params={psi}: a real run trains the MiniGPT of the shape knobs "
                    f"({count:,} parameters); other sizes are for predict"
                )
            check_run_size(count, MAX_RUN_PARAMETERS)
        if params["ranks"] > psi:
            raise ParamError(
                f"ranks={params['ranks']}: more ranks than the model has parameters "
                f"(Ψ = {psi:,}) to shard"
            )

    def shape_parameters(self, params: dict[str, Any]) -> int:
        return gpt_parameters(params)

    def from_shape(self, params: dict[str, Any]) -> bool:
        """True when Ψ is the shape's own count, so the Program can follow the units."""
        return params["params"] == self.shape_parameters(params)

    def units(self, params: dict[str, Any]) -> list[int]:
        """Elements per unit: the shape's, or Ψ spread over them in the same proportions."""
        numels = unit_numels(params)
        if self.from_shape(params):
            return numels
        total, psi = sum(numels), params["params"]
        out = [psi * n // total for n in numels]
        out[1 if len(out) > 2 else 0] += psi - sum(out)
        return out

    def program_units(self, params: dict[str, Any]) -> list[int]:
        """The units the Program steps through: the model's, or above
        STEPWISE_MAX_RANKS one lump of Ψ (one F, one B, one collective of each kind
        per step), so that `predict` with a thousand ranks stays fast and small."""
        numels = self.units(params)
        return numels if params["ranks"] <= STEPWISE_MAX_RANKS else [sum(numels)]

    # -- program -------------------------------------------------------------------------
    def build(self, params: dict[str, Any]) -> Program:
        n, steps = params["ranks"], params["steps"]
        group = tuple(range(n))  # one shared tuple: the simulator keys collectives by it
        numels = self.program_units(params)
        count = len(numels)
        program = Program(n, name="zero")
        for stage in params["stage"]:
            for r in range(n):

                def act(
                    kind: str,
                    t: int,
                    u: int | None = None,
                    label: str = "",
                    again: bool = False,
                    stage: str = stage,
                    r: int = r,
                ) -> None:
                    where = f"u{u}" if u is not None else ""
                    # ZeRO-3 gathers a unit twice per step: the second one's id says so.
                    name = f"{kind}{'_bw' if again else ''}"
                    common: dict[str, Any] = dict(
                        id=f"{stage}/s{t}/{name}{where}@r{r}",
                        rank=r,
                        kind=kind,
                        label=label or f"{kind} {where}".strip(),
                        step=t,
                        chunk=u,
                        phase=stage,
                    )
                    if kind in ("all_reduce", "reduce_scatter", "all_gather"):
                        program.add(
                            Action(**common, group=group, bytes=numels[u] * FP32, algorithm="ring")
                        )
                    elif kind == "opt":
                        program.add(Action(**common, cost_key=f"opt.{stage}"))
                    elif u is None:
                        program.add(Action(**common, cost_key=f"{kind}.{stage}"))
                    else:
                        program.add(Action(**common, cost_key=f"{kind}.u{u}"))

                program.add(
                    Action(
                        id=f"{stage}/start@r{r}",
                        rank=r,
                        kind="barrier",
                        label="barrier",
                        group=group,
                        phase=stage,
                    )
                )
                for t in range(steps):
                    forward, backward = range(count), range(count - 1, -1, -1)
                    if stage == "fsdp2":
                        act("F", t, label="F (fully_shard)")
                        act("B", t, label="B (fully_shard)")
                    elif stage == "zero3":
                        for u in forward:
                            act("all_gather", t, u, f"AG u{u}")
                            act("F", t, u)
                        for u in backward:
                            act("all_gather", t, u, f"AG u{u} (again)", again=True)
                            act("B", t, u)
                            act("reduce_scatter", t, u, f"RS u{u}")
                    else:
                        for u in forward:
                            act("F", t, u)
                        for u in backward:
                            act("B", t, u)
                            if stage == "ddp":
                                act("all_reduce", t, u, f"AR u{u}")
                            elif stage == "zero2":
                                act("reduce_scatter", t, u, f"RS u{u}")
                        if stage == "zero1":
                            for u in backward:
                                act("reduce_scatter", t, u, f"RS u{u}")
                    act("opt", t, label="Adam")
                    if stage in ("zero1", "zero2"):
                        for u in forward:
                            act("all_gather", t, u, f"AG u{u}")
        return program

    # -- cost model ----------------------------------------------------------------------
    def prepare_model(
        self,
        params: dict[str, Any],
        model: CostModel,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> CostModel:
        """Compute costs measured by the ranks (CPU seconds, median over steps) when a
        run gave them; else estimated from FLOPs."""
        measured: dict[str, list[float]] = {}
        for result in rank_results or []:
            for key, value in result.get("compute_costs", {}).items():
                measured.setdefault(key, []).append(value)
        costs = self.estimated_costs(params, model)
        if measured:
            costs.update({k: statistics.fmean(v) for k, v in measured.items()})
            source = f"{model.source}; unit costs measured in this run"
        else:
            source = model.source
        return replace(model, compute={**model.compute, **costs}, source=source)

    def estimated_costs(self, params: dict[str, Any], model: CostModel) -> dict[str, float]:
        """F of a unit from 2·elements·tokens FLOPs (+ attention), B = 2F, Adam per element."""
        rate = model.flops_per_s or CPU_FLOPS_PER_S
        tokens = params["microbatch"] * params["seq"]
        s, h = params["seq"], params["hidden"]
        numels = self.program_units(params)
        out: dict[str, float] = {}
        for u, numel in enumerate(numels):
            blocks = 1 if 0 < u < len(numels) - 1 else (params["layers"] if len(numels) == 1 else 0)
            attention = 4 * s * h * tokens * blocks
            f = (2 * numel * tokens + attention) / rate
            out[f"F.u{u}"], out[f"B.u{u}"] = f, 2 * f
        out["F.fsdp2"] = sum(out[f"F.u{u}"] for u in range(len(numels)))
        out["B.fsdp2"] = 2 * out["F.fsdp2"]
        psi, n = params["params"], params["ranks"]
        for stage in STAGES:
            local = psi if stage == "ddp" else psi / n
            out[f"opt.{stage}"] = local * ADAM_S_PER_ELEMENT
        return out

    # -- predictions -------------------------------------------------------------------
    def activation_bytes(self, params: dict[str, Any]) -> float:
        """Activations of all layers at the end of forward, the Playbook's 16-bit
        s·b·h·(34 + 5as/h) per layer, doubled for fp32."""
        per_layer = formulas.transformer_activation_bytes_per_layer(
            params["seq"], params["microbatch"], params["hidden"], params["heads"]
        )
        scale = 2 if params["precision"] == "fp32" else 1
        return scale * params["layers"] * per_layer

    def per_device_bytes(self, params: dict[str, Any]) -> dict[str, dict[str, float]]:
        """The paper's bytes per device for each stage (fsdp2 = ZeRO-3), by category."""
        out: dict[str, dict[str, float]] = {}
        for stage in params["stage"]:
            states = formulas.zero_model_state_bytes(
                params["params"], params["ranks"], stage, params["precision"]
            )
            entry = {f"{k}_bytes": v for k, v in states.items()}
            if params["activations"] == "on":
                entry["activations_bytes"] = self.activation_bytes(params)
            entry["total_bytes"] = sum(entry.values())
            out[stage] = entry
        return out

    def predicted_rank_bytes(self, params: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
        """For the real run (fp32, Adam): the bytes each rank holds at its peak, per
        category, with the shards' rounding: even_split chunks per unit for the hand
        stages, torch.chunk rows per parameter for FSDP2. Adam's optimizer state also
        holds a 4-byte step count per tensor it updates (one per unit by hand, one
        per parameter in FSDP2). Activations: the Playbook's formula, in fp32."""
        n = params["ranks"]
        numels = self.units(params)
        shapes = param_shapes(params)
        activations = self.activation_bytes(params) if params["activations"] == "on" else 0.0
        out: dict[str, dict[str, list[float]]] = {}
        for stage in params["stage"]:
            ranks: dict[str, list[float]] = {f"{c}_bytes": [] for c in CATEGORIES}
            for r in range(n):
                whole = sum(numels) * FP32
                if stage == "fsdp2":
                    local = sum(
                        chunk_rows(shape[0], n, r) * math.prod(shape[1:])
                        for unit in shapes
                        for shape in unit
                    )
                    tensors = sum(len(unit) for unit in shapes)
                    biggest = max(numels) * FP32
                    comm = (
                        2 * biggest
                    )  # a unit's gathered params and its gradients in reduce-scatter
                else:
                    local = sum(formulas.even_split(numel, n)[r] for numel in numels)
                    tensors = len(numels)
                    biggest = max(numels) * FP32
                    comm = {"ddp": 0, "zero1": 0, "zero2": biggest, "zero3": 2 * biggest}[stage]
                sharded = formulas.ZERO_SHARDED["zero3" if stage == "fsdp2" else stage]
                ranks["params_bytes"].append(local * FP32 if "params" in sharded else whole)
                ranks["grads_bytes"].append(local * FP32 if "grads" in sharded else whole)
                moments = (local if "optimizer" in sharded else sum(numels)) * 2 * FP32
                ranks["optimizer_bytes"].append(moments + 4 * tensors)
                ranks["activations_bytes"].append(activations)
                ranks["buffers_bytes"].append(comm)
            out[stage] = ranks
        return out

    # -- the memory bars ------------------------------------------------------------------
    def memory_rows(
        self, params: dict[str, Any], metrics: dict[str, Any]
    ) -> list[tuple[str, int, bool, dict[str, float]]]:
        """Per stage and rank: measured peaks (after a run) and the prediction. The
        prediction is per rank with the shards' rounding when Ψ is the shape's, else the
        paper's bytes per device, shown once (every device holds the same)."""
        rows: list[tuple[str, int, bool, dict[str, float]]] = []
        measured = metrics.get("measured_peak_bytes", {})
        per_rank = metrics.get("predicted_peak_bytes", {})
        per_device = metrics.get("per_device_bytes", {})

        def strip(entry: dict[str, Any], index: int | None) -> dict[str, float]:
            return {
                key.removesuffix("_bytes"): value if index is None else value[index]
                for key, value in entry.items()
                if key != "total_bytes"
            }

        for stage in metrics.get("stages", []):
            if stage in measured:
                for rank in range(len(measured[stage]["params_bytes"])):
                    rows.append((stage, rank, False, strip(measured[stage], rank)))
                    if stage in per_rank:
                        rows.append((stage, rank, True, strip(per_rank[stage], rank)))
            elif stage in per_device:
                rows.append((stage, 0, True, strip(per_device[stage], None)))
        return rows

    # -- metrics -------------------------------------------------------------------------
    def metrics(
        self,
        params: dict[str, Any],
        predicted: Timeline,
        measured: Timeline | None = None,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        n, psi = params["ranks"], params["params"]
        elem = formulas.ZERO_PRECISIONS[params["precision"]][0]
        per_device = self.per_device_bytes(params)
        out: dict[str, Any] = {
            "stages": list(params["stage"]),
            "parameters": psi,
            "ranks": n,
            "precision": params["precision"],
            "per_device_bytes": per_device,
        }
        if params["gpu_memory"]:
            out["fits_gpu_memory"] = {
                stage: entry["total_bytes"] <= params["gpu_memory"]
                for stage, entry in per_device.items()
            }
        comm: dict[str, dict[str, Any]] = {
            stage: {
                "predicted_bytes": formulas.zero_comm_bytes_per_rank(psi, n, stage, elem),
                "predicted_elements": formulas.zero_comm_elements(psi, stage),
            }
            for stage in params["stage"]
        }
        out["comm_bytes_per_rank"] = comm
        if self.from_shape(params):
            out["predicted_peak_bytes"] = self.predicted_rank_bytes(params)
        for stage in params["stage"]:
            out.setdefault("makespan_predicted_s", {})[stage] = _makespan(
                [s for s in predicted.spans if stage_of(s) == stage]
            )
        if measured is not None:
            out["makespan_measured_s"] = {
                stage: _makespan([s for s in measured.spans if stage_of(s) == stage])
                for stage in params["stage"]
            }
        if rank_results:
            steps = params["steps"]
            peaks: dict[str, dict[str, list[int]]] = {}
            diffs: dict[str, float] = {}
            losses: dict[str, list[float]] = {}
            for stage in params["stage"]:
                mine = [r["stages"][stage] for r in rank_results]
                peaks[stage] = {
                    f"{c}_bytes": [m["peak_bytes"][c] for m in mine] for c in CATEGORIES
                }
                sent = [m["bytes_sent"] / steps for m in mine]
                comm[stage]["measured_bytes"] = sent
                predicted_bytes = comm[stage]["predicted_bytes"]
                comm[stage]["measured_vs_predicted"] = (
                    max(sent) / predicted_bytes if predicted_bytes else 0.0
                )
                if stage != "ddp":
                    diffs[stage] = max(m["param_diff_vs_ddp"] for m in mine)
                losses[stage] = mine[0]["losses"]
            out["measured_peak_bytes"] = peaks
            out["param_diff_vs_ddp"] = diffs
            out["max_param_diff_vs_ddp"] = max(diffs.values(), default=0.0)
            reference = [r.get("ddp_diff_vs_single_process") for r in rank_results]
            reference = [d for d in reference if d is not None]
            if reference:
                out["ddp_param_diff_vs_single_process"] = max(reference)
            out["losses"] = losses
        return out


def _makespan(spans: list[Span]) -> float:
    spans = [s for s in spans if s.kind != "barrier"]
    if not spans:
        return 0.0
    return max(s.end for s in spans) - min(s.start for s in spans)


ACCOUNTING_ES = (
    "Entrenar con Adam en precisión mixta guarda, por cada uno de los Ψ parámetros, 2 bytes "
    "del parámetro en fp16, 2 del gradiente en fp16 y K = 12 de estados del optimizador (copia "
    "fp32 del parámetro, momento y varianza): 16Ψ bytes. Un modelo de 7B necesita 112 GB antes "
    "de la primera activación: no cabe en una GPU de 80 GB. En fp32 (la ejecución real de esta "
    "lección en CPU) son 4 + 4 + 8 = 16 bytes por parámetro, sin copia maestra. DDP replica los "
    "16Ψ en cada rango y suma los gradientes con un all-reduce por unidad (sus buckets): en "
    "anillo, cada rango envía 2(n−1)/n·Ψ·4 bytes por paso en fp32. ZeRO reparte los 16Ψ."
)
ACCOUNTING_EN = (
    "Training with Adam in mixed precision keeps, for each of the Ψ parameters, 2 bytes of the "
    "fp16 parameter, 2 of the fp16 gradient and K = 12 of optimizer states (an fp32 copy of the "
    "parameter, momentum and variance): 16Ψ bytes. A 7B model needs 112 GB before its first "
    "activation: it does not fit an 80 GB GPU. In fp32 (this lesson's real CPU run) it is "
    "4 + 4 + 8 = 16 bytes per parameter, without a master copy. DDP replicates all 16Ψ on every "
    "rank and sums the gradients with one all-reduce per unit (its buckets): on a ring each rank "
    "sends 2(n−1)/n·Ψ·4 bytes per step in fp32. ZeRO partitions the 16Ψ."
)


SCENARIO = Zero(
    name="zero",
    lesson=2,
    title={"es": "ZeRO y FSDP", "en": "ZeRO and FSDP"},
    summary={
        "es": "Dónde va la memoria del entrenamiento y qué quita cada etapa de ZeRO, medido en cada rango.",
        "en": "Where training memory goes and what each ZeRO stage removes, measured on every rank.",
    },
    params=(
        Param(
            "stage",
            "choices",
            ",".join(STAGES),
            {
                "es": "etapa (ddp, zero1, zero2, zero3, fsdp2), o una lista separada por comas",
                "en": "stage (ddp, zero1, zero2, zero3, fsdp2), or a comma list",
            },
            choices=STAGES,
        ),
        int_param(
            "ranks",
            4,
            "rangos de datos paralelos, N_d (alias: dp)",
            "data-parallel ranks, N_d (alias: dp)",
            2,
            8,
            1 << 20,
        ),
        CountParam(
            "params",
            "count",
            "auto",
            {
                "es": "parámetros del modelo Ψ (7e9, 7B, 70B) o auto: los del MiniGPT",
                "en": "model parameters Ψ (7e9, 7B, 70B) or auto: the MiniGPT's",
            },
        ),
        Param(
            "precision",
            "choice",
            "fp32",
            {
                "es": "fp32 (la ejecución real) o mixed: fp16 + Adam fp32, K = 12 (predicción)",
                "en": "fp32 (the real run) or mixed: fp16 + fp32 Adam, K = 12 (prediction)",
            },
            choices=("fp32", "mixed"),
        ),
        Param(
            "gpu_memory",
            "bytes",
            0,
            {
                "es": "memoria de una GPU (p. ej. 80GB): qué etapas caben; 0 = no comprobar",
                "en": "one GPU's memory (e.g. 80GB): which stages fit; 0 = do not check",
            },
            minimum=0,
        ),
        Param(
            "activations",
            "choice",
            "auto",
            {
                "es": "contar activaciones: auto (si la forma describe el modelo), on, off",
                "en": "count activations: auto (when the shape describes the model), on, off",
            },
            choices=("auto", "on", "off"),
        ),
        int_param("steps", 2, "pasos de Adam", "Adam steps", 1, 5),
        int_param("layers", 2, "capas del MiniGPT", "MiniGPT layers", 1, 16, 4096),
        int_param("hidden", 32, "dimensión oculta", "hidden size", 8, 256, 1 << 17),
        int_param("heads", 4, "cabezas de atención", "attention heads", 1, 32, 1024),
        int_param("seq", 16, "longitud de secuencia", "sequence length", 4, 128, 1 << 20),
        int_param("vocab", 64, "tamaño del vocabulario", "vocabulary size", 8, 1024, 1 << 20),
        int_param(
            "microbatch",
            4,
            "secuencias por rango y paso",
            "sequences per rank per step",
            1,
            32,
            1 << 16,
        ),
    ),
    narrative=(
        NarrativeStep(
            "accounting",
            {"es": "La cuenta: 2 + 2 + K", "en": "The accounting: 2 + 2 + K"},
            {"es": ACCOUNTING_ES, "en": ACCOUNTING_EN},
            formula="DDP: (2 + 2 + K)Ψ per device, K = 12",
            metric="per_device_bytes",
            phases=("ddp",),
        ),
        NarrativeStep(
            "zero1",
            {"es": "ZeRO-1: repartir el optimizador", "en": "ZeRO-1: shard the optimizer"},
            {
                "es": "Cada rango actualiza solo su trozo 1/N_d de los parámetros, así que solo necesita "
                "los estados de Adam de ese trozo: KΨ/N_d. Los gradientes se reducen con un "
                "reduce-scatter (cada rango recibe la suma de su trozo) y, tras el paso, un all-gather "
                "devuelve a todos los parámetros nuevos. Reduce-scatter + all-gather es exactamente un "
                "all-reduce: la misma comunicación que DDP, 2(n−1)/n·Ψ·4 bytes por rango en fp32.",
                "en": "Each rank updates only its 1/N_d chunk of the parameters, so it only needs "
                "Adam's states for that chunk: KΨ/N_d. Gradients are reduced with a reduce-scatter "
                "(each rank gets the sum of its chunk) and after the step an all-gather gives every "
                "rank the new parameters. Reduce-scatter + all-gather is exactly an all-reduce: the "
                "same communication as DDP, 2(n−1)/n·Ψ·4 bytes per rank in fp32.",
            },
            formula="2Ψ + 2Ψ + KΨ/N_d ;  sent = 2(n−1)/n·Ψ·4 B",
            metric="measured_peak_bytes",
            phases=("zero1",),
        ),
        NarrativeStep(
            "zero2",
            {"es": "ZeRO-2: repartir los gradientes", "en": "ZeRO-2: shard the gradients"},
            {
                "es": "Si cada rango solo actualiza su trozo, solo necesita el gradiente de su trozo. "
                "En cuanto el backward produce los gradientes de una unidad, un reduce-scatter los "
                "reparte y el búfer completo se libera: queda (2 + K)Ψ/N_d más un búfer de una unidad "
                "(la barra 'buffers'). La comunicación no cambia: 2(n−1)/n·Ψ·4 bytes.",
                "en": "If each rank only updates its chunk, it only needs its chunk's gradient. As "
                "soon as backward has produced a unit's gradients a reduce-scatter distributes them "
                "and the whole buffer is freed: (2 + K)Ψ/N_d remains, plus a one-unit bucket (the "
                "'buffers' bar). Communication does not change: 2(n−1)/n·Ψ·4 bytes.",
            },
            formula="2Ψ + (2 + K)Ψ/N_d ;  sent = 2(n−1)/n·Ψ·4 B",
            metric="measured_peak_bytes",
            phases=("zero2",),
        ),
        NarrativeStep(
            "zero3",
            {
                "es": "ZeRO-3: repartir los parámetros, 1,5× de comunicación",
                "en": "ZeRO-3: shard the parameters, 1.5× the communication",
            },
            {
                "es": "Cada rango guarda solo 1/N_d de los parámetros. Antes del forward de una unidad "
                "un all-gather la reconstruye y después se libera; el backward la necesita otra vez, así "
                "que se vuelve a reunir. Son dos all-gather de Ψ y un reduce-scatter de Ψ: 3Ψ elementos "
                "en vez de 2Ψ, 3(n−1)/n·Ψ·4 bytes por rango en fp32, 1,5× los de DDP. A cambio la memoria "
                "de estados es (2 + 2 + K)Ψ/N_d, más una o dos unidades completas en vuelo.",
                "en": "Each rank keeps only 1/N_d of the parameters. Before a unit's forward an "
                "all-gather rebuilds it and afterwards it is freed; backward needs it again, so it is "
                "gathered again. That is two all-gathers of Ψ and one reduce-scatter of Ψ: 3Ψ elements "
                "instead of 2Ψ, 3(n−1)/n·Ψ·4 bytes per rank in fp32, 1.5× DDP's. In exchange the states "
                "take (2 + 2 + K)Ψ/N_d, plus one or two whole units in flight.",
            },
            formula="(2 + 2 + K)Ψ/N_d ;  sent = 3(n−1)/n·Ψ·4 B",
            metric="comm_bytes_per_rank",
            phases=("zero3",),
        ),
        NarrativeStep(
            "fsdp",
            {"es": "FSDP es ZeRO-3", "en": "FSDP is ZeRO-3"},
            {
                "es": "FSDP de PyTorch con reshard_after_forward=True es ZeRO-3: mismos tres colectivos, "
                "misma memoria. FSDP2 (fully_shard) reparte cada parámetro por la dimensión 0 con "
                "torch.chunk (10 filas en 4 rangos → 3,3,3,1), no un búfer plano, así que el redondeo "
                "por rango difiere del de ZeRO a mano. Aquí corre de verdad con gloo en CPU (torch 2.13) "
                "sobre las mismas unidades; sus colectivos son los de torch, contados por un all-gather "
                "y un reduce-scatter propios que llaman a los de torch (como los bytes que enviaría un "
                "anillo con los búferes que FSDP2 les pasa; gloo elige su propio algoritmo por dentro). Con reshard_after_forward=False "
                "no vuelve a reunir en el backward: es ZeRO-2 con parámetros repartidos entre pasos.",
                "en": "PyTorch's FSDP with reshard_after_forward=True is ZeRO-3: the same three "
                "collectives, the same memory. FSDP2 (fully_shard) shards each parameter on dim 0 "
                "with torch.chunk (10 rows on 4 ranks → 3,3,3,1), not one flat buffer, so its per-rank "
                "rounding differs from hand-made ZeRO's. Here it really runs on gloo on CPU (torch "
                "2.13) over the same units; its collectives are torch's, counted by a custom all-gather "
                "and reduce-scatter that call torch's own (as the bytes a ring sends for the buffers "
                "FSDP2 passes them; gloo picks its own algorithm inside). With reshard_after_forward=False it does "
                "not gather again in backward: ZeRO-2 with parameters sharded between steps.",
            },
            formula="FSDP(reshard_after_forward) = ZeRO-3",
            metric="max_param_diff_vs_ddp",
            phases=("fsdp2",),
        ),
        NarrativeStep(
            "beyond",
            {"es": "Más allá de esta máquina", "en": "Beyond this machine"},
            {
                "es": "Las mismas fórmulas valen para cualquier Ψ y N_d: `playground predict zero -p "
                "params=7B -p dp=64 -p precision=mixed -p gpu_memory=80GB` dice cuántos bytes necesita "
                "cada GPU en cada etapa y cuáles caben. 7B en DDP: 112 GB; con ZeRO-3 en 64 GPUs: 1,75 GB "
                "de estados. Las activaciones no se reparten con ZeRO: dependen del lote y la secuencia.",
                "en": "The same formulas hold for any Ψ and N_d: `playground predict zero -p params=7B "
                "-p dp=64 -p precision=mixed -p gpu_memory=80GB` tells the bytes each GPU needs in each "
                "stage and which fit. 7B under DDP: 112 GB; under ZeRO-3 on 64 GPUs: 1.75 GB of states. "
                "Activations are not sharded by ZeRO: they depend on the batch and the sequence.",
            },
            formula="fits ⇔ states + activations ≤ GPU memory",
            metric="fits_gpu_memory",
            phases=("beyond",),
        ),
    ),
    rank_entry="scenarios.zero_rank:run_rank",
)
