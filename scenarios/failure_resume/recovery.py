"""Lesson 3's faults and what a run with failures measured.

Part of lesson 3 (scenarios.failure_resume.lesson reads it for its hooks and
metrics): the `check_faults` hook (which `--fault` specs this lesson honours, against its
steps and checkpoints) and the metrics of a real run: the restart
supervisor's typed account (runtime.engine.restart.RestartReport), the final state
against the uninterrupted rerun (the ranks' ResumeResult), and the
mean step period and the median checkpoint write read off a timeline (measured or predicted,
lost work left out).

Imports: runtime's pure part, the lesson contract and the lesson's params (the UI
imports this).
"""

from __future__ import annotations

import statistics

from runtime.engine.faults import Fault, refuse_overflow
from runtime.engine.restart import RestartReport, is_lost
from runtime.sim.trace import Timeline
from scenarios.failure_resume.params import ResumeParams, ResumeResult
from scenarios.metrics import Metric
from scenarios.params import ParamError


def check_faults(params: ResumeParams, faults: list[Fault]) -> None:
    """Faults against this run's steps and checkpoints (ranks are checked when parsed)."""
    steps, saves = params.steps, params.checkpoint_steps
    refuse_overflow(faults)  # no loss scaler here: it would never fire
    for fault in faults:
        spec = fault.describe()
        if fault.step is not None and not 1 <= fault.step <= steps:
            raise ParamError(
                None,
                f"--fault {spec!r}: step must be in 1..{steps} (steps={steps})",
                es=f"--fault {spec!r}: step debe estar en 1..{steps} (steps={steps})",
            )
        if fault.during == "checkpoint":
            if not saves:
                raise ParamError(
                    None,
                    f"--fault {spec!r}: no checkpoint is written (checkpoint_every="
                    f"{params.checkpoint_every} > steps={steps})",
                    es=f"--fault {spec!r}: no se escribe ningún punto de control "
                    f"(checkpoint_every={params.checkpoint_every} > steps={steps})",
                )
            if fault.step is not None and fault.step not in saves:
                written = ", ".join(map(str, saves[:6])) + ("…" if len(saves) > 6 else "")
                raise ParamError(
                    None,
                    f"--fault {spec!r}: no checkpoint at step {fault.step}; checkpoints "
                    f"are written at steps {written}",
                    es=f"--fault {spec!r}: no hay punto de control en el paso {fault.step}; "
                    f"se escriben en los pasos {written}",
                )
    failing = (f for f in faults if f.rank is not None and f.kind != "slow")
    later = sorted(failing, key=lambda f: f.step or 0)[1:]
    shrunk = params.resume_ranks
    for fault in later:
        if shrunk and fault.rank is not None and fault.rank >= shrunk:
            raise ParamError(
                None,
                f"--fault {fault.describe()!r}: after the first restart the run has "
                f"resume_ranks={shrunk} ranks, so a later fault must name a rank in "
                f"0..{shrunk - 1}",
                es=f"--fault {fault.describe()!r}: tras el primer reinicio la ejecución tiene "
                f"resume_ranks={shrunk} rangos, así que un fallo posterior debe nombrar un "
                f"rango de 0..{shrunk - 1}",
            )
    if any(f.kind == "corrupt" for f in faults) and not any(
        f.kind not in ("corrupt", "slow") for f in faults
    ):
        raise ParamError(
            None,
            "--fault 'corrupt:checkpoint=latest' only matters when a failure forces a "
            "restart: add a failure too, e.g. --fault kill:rank=1,step=12",
            es="--fault 'corrupt:checkpoint=latest' solo importa cuando un fallo obliga a "
            "reiniciar: añada también un fallo, p. ej. --fault kill:rank=1,step=12",
        )


def restart_metrics(report: RestartReport | None) -> list[Metric]:
    """The supervisor's account (None when something else restarted the run: torchrun)."""
    failures = report.failures if report is not None else []
    detections = [f.detection_s for f in failures if f.detection_s is not None]
    restarts = [f.restart_s for f in failures if f.restart_s is not None]
    known = report is not None
    return [
        Metric("restarts", "count", report.restarts if known else None),
        Metric("lost_steps", "count", report.lost_steps if known else None),
        Metric("detection_s", "s", statistics.fmean(detections) if detections else None),
        Metric("restart_s", "s", statistics.fmean(restarts) if restarts else None),
        Metric(
            "resumed_from_steps",
            "count",
            [f.resumed_from_step for f in failures] if known else None,
        ),
        Metric("world_sizes", "count", list(report.world_sizes) if known else None),
    ]


def state_metrics(results: list[ResumeResult]) -> list[Metric]:
    """The final state against the uninterrupted rerun, and its fingerprints."""
    first = results[0]
    return [
        Metric("bitwise_equal_to_uninterrupted", "flag", all(r.bitwise_equal for r in results)),
        Metric("parameters_sha256", "text", first.parameters_sha256),
        Metric("optimizer_sha256", "text", first.optimizer_sha256),
        Metric("final_loss", "number", first.final_loss),
        Metric("final_loss_uninterrupted", "number", first.final_loss_uninterrupted),
    ]


def step_period(timeline: Timeline) -> float | None:
    """Wall time of one training step as the run flows: from the last rank out of a step
    to the last rank out of the next, the mean over the run's steps. The ranks start a
    step unevenly (one still finishing the last step's ring), so first rank in to last
    rank out would count that skew twice, once in each step; the period between steps is
    what a step costs, and the mean is what Young's and Daly's t_step means (a run pays
    the sum of its steps), and the prediction after a run builds it from its spans' sums,
    which the mean matches and a median would not. A pair around a checkpoint write or
    lost work is left out; a run of one step is measured first rank in to last rank out."""
    bounds: dict[int, list[float]] = {}
    saved: set[int] = set()
    lost: set[int] = set()
    for span in timeline.spans:
        if span.step is None:
            continue
        if span.kind == "checkpoint" or is_lost(span):
            (saved if span.kind == "checkpoint" else lost).add(span.step)
            continue
        lo_hi = bounds.setdefault(span.step, [span.start, span.end])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], span.start), max(lo_hi[1], span.end)
    periods = [
        bounds[k + 1][1] - bounds[k][1]
        for k in bounds
        if k + 1 in bounds and k not in saved and not {k, k + 1} & lost
    ]
    if periods:
        return statistics.fmean(periods)
    durations = [hi - lo for lo, hi in bounds.values()]
    return statistics.median(durations) if durations else None


def median_checkpoint(timeline: Timeline) -> float | None:
    """Median time one rank spends writing a checkpoint (a write a failure later threw
    away counts too: it was written whole)."""
    durations = [s.duration for s in timeline.spans if s.kind == "checkpoint"]
    return statistics.median(durations) if durations else None
