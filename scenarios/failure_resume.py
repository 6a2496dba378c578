"""Lesson 3: failure, then resume — kill a rank, restart from the last good checkpoint,
end bit for bit where an uninterrupted run ends; and how often to checkpoint.

Parameters, narrative, Program and metrics of the `failure-resume` scenario.
Data-parallel MiniGPT (runtime.models) trains for `steps` steps on `ranks`
ranks; every `checkpoint_every` steps all ranks write a checkpoint together
(runtime.checkpoint). `--fault` kills or hangs a real rank at a step, or in the
middle of a checkpoint write, or corrupts the newest checkpoint; the restart
supervisor (runtime.supervise, called by playground.session because this
scenario has a `restart_policy`) detects the failure through the launcher,
tears every rank down, and starts them again, possibly on `resume_ranks`
ranks, from the newest checkpoint whose manifest checks out. At the end the
ranks train the same seed again without interruption, in the same processes,
and compare parameters and optimizer state with torch.equal.

Why the result can be bitwise equal, even on a different number of ranks:
the global batch is cut into `microbatches` fixed pieces, and the gradient is
their sum over a fixed binary tree, not over ranks: rank r sums its own
subtree, an all-gather brings every rank's subtree sum, and every rank adds
them up the rest of the tree in the same order. 4 or 2 ranks, the additions
are the same additions. Adam (and ZeRO-1's shards of it) is elementwise.

The second half, `mtbf` and `save_cost`, is Young's and Daly's formulas for
the checkpoint interval beside a Monte-Carlo of a long run with exponential
failures (runtime.checkpoint_interval); `predict` shows it without any run.

The rank side lives in scenarios.failure_resume_rank. Imports: runtime's pure
part only (the UI imports this module).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from runtime import formulas
from runtime.costmodel import CostModel
from runtime.faults import Fault
from runtime.program import Action, Program
from runtime.trace import Timeline
from scenarios.base import (
    NarrativeStep,
    Param,
    ParamError,
    Scenario,
    check_run_size,
    gpt_parameters,
    int_param,
)

if TYPE_CHECKING:
    from runtime.supervise import RestartPolicy

FP32 = 4
# Before a run has measured them: a rough CPU rate for MiniGPT's small matmuls,
# and a local disk's write rate for the checkpoint.
CPU_FLOPS_PER_S = 2e9
DISK_BYTES_PER_S = 5e8
CHECKPOINT_FIXED_S = 0.005
MAX_RUN_PARAMETERS = 1_000_000
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64)


def parameter_count(params: dict[str, Any]) -> int:
    return gpt_parameters(params)


def world_of(params: dict[str, Any]) -> int:
    """The ranks of this attempt: a restart may resume on `resume_ranks`."""
    return int((params.get("_supervisor") or {}).get("world_size") or params["ranks"])


def shard_sizes(numel: int, world: int) -> list[int]:
    return formulas.even_split(numel, world)


def checkpoint_steps(params: dict[str, Any]) -> list[int]:
    every = params["checkpoint_every"]
    return list(range(every, params["steps"] + 1, every))


class FailureResume(Scenario):
    def check(self, params: dict[str, Any], mode: str) -> None:
        m = params["microbatches"]
        if m not in POWERS_OF_TWO:
            raise ParamError(f"microbatches={m}: must be a power of two (the gradient tree)")
        for name in ("ranks", "resume_ranks"):
            n = params[name]
            if name == "resume_ranks" and n == 0:
                continue
            if n not in POWERS_OF_TWO or m % n:
                raise ParamError(
                    f"{name}={n}: must be a power of two dividing microbatches={m}, so every "
                    "rank owns a whole subtree of the gradient sum"
                )
        if params["batch"] % m:
            raise ParamError(f"batch={params['batch']}: must be a multiple of microbatches={m}")
        if params["hidden"] % params["heads"]:
            raise ParamError(
                f"hidden={params['hidden']}: must be a multiple of heads={params['heads']}"
            )
        for name in ("save_cost", "restart_cost"):
            # Young's and Daly's expansions (and a simulation that has to finish) assume
            # saving and restarting cost far less than the time between failures.
            if params[name] > params["mtbf"] / 10:
                raise ParamError(
                    f"{name}={params[name]:g}s: must be at most a tenth of mtbf={params['mtbf']:g}s "
                    "(a job that fails before it can save never finishes)"
                )
        if mode == "run":
            check_run_size(parameter_count(params), MAX_RUN_PARAMETERS)

    def check_faults(self, params: dict[str, Any], faults: list[Fault]) -> None:
        """Faults against this run's steps and checkpoints (ranks are checked when parsed)."""
        steps, saves = params["steps"], checkpoint_steps(params)
        for fault in faults:
            spec = fault.describe()
            if fault.step is not None and not 1 <= fault.step <= steps:
                raise ParamError(f"--fault {spec!r}: step must be in 1..{steps} (steps={steps})")
            if fault.during == "checkpoint":
                if not saves:
                    raise ParamError(
                        f"--fault {spec!r}: no checkpoint is written (checkpoint_every="
                        f"{params['checkpoint_every']} > steps={steps})"
                    )
                if fault.step is not None and fault.step not in saves:
                    raise ParamError(
                        f"--fault {spec!r}: no checkpoint at step {fault.step}; checkpoints "
                        f"are written at steps {', '.join(map(str, saves[:6]))}"
                        + ("…" if len(saves) > 6 else "")
                    )
        later = sorted((f for f in faults if f.rank is not None), key=lambda f: f.step or 0)[1:]
        shrunk = params["resume_ranks"]
        for fault in later:
            if shrunk and fault.rank is not None and fault.rank >= shrunk:
                raise ParamError(
                    f"--fault {fault.describe()!r}: after the first restart the run has "
                    f"resume_ranks={shrunk} ranks, so a later fault must name a rank in "
                    f"0..{shrunk - 1}"
                )
        if any(f.kind == "corrupt" for f in faults) and not any(
            f.kind != "corrupt" for f in faults
        ):
            raise ParamError(
                "--fault 'corrupt:checkpoint=latest' only matters when a failure forces a "
                "restart: add a failure too, e.g. --fault kill:rank=1,step=12"
            )

    def restart_policy(self, params: dict[str, Any]) -> RestartPolicy:
        # Imported when used, like checkpoint_interval below: numpy and safetensors
        # stay off the app's start path (the registry imports every scenario).
        from runtime.supervise import RestartPolicy

        return RestartPolicy(params["max_restarts"], params["resume_ranks"] or None)

    # -- program ------------------------------------------------------------------
    def build(self, params: dict[str, Any]) -> Program:
        """Per step and rank: fwd+bwd of its microbatches, all-gather of the subtree
        gradient sums, the Adam step (of its shard with ZeRO-1, then an all-gather of
        parameters), and every `checkpoint_every` steps a checkpoint write."""
        world = world_of(params)
        numel = parameter_count(params)
        group = tuple(range(world))
        leaves = params["microbatches"] // world
        zero1 = params["sharding"] == "zero1"
        shard = max(shard_sizes(numel, world))
        program = Program(world, name=self.name)
        saves = set(checkpoint_steps(params))
        for k in range(1, params["steps"] + 1):
            for r in group:
                common = dict(rank=r, step=k, phase="train")
                # A collective is where a dead peer strands the survivors: the cursor on
                # one tells why everyone restarts.
                collective = dict(rank=r, step=k, phase="collective")
                program.add(
                    Action(
                        id=f"s{k}.fb@r{r}",
                        kind="compute",
                        label=f"fwd+bwd {k}",
                        cost_key="fb",
                        work=leaves,
                        args=(("op", "fb"),),
                        **common,
                    )
                )
                program.add(
                    Action(
                        id=f"s{k}.grads@r{r}",
                        kind="all_gather",
                        label=f"gather grads {k}",
                        bytes=world * (numel + 1) * FP32,
                        group=group,
                        args=(("op", "grads"),),
                        **collective,
                    )
                )
                program.add(
                    Action(
                        id=f"s{k}.opt@r{r}",
                        kind="opt",
                        label=f"adam {k}",
                        cost_key="opt",
                        work=(shard / numel) if zero1 else 1.0,
                        args=(("op", "opt"),),
                        **common,
                    )
                )
                if zero1:
                    program.add(
                        Action(
                            id=f"s{k}.params@r{r}",
                            kind="all_gather",
                            label=f"gather params {k}",
                            bytes=world * shard * FP32,
                            group=group,
                            args=(("op", "params"),),
                            **collective,
                        )
                    )
                if k in saves:
                    program.add(
                        Action(
                            id=f"s{k}.ckpt@r{r}",
                            rank=r,
                            kind="checkpoint",
                            label=f"checkpoint {k}",
                            cost_key="ckpt",
                            step=k,
                            # The first checkpoint tells how one is written (atomicity);
                            # the later ones, how often to pay for one (Young and Daly).
                            phase="checkpoint" if k == min(saves) else "interval",
                            args=(("op", "ckpt"),),
                        )
                    )
        return program

    # -- cost model ---------------------------------------------------------------
    def prepare_model(
        self,
        params: dict[str, Any],
        model: CostModel,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> CostModel:
        """Costs measured by the ranks when a run gave them; else estimated from FLOPs."""
        measured: dict[str, list[float]] = {}
        for result in rank_results or []:
            for key, value in result.get("compute_costs", {}).items():
                measured.setdefault(key, []).append(value)
        if measured:
            costs = {k: statistics.median(v) for k, v in measured.items()}
            return replace(
                model,
                compute={**model.compute, **costs},
                source=f"{model.source}; step and checkpoint costs measured in this run",
            )
        if all(k in model.compute for k in ("fb", "opt", "ckpt")):
            return model
        return replace(model, compute={**self.estimated_costs(params, model), **model.compute})

    def estimated_costs(self, params: dict[str, Any], model: CostModel) -> dict[str, float]:
        rate = model.flops_per_s or CPU_FLOPS_PER_S
        numel = parameter_count(params)
        tokens = params["batch"] // params["microbatches"] * params["seq"]
        return {
            "fb": 6 * numel * tokens / rate,  # forward 2·N·T, backward twice that
            "opt": 12 * numel / rate,
            "ckpt": CHECKPOINT_FIXED_S + 3 * numel * FP32 / DISK_BYTES_PER_S,
        }

    # -- metrics ------------------------------------------------------------------
    def metrics(
        self,
        params: dict[str, Any],
        predicted: Timeline,
        measured: Timeline | None = None,
        rank_results: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        from runtime import checkpoint_interval  # numpy: only when metrics are asked for

        numel = parameter_count(params)
        out: dict[str, Any] = {
            "parameters": numel,
            # parameters + Adam's two moments, fp32
            "checkpoint_bytes": 3 * numel * FP32,
            "predicted_s": predicted.makespan,
        }
        if measured is not None and rank_results:
            sup = rank_results[0].get("supervisor") or {}
            failures = sup.get("failures", [])
            detections = [f["detection_s"] for f in failures if f["detection_s"] is not None]
            restarts = [f["restart_s"] for f in failures if f["restart_s"] is not None]
            out.update(
                {
                    "restarts": sup.get("restarts", 0),
                    "lost_steps": sup.get("lost_steps", 0),
                    "detection_s": statistics.fmean(detections) if detections else None,
                    "restart_s": statistics.fmean(restarts) if restarts else None,
                    "resumed_from_steps": [f["resumed_from_step"] for f in failures],
                    "world_sizes": sup.get("world_sizes", [params["ranks"]]),
                    "bitwise_equal_to_uninterrupted": all(
                        r.get("bitwise_equal") for r in rank_results
                    ),
                    "parameters_sha256": rank_results[0].get("parameters_sha256"),
                    "optimizer_sha256": rank_results[0].get("optimizer_sha256"),
                    "final_loss": rank_results[0].get("final_loss"),
                    "final_loss_uninterrupted": rank_results[0].get("final_loss_uninterrupted"),
                    # Wall time of the whole run, restarts included: the prediction
                    # assumes no failure, so the difference is what the failures cost.
                    "measured_s": measured.makespan,
                    "step_s": _median_step(measured),
                    "checkpoint_write_s": rank_results[0].get("compute_costs", {}).get("ckpt"),
                }
            )
            if out["checkpoint_write_s"] and out["step_s"]:
                # Daly's interval for this machine's checkpoint cost and the given mtbf,
                # in steps of this run: what checkpoint_every should be.
                here = checkpoint_interval.daly_interval(out["checkpoint_write_s"], params["mtbf"])
                out["daly_interval_here_s"] = here
                out["daly_checkpoint_every_steps"] = max(1, round(here / out["step_s"]))
        interval = checkpoint_interval.study(
            params["save_cost"], params["mtbf"], params["restart_cost"]
        )
        out.update(
            {
                "mtbf_s": params["mtbf"],
                "save_cost_s": params["save_cost"],
                "young_interval_s": interval.young,
                "daly_interval_s": interval.daly,
                "simulated_optimal_interval_s": interval.simulated_optimal_interval,
                "simulated_vs_daly": interval.simulated_optimal_interval / interval.daly,
                "overhead_at_optimum_fraction": min(interval.overhead_simulated),
                "overhead_curve": interval.to_dict(),
            }
        )
        return out


def _median_step(measured: Timeline) -> float | None:
    """Median wall time of one training step (checkpoint writes and lost work excluded)."""
    bounds: dict[int, list[float]] = {}
    for span in measured.spans:
        if span.step is None or span.kind == "checkpoint" or "(lost)" in span.label:
            continue
        lo_hi = bounds.setdefault(span.step, [span.start, span.end])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], span.start), max(lo_hi[1], span.end)
    durations = [hi - lo for lo, hi in bounds.values()]
    return statistics.median(durations) if durations else None


