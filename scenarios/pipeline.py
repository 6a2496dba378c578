"""Lesson 5: pipeline schedules — where the bubble comes from and what each schedule buys.

Parameters, narrative, Program and metrics of the `pipeline` scenario. MiniGPT
(runtime.models) is cut into p·v contiguous stages; each schedule of the
`schedule` list (runtime.schedules) runs one training step of m microbatches
on the real ranks, one schedule after the other, each after a barrier. The rank
side (scenarios.pipeline_rank) first times every stage's F, B and W alone
(ranks take turns, so each time is one core's worth), and the prediction
re-simulates the Program with those costs; the simulator shares the CPU cores
among the ranks computing at each instant, which is what a pipeline's idle
ranks need.

Metrics are given per schedule (metrics[schedule][...]); under `--hardware unit`
(F = 1, B = 2 per full stage, free communication) they are the textbook numbers:
GPipe and 1F1B with p = 4, m = 8 take 33 units, a bubble of 3/11.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from runtime import formulas, schedules
from runtime.costmodel import CostModel
from runtime.program import Action, Program
from runtime.schedules import Shape
from runtime.trace import Span, Timeline
from scenarios.base import (
    NarrativeStep,
    Param,
    ParamError,
    Scenario,
    check_run_size,
    gpt_parameters,
    int_param,
)

FP32 = 4
# A rough CPU rate for `predict` before any run has measured the stages (one core,
# small matmuls through PyTorch's eager overhead); a run replaces it with timings.
CPU_FLOPS_PER_S = 2e9
MAX_RUN_PARAMETERS = 2_000_000
COMPUTE_KINDS = ("F", "B", "W")


def shape_of(params: dict[str, Any], schedule: str) -> Shape:
    chunks = params["chunks"] if schedule == "interleaved" else 1
    act = params["microbatch_size"] * params["seq"] * params["hidden"] * FP32
    return Shape(params["stages"], params["microbatches"], chunks, act)


def schedule_of(span_or_id: Span | str) -> str:
    action_id = span_or_id if isinstance(span_or_id, str) else (span_or_id.action_id or "")
    return action_id.split("/", 1)[0]


class Pipeline(Scenario):
    def world_size(self, params: dict[str, Any]) -> int:
        return int(params["stages"])

    def check(self, params: dict[str, Any], mode: str) -> None:
        for schedule in params["schedule"]:
            shape = shape_of(params, schedule)
            try:
                schedules.check(schedule, shape)
            except schedules.ScheduleError as exc:
                raise ParamError(str(exc)) from None
            if params["layers"] < shape.virtual_stages:
                raise ParamError(
                    f"layers={params['layers']}: {schedule} cuts the model into "
                    f"{shape.virtual_stages} stages (stages x chunks), so it needs at least that many layers"
                )
        if params["hidden"] % params["heads"]:
            raise ParamError(
                f"hidden={params['hidden']}: must be a multiple of heads={params['heads']}"
            )
        if len(set(params["schedule"])) != len(params["schedule"]):
            raise ParamError("schedule: list each schedule once")
        if mode == "run":
            check_run_size(self.parameter_count(params), MAX_RUN_PARAMETERS)

    def parameter_count(self, params: dict[str, Any]) -> int:
        return gpt_parameters(params)

    def build(self, params: dict[str, Any]) -> Program:
        return schedules.build_many([(s, shape_of(params, s)) for s in params["schedule"]])

    # -- cost model ------------------------------------------------------------------
    def prepare_model(
        self,
        params: dict[str, Any],
        model: CostModel,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> CostModel:
        """Stage costs: measured by the ranks when a run gave them; else the profile's
        own (unit: F = 1, B = 2 per full stage); else estimated from FLOPs."""
        measured: dict[str, float] = {}
        p2p = []
        for result in rank_results or []:
            measured.update(result.get("compute_costs", {}))
            if result.get("p2p_s") is not None:
                p2p.append(result["p2p_s"])
        if measured:
            # A pipeline message's latency, from the ranks' own ping-pong of an
            # activation (not the ring calibration, whose steps all run at once).
            alpha = model.alpha
            if p2p:
                alpha = max(
                    0.0, statistics.median(p2p) - self.activation_bytes(params) * model.beta
                )
            return replace(
                model,
                alpha=alpha,
                compute={**model.compute, **measured},
                source=f"{model.source}; stage costs and p2p latency measured in this run",
            )
        if "F" in model.compute:
            return model
        return replace(model, compute={**model.compute, **self.estimated_costs(params, model)})

    def activation_bytes_per_stage(
        self, shape: Shape, rank_results: list[dict[str, Any]]
    ) -> dict[int, float]:
        """Bytes one microbatch's forward keeps for backward, per stage, as the ranks
        measured them alone (the prediction multiplies them by what is in flight)."""
        out = {}
        for result in rank_results:
            for stage in range(shape.virtual_stages):
                key = schedules.cost_key("act_bytes", stage, shape)
                if key in result.get("compute_costs", {}):
                    out[stage] = result["compute_costs"][key]
        return out

    def memory_rows(self, params: dict[str, Any], metrics: dict[str, Any]) -> list[tuple]:
        rows = []
        for schedule in metrics.get("schedules", []):
            m = metrics.get(schedule, {})
            measured = m.get("peak_activation_bytes")
            predicted = m.get("peak_activation_bytes_predicted")
            for rank in range(params["stages"]):
                if measured:
                    rows.append((schedule, rank, False, {"activations": measured[rank]}))
                if predicted:
                    rows.append((schedule, rank, True, {"activations": predicted[rank]}))
        return rows

    def activation_bytes(self, params: dict[str, Any]) -> int:
        return params["microbatch_size"] * params["seq"] * params["hidden"] * FP32

    def estimated_costs(self, params: dict[str, Any], model: CostModel) -> dict[str, float]:
        """F per stage from 2·params·tokens FLOPs; B = 2F, split as Bi = W = F."""
        rate = model.flops_per_s or CPU_FLOPS_PER_S
        tokens = params["microbatch_size"] * params["seq"]
        h, layers = params["hidden"], params["layers"]
        out: dict[str, float] = {}
        for schedule in params["schedule"]:
            stages = shape_of(params, schedule).virtual_stages
            base, extra = divmod(layers, stages)
            for s in range(stages):
                count = base + (1 if s < extra else 0)
                matmul = count * 12 * h * h + (h * params["vocab"] if s == stages - 1 else 0)
                f = 2 * matmul * tokens / rate
                for kind, cost in (("F", f), ("B", 2 * f), ("Bi", f), ("W", f)):
                    out[schedules.cost_key(kind, s, stages)] = cost
        return out

    # -- metrics ---------------------------------------------------------------------
    def metrics(
        self,
        params: dict[str, Any],
        predicted: Timeline,
        measured: Timeline | None = None,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        program = self.build(params)
        out: dict[str, Any] = {
            "schedules": list(params["schedule"]),
            "parameters": self.parameter_count(params),
        }
        for schedule in params["schedule"]:
            shape = shape_of(params, schedule)
            part = [a for a in program.actions() if schedule_of(a.id) == schedule]
            per_rank = [[a for a in part if a.rank == r] for r in range(shape.stages)]
            unit = formulas.pipeline_bubble_fraction(
                schedule,
                shape.stages,
                shape.microbatches,
                shape.chunks,
                1.0,
                2.0,
                1.0 if schedule == "zb-h1" else 0.0,
            )
            pred = _spans_of(predicted, schedule)
            m: dict[str, Any] = {
                "makespan_predicted_s": _makespan(pred),
                "bubble_fraction_predicted": _bubble(pred, shape.stages),
                "bubble_fraction_formula": unit,
                "peak_inflight_predicted": [
                    max(schedules.inflight_profile(actions), default=0) for actions in per_rank
                ],
                "p2p_bytes_predicted": [
                    sum(nbytes for a in actions for _, nbytes in a.sends()) for actions in per_rank
                ],
                "p2p_messages": sum(1 for a in part if a.kind == "send"),
            }
            if measured is not None:
                meas = _spans_of(measured, schedule)
                m["makespan_measured_s"] = _makespan(meas)
                m["prediction_error"] = formulas.relative_error(
                    m["makespan_predicted_s"], m["makespan_measured_s"]
                )
                m["bubble_fraction_measured"] = _bubble(meas, shape.stages)
            if rank_results:
                per_microbatch = self.activation_bytes_per_stage(shape, rank_results)
                if per_microbatch:
                    m["peak_activation_bytes_predicted"] = _predicted_activation_peaks(
                        per_rank, per_microbatch
                    )
                mine = [r["schedules"][schedule] for r in rank_results]
                m["peak_inflight_microbatches"] = [r["peak_inflight"] for r in mine]
                m["peak_activation_bytes"] = [r["peak_activation_bytes"] for r in mine]
                m["p2p_bytes"] = [r["p2p_bytes"] for r in mine]
                m["cpu_s"] = [r["cpu_s"] for r in mine]
                m["max_grad_diff_vs_reference"] = max(r["max_grad_diff"] for r in mine)
                m["loss"] = (
                    statistics.fmean(loss for r in mine for loss in r["losses"])
                    if any(r["losses"] for r in mine)
                    else None
                )
            out[schedule] = m
        return out


def _predicted_activation_peaks(
    per_rank: list[list[Action]], per_microbatch: dict[int, float]
) -> list[float]:
    """Per rank, the largest sum over held (stage, microbatch) of one microbatch's
    activation bytes on that stage, walking the rank's actions in order."""
    peaks = []
    for actions in per_rank:
        release = "W" if any(a.kind == "W" for a in actions) else "B"
        held = peak = 0.0
        for action in actions:
            stage_bytes = per_microbatch.get(action.stage or 0, 0.0)
            if action.kind == "F":
                held += stage_bytes
                peak = max(peak, held)
            elif action.kind == release:
                held -= stage_bytes
        peaks.append(peak)
    return peaks