def _duration(name, default, es, en, minimum) -> Param:
    return Param(name, "duration", default, {"es": es, "en": en}, minimum=minimum)


SCENARIO = FailureResume(
    name="failure-resume",
    lesson=3,
    title={"es": "Tolerancia a fallos", "en": "Fault tolerance"},
    summary={
        "es": "Un rango muere, todos vuelven del último punto de control válido y terminan "
        "bit a bit donde habría terminado el entrenamiento sin fallos; y cada cuánto guardar.",
        "en": "A rank dies, every rank comes back from the last valid checkpoint and ends bit "
        "for bit where the uninterrupted run ends; and how often to save.",
    },
    params=(
        int_param("ranks", 4, "rangos (potencia de dos)", "ranks (a power of two)", 1, 8, 64),
        int_param(
            "resume_ranks",
            0,
            "rangos tras un reinicio (0: los mismos)",
            "ranks after a restart (0: the same)",
            0,
            8,
            64,
        ),
        int_param("steps", 30, "pasos de entrenamiento", "training steps", 1, 400, 100_000),
        int_param(
            "checkpoint_every",
            5,
            "pasos entre puntos de control",
            "steps between checkpoints",
            1,
            None,
        ),
        int_param("max_restarts", 3, "reinicios como máximo", "most restarts allowed", 0, 10),
        Param(
            "sharding",
            "choice",
            "ddp",
            {
                "es": "ddp (estado entero en cada rango) o zero1 (estado de Adam repartido)",
                "en": "ddp (whole state on every rank) or zero1 (Adam state sharded)",
            },
            choices=("ddp", "zero1"),
        ),
        int_param("layers", 2, "capas del MiniGPT", "MiniGPT layers", 1, 8, 1024),
        int_param("hidden", 32, "dimensión oculta", "hidden size", 8, 256, 16384),
        int_param("heads", 2, "cabezas de atención", "attention heads", 1, 16, 256),
        int_param("seq", 16, "longitud de secuencia", "sequence length", 4, 128, 65536),
        int_param("vocab", 32, "tamaño del vocabulario", "vocabulary size", 8, 512, 262144),
        int_param(
            "batch",
            16,
            "secuencias por paso (lote global)",
            "sequences per step (global batch)",
            1,
            256,
            65536,
        ),
        int_param(
            "microbatches",
            8,
            "trozos fijos del lote (hojas del árbol de gradientes)",
            "fixed pieces of the batch (leaves of the gradient tree)",
            1,
            64,
        ),
        int_param("seed", 0, "semilla", "seed", 0, 2**31 - 1),
        _duration(
            "mtbf", "3h", "tiempo medio entre fallos, M", "mean time between failures, M", 1e-3
        ),
        _duration(
            "save_cost", "60s", "coste de un punto de control, C", "cost of one checkpoint, C", 1e-6
        ),
        _duration("restart_cost", "0s", "coste de un reinicio, R", "cost of one restart, R", 0.0),
    ),
    narrative=(
        NarrativeStep(
            "exactly",
            {"es": "Qué exige «exactamente»", "en": "What “exactly” requires"},
            {
                "es": "Reanudar bit a bit exige guardar todo el estado que decide el futuro: los "
                "parámetros, los dos momentos de Adam y su contador de pasos, el programa de la tasa "
                "de aprendizaje, el escalado de la pérdida si lo hay, los estados de los generadores "
                "aleatorios (python, numpy, torch) y la posición en los datos (época, lotes "
                "consumidos, el orden barajado). Sin el RNG, el ruido de los datos sería otro; sin la "
                "posición, se repetirían o saltarían lotes: la curva seguiría bajando, pero ya no "
                "sería el mismo entrenamiento. Y el orden de las sumas: aquí el gradiente es una suma "
                "en árbol fijo sobre trozos del lote, no sobre rangos, así que 4 o 2 rangos hacen las "
                "mismas sumas.",
                "en": "Resuming bit for bit requires saving all the state that decides the future: the "
                "parameters, Adam's two moments and its step count, the learning-rate schedule, the "
                "loss scaler if any, the random generators' states (python, numpy, torch) and the "
                "position in the data (epoch, batches consumed, the shuffled order). Without the RNG "
                "the data noise would differ; without the position, batches would repeat or be "
                "skipped: the curve would still go down, but it would no longer be the same run. And "
                "the order of additions: here the gradient is a sum over a fixed tree of pieces of "
                "the batch, not over ranks, so 4 or 2 ranks do the very same additions.",
            },
            formula="state = θ, m, v, t, lr(t), RNG(py, np, torch), (epoch, batch, order)",
            metric="bitwise_equal_to_uninterrupted",
            phases=("train",),
        ),
        NarrativeStep(
            "atomic",
            {"es": "Escrituras atómicas", "en": "Atomic writes"},
            {
                "es": "Un punto de control a medio escribir es peor que ninguno. Cada rango escribe sus "
                "ficheros (tensores en safetensors, el resto en JSON: nada se deserializa con pickle) "
                "en un directorio temporal; cuando todos terminan, el rango 0 escribe un manifiesto con "
                "el SHA-256 de cada fichero y renombra el directorio a su sitio, de una vez. Al "
                "reanudar solo se carga un punto de control cuyo manifiesto cuadra; si el más nuevo "
                "está truncado o corrupto, se usa el anterior y la línea de tiempo dice por qué.",
                "en": "A half-written checkpoint is worse than none. Every rank writes its files "
                "(tensors in safetensors, the rest in JSON: nothing is unpickled) into a temporary "
                "directory; when all are done, rank 0 writes a manifest with the SHA-256 of every "
                "file and renames the directory into place, in one go. On resume only a checkpoint "
                "whose manifest checks out is loaded; if the newest is truncated or corrupt, the "
                "previous one is used and the timeline says why.",
            },
            formula="write tmp/ → fsync → manifest(SHA-256) → rename(tmp, step-k)",
            metric="checkpoint_write_s",
            phases=("checkpoint",),
        ),
        NarrativeStep(
            "restart",
            {"es": "Por qué reiniciar a todos", "en": "Why restart everyone"},
            {
                "es": "Cuando un rango muere, los demás quedan bloqueados en una operación colectiva "
                "con un compañero que ya no existe: su comunicador está roto y su estado ya pasó del "
                "punto de control. Como torchrun, el lanzador detecta la muerte (o el silencio de los "
                "latidos), mata a todos y los arranca de nuevo desde el mismo estado consistente. Se "
                "pierde el trabajo hecho desde el último punto de control, más la detección y el "
                "rearranque.",
                "en": "When one rank dies, the others are stuck in a collective with a peer that no "
                "longer exists: their communicator is broken and their state has moved past the "
                "checkpoint. Like torchrun, the launcher detects the death (or the silent "
                "heartbeats), kills everyone and starts them again from one consistent state. The "
                "work since the last checkpoint is lost, plus detection and restart.",
            },
            formula="lost = steps since checkpoint + detection + restart",
            metric="lost_steps",
            phases=("collective",),
        ),
        NarrativeStep(
            "interval",
            {"es": "Cada cuánto guardar: Young y Daly", "en": "How often to save: Young and Daly"},
            {
                "es": "Guardar a menudo cuesta C cada vez; guardar poco pierde, de media, medio "
                "intervalo por fallo. Young (1974) equilibra ambos: τ ≈ √(2CM). Daly (2006) añade los "
                "términos siguientes (fallos durante el guardado y el rearranque). Una simulación de "
                "Monte Carlo de una ejecución larga con fallos exponenciales traza el sobrecoste en "
                "función de τ: su mínimo cae sobre el de Daly. Tras una ejecución, "
                "daly_checkpoint_every_steps convierte el intervalo de Daly, con el coste de guardar "
                "medido en esta máquina, en un checkpoint_every.",
                "en": "Saving often costs C each time; saving rarely loses, on average, half an "
                "interval per failure. Young (1974) balances the two: τ ≈ √(2CM). Daly (2006) adds the "
                "next terms (failures while saving and restarting). A Monte-Carlo simulation of a long "
                "run with exponential failures traces the overhead as a function of τ: its minimum "
                "lands on Daly's. After a run, daly_checkpoint_every_steps turns Daly's interval, with the "
                "checkpoint cost measured on this machine, into a checkpoint_every.",
            },
            formula="τ_Young = √(2CM) ;  τ_Daly = √(2CM)[1 + ⅓√(C/2M) + (C/2M)/9] − C",
            metric="daly_interval_s",
            phases=("interval",),
        ),
    ),
    rank_entry="scenarios.failure_resume_rank:run_rank",
)