def _spans_of(timeline: Timeline, schedule: str) -> list[Span]:
    return [s for s in timeline.spans if s.kind != "barrier" and schedule_of(s) == schedule]


def _makespan(spans: list[Span]) -> float:
    if not spans:
        return 0.0
    return max(s.end for s in spans) - min(s.start for s in spans)


def _bubble(spans: list[Span], ranks: int) -> float:
    """Idle share of the makespan, averaged over ranks: 1 - (time computing)/makespan."""
    makespan = _makespan(spans)
    if makespan <= 0:
        return 0.0
    busy = [0.0] * ranks
    for s in spans:
        if s.kind in COMPUTE_KINDS:
            busy[s.rank] += s.duration
    return 1.0 - statistics.fmean(busy) / makespan


SCENARIO = Pipeline(
    name="pipeline",
    lesson=5,
    title={"es": "Planificaciones de pipeline", "en": "Pipeline schedules"},
    summary={
        "es": "GPipe, 1F1B, intercalado y zero-bubble: de dónde sale la burbuja y cuánta memoria cuesta.",
        "en": "GPipe, 1F1B, interleaved and zero-bubble: where the bubble comes from and what memory it costs.",
    },
    params=(
        Param(
            "schedule",
            "choices",
            "gpipe,1f1b",
            {
                "es": "planificación, o una lista separada por comas para compararlas",
                "en": "schedule, or a comma list to compare them",
            },
            choices=schedules.SCHEDULES,
        ),
        int_param(
            "stages", 4, "etapas del pipeline (rangos), p", "pipeline stages (ranks), p", 2, 8, 64
        ),
        int_param(
            "microbatches",
            8,
            "microlotes por paso, m",
            "microbatches per step, m",
            1,
            schedules.MAX_MICROBATCHES,
        ),
        int_param(
            "chunks",
            2,
            "trozos del modelo por rango en el intercalado, v",
            "model chunks per rank for interleaved, v",
            1,
            8,
        ),
        int_param("layers", 8, "capas del MiniGPT", "MiniGPT layers", 1, 64, 1024),
        int_param("hidden", 64, "dimensión oculta", "hidden size", 8, 512, 16384),
        int_param("heads", 4, "cabezas de atención", "attention heads", 1, 32, 256),
        int_param("seq", 64, "longitud de secuencia", "sequence length", 4, 256, 65536),
        int_param("vocab", 64, "tamaño del vocabulario", "vocabulary size", 8, 1024, 262144),
        int_param(
            "microbatch_size",
            32,
            "secuencias por microlote",
            "sequences per microbatch",
            1,
            64,
            4096,
        ),
    ),
    narrative=(
        NarrativeStep(
            "bubble",
            {"es": "De dónde sale la burbuja", "en": "Where the bubble comes from"},
            {
                "es": "La etapa s no puede empezar el microlote j hasta que la etapa s−1 lo termina. Al "
                "principio las etapas finales esperan (llenado) y al final esperan las primeras "
                "(vaciado). GPipe hace todos los forward y luego todos los backward: cada rango queda "
                "ocioso p−1 veces (F+B). En esta máquina cuatro rangos comparten dos núcleos: mientras un "
                "rango espera, los otros usan su núcleo, así que la burbuja cuesta menos tiempo que en "
                "GPUs dedicadas; la predicción reparte los núcleos igual.",
                "en": "Stage s cannot start microbatch j until stage s−1 has finished it. At the start "
                "the last stages wait (fill), at the end the first ones do (drain). GPipe runs every "
                "forward, then every backward: each rank sits idle for p−1 times (F+B). On this machine four "
                "ranks share two cores: while one rank waits, the others use its core, so the bubble "
                "costs less time than on dedicated GPUs; the prediction shares the cores the same way.",
            },
            formula="T = (m + p − 1)(F + B) ;  bubble = (p − 1)/(m + p − 1)",
            metric="bubble_fraction_measured",
            phases=("forward", "backward", "start"),
        ),
        NarrativeStep(
            "1f1b",
            {"es": "1F1B: misma burbuja, menos memoria", "en": "1F1B: same bubble, less memory"},
            {
                "es": "1F1B hace en el rango r solo min(p−r−1, m) forward de calentamiento y luego alterna "
                "un forward y un backward. La burbuja es la misma que en GPipe (el llenado y el vaciado "
                "no cambian), pero cada backward libera las activaciones de su microlote: el rango r "
                "guarda como mucho p−r microlotes en vez de m.",
                "en": "1F1B runs only min(p−r−1, m) warm-up forwards on rank r, then alternates one "
                "forward and one backward. The bubble is GPipe's (fill and drain do not change), but "
                "each backward frees its microbatch's activations: rank r holds at most p−r "
                "microbatches instead of m.",
            },
            formula="warm-up_r = min(p − r − 1, m) ;  in-flight_r ≤ min(p − r, m)",
            metric="peak_inflight_microbatches",
            phases=("warmup", "steady", "cooldown"),
        ),
        NarrativeStep(
            "interleaved",
            {
                "es": "Intercalado: mensajes a cambio de burbuja",
                "en": "Interleaved: messages for bubble",
            },
            {
                "es": "Con v trozos por rango (la etapa s vive en el rango s mod p), cada etapa es v veces "
                "más corta, así que el llenado y el vaciado también: la burbuja se divide por v. A cambio "
                "cada microlote cruza v veces más fronteras (v veces más mensajes p2p) y se guardan más "
                "activaciones. Megatron exige que m sea múltiplo de p.",
                "en": "With v chunks per rank (stage s lives on rank s mod p), each stage is v times "
                "shorter, and so are fill and drain: the bubble is divided by v. In exchange each "
                "microbatch crosses v times more boundaries (v times more p2p messages) and more "
                "activations are held. Megatron requires m to be a multiple of p.",
            },
            formula="T = m(F + B) + (p − 1)(F + B)/v",
            metric="p2p_messages",
            phases=("interleaved",),
        ),
        NarrativeStep(
            "zero-bubble",
            {"es": "Zero-bubble: separar B y W", "en": "Zero-bubble: splitting B and W"},
            {
                "es": "El backward tiene dos partes: el gradiente de la entrada (B), que la etapa anterior "
                "espera, y el de los pesos (W), que nadie espera. ZB-H1 hace B en cuanto puede y deja W "
                "para los huecos del vaciado: la burbuja pasa de (p−1)(F+B+W) a (p−1)(F+B−W), y ningún "
                "rango guarda más de p microlotes, el pico de 1F1B.",
                "en": "The backward has two parts: the input gradient (B), which the previous stage is "
                "waiting for, and the weight gradient (W), which nobody waits for. ZB-H1 runs B as soon "
                "as it can and moves W into the drain's gaps: the bubble falls from (p−1)(F+B+W) to "
                "(p−1)(F+B−W), and no rank holds more than p microbatches, 1F1B's peak.",
            },
            formula="T = m(F + B + W) + (p − 1)(F + B − W)",
            metric="makespan_measured_s",
            phases=("zero-bubble",),
        ),
    ),
    rank_entry="scenarios.pipeline_rank:run_rank",
)
