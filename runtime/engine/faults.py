"""Fault specs: what `--fault` can break, parsed in the parent, injected for real in a rank.

    kill:rank=R,after=0.5s         SIGKILL rank R 0.5 s after it starts
    hang:rank=R,after=1s           SIGSTOP rank R (it stops answering, heartbeat too)
    kill:rank=R,step=K             SIGKILL rank R in the middle of training step K
    hang:rank=R,step=K             SIGSTOP rank R in the middle of training step K
    kill:rank=R,during=checkpoint  SIGKILL rank R half-way through writing a checkpoint
                                   (the second one of the run, or the one at step=K)
    corrupt:checkpoint=latest      flip bytes of the newest checkpoint once it is written,
                                   so the restart after a failure must fall back
    slow:rank=R,factor=F           a straggler: rank R's local compute takes F times as
                                   long (after each compute it sleeps F−1 times what the
                                   compute took: no busy loop, its cores go to the others)
    overflow:step=K[,rank=R]       an inf in rank R's (default 0) gradients in training
                                   step K, just before they are all-reduced: a lesson
                                   with a loss scaler must skip the step

Several `--fault` flags may be given. Parsed here (pure), carried to the ranks
as Fault records: time-based faults are fired by runtime.engine.worker's timers,
step-based ones by the training loop of a lesson that has steps (it reads
them from RankContext.faults: failure-resume's rank code), and `corrupt`
by the restart supervisor (runtime.engine.supervise) on the checkpoint directory, and
`slow` by runtime.engine.worker.RankContext.execute around every compute Action (the
simulator slows the same rank: CostModel.slow, `slowed`), and `overflow` by
the training loop of a lesson with a loss scaler (it reads RankContext.faults;
the rank survives it: only the step's gradients are hit). A
kill is SIGKILL and a hang SIGSTOP of the real rank process: what a crashed
host and a wedged GPU or NCCL call look like from outside. The launcher
(runtime.engine.launch) must notice, name the rank and tear every rank down.

In docs/design.md's picture: runtime, pure part (stdlib only).
"""

from __future__ import annotations

import math
import os
import signal
import threading
from dataclasses import asdict, dataclass, replace

from runtime.sim.units import parse_duration

# Each kind: the field sets it accepts (one of them must match exactly).
FAULT_FORMS: dict[str, tuple[frozenset[str], ...]] = {
    "kill": (
        frozenset({"rank", "after"}),
        frozenset({"rank", "step"}),
        frozenset({"rank", "during"}),
        frozenset({"rank", "during", "step"}),
    ),
    "hang": (frozenset({"rank", "after"}), frozenset({"rank", "step"})),
    "corrupt": (frozenset({"checkpoint"}),),
    "slow": (frozenset({"rank", "factor"}),),
    "overflow": (frozenset({"step"}), frozenset({"step", "rank"})),
}
# A timed fault fires within a run's lifetime; later would never fire (and 1e400s is inf).
MAX_AFTER_S = 3600.0
# A straggler at most this many times slower: past it a run only waits.
MAX_SLOW_FACTOR = 100.0
USAGE = (
    "use kill:rank=R,after=0.5s, hang:rank=R,after=1s, kill:rank=R,step=K, "
    "kill:rank=R,during=checkpoint, corrupt:checkpoint=latest, slow:rank=R,factor=F "
    "or overflow:step=K,rank=R"
)
USAGE_ES = (
    "use kill:rank=R,after=0.5s, hang:rank=R,after=1s, kill:rank=R,step=K, "
    "kill:rank=R,during=checkpoint, corrupt:checkpoint=latest, slow:rank=R,factor=F "
    "u overflow:step=K,rank=R"
)


class FaultError(ValueError):
    """A --fault spec refused: `str(exc)` is the English line (tests and scripts read it),
    `es` the same line in Spanish, for the front ends to print in the learner's language
    (runtime imports no catalog: the two texts travel together, as a ParamError's do)."""

    def __init__(self, message: str, es: str):
        super().__init__(message)
        self.es = es
        self.field: str | None = None


def _malformed(spec: str, why: str = "", why_es: str = "") -> FaultError:
    """`malformed --fault SPEC: WHY` (the usage when no reason is given), in both languages."""
    return FaultError(
        f"malformed --fault {spec!r}: {why or USAGE}",
        f"--fault {spec!r} mal formado: {why_es or USAGE_ES}",
    )


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int | None
    after_s: float | None = None
    step: int | None = None
    during: str | None = None
    checkpoint: str | None = None
    factor: float | None = None  # slow: how many times slower the rank's compute is
    index: int = 0  # its place among the run's --fault flags: names its fired record

    @property
    def timed(self) -> bool:
        """Fired by a timer from the rank's start (the foundation's faults)."""
        return self.after_s is not None

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.kind == "corrupt":
            return f"corrupt:checkpoint={self.checkpoint}"
        parts = [f"rank={self.rank}"]
        if self.after_s is not None:
            parts.append(f"after={self.after_s:g}s")
        if self.step is not None:
            parts.append(f"step={self.step}")
        if self.during is not None:
            parts.append(f"during={self.during}")
        if self.factor is not None:
            parts.append(f"factor={self.factor:g}")
        return f"{self.kind}:{','.join(parts)}"


def parse_faults(specs: list[str], world_size: int) -> list[Fault]:
    """Every --fault flag of a run, each numbered by its place."""
    return [replace(parse_fault(spec, world_size), index=i) for i, spec in enumerate(specs)]


def parse_fault(spec: str, world_size: int) -> Fault:
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in FAULT_FORMS:
        raise _malformed(spec)
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.partition("=")
        if not eq or not value:
            raise _malformed(spec)
        if key.strip() in fields:  # kill:rank=0,rank=1: which one was meant? never last-wins
            raise _malformed(
                spec,
                f"{key.strip()} is given twice; give each field once",
                f"{key.strip()} aparece dos veces; dé cada campo una sola vez",
            )
        fields[key.strip()] = value.strip()
    forms = FAULT_FORMS[kind]
    if frozenset(fields) not in forms:
        takes = " or ".join(",".join(sorted(form)) for form in forms)
        toma = " o ".join(",".join(sorted(form)) for form in forms)
        raise _malformed(spec, f"{kind} takes {takes}; {USAGE}", f"{kind} lleva {toma}; {USAGE_ES}")
    if kind == "corrupt":
        if fields["checkpoint"] != "latest":
            raise FaultError(
                f"--fault {spec!r}: only checkpoint=latest can be corrupted",
                f"--fault {spec!r}: solo se puede corromper checkpoint=latest",
            )
        return Fault(kind, None, checkpoint="latest")
    try:
        rank = int(fields.get("rank", "0"))  # only overflow may leave it out: rank 0
    except ValueError:
        raise _malformed(spec, "rank must be an integer", "rank debe ser un entero") from None
    if not 0 <= rank < world_size:
        raise FaultError(
            f"--fault {spec!r}: rank must be in 0..{world_size - 1} for {world_size} ranks",
            f"--fault {spec!r}: rank debe estar en 0..{world_size - 1} para {world_size} rangos",
        )
    if kind == "slow":
        return Fault(kind, rank, factor=_factor(spec, fields["factor"]))
    after = step = None
    if "after" in fields:
        try:
            after = parse_duration(fields["after"])
        except ValueError as exc:
            raise _malformed(
                spec, str(exc), "after debe ser una duración con unidad, p. ej. 0.5s, 90s"
            ) from None
        if not 0 <= after <= MAX_AFTER_S:  # NaN fails both comparisons
            raise FaultError(
                f"--fault {spec!r}: after must be a duration from 0s to {MAX_AFTER_S:g}s",
                f"--fault {spec!r}: after debe ser una duración de 0s a {MAX_AFTER_S:g}s",
            )
    if "step" in fields:
        try:
            step = int(fields["step"])
        except ValueError:
            raise _malformed(spec, "step must be an integer", "step debe ser un entero") from None
        if not 1 <= step <= 10**9:
            raise FaultError(
                f"--fault {spec!r}: step must be from 1 (steps count from 1)",
                f"--fault {spec!r}: step debe ser al menos 1 (los pasos se cuentan desde 1)",
            )
    during = fields.get("during")
    if during is not None and during != "checkpoint":
        raise FaultError(
            f"--fault {spec!r}: during must be checkpoint",
            f"--fault {spec!r}: during debe ser checkpoint",
        )
    return Fault(kind, rank, after, step, during)


def _factor(spec: str, text: str) -> float:
    """A slow fault's factor: a finite number from 1 (as fast) to MAX_SLOW_FACTOR."""
    try:
        factor = float(text)
    except ValueError:
        raise _malformed(spec, "factor must be a number", "factor debe ser un número") from None
    if not (math.isfinite(factor) and 1.0 <= factor <= MAX_SLOW_FACTOR):
        raise FaultError(
            f"--fault {spec!r}: factor must be a number from 1 to {MAX_SLOW_FACTOR:g} "
            "(how many times slower the rank computes)",
            f"--fault {spec!r}: factor debe ser un número de 1 a {MAX_SLOW_FACTOR:g} "
            "(cuántas veces más lento calcula el rango)",
        )
    return factor


def slow_factors(faults: list[Fault]) -> dict[int, float]:
    """Rank -> how many times slower its compute is (several slow faults multiply)."""
    out: dict[int, float] = {}
    for fault in faults:
        if fault.kind == "slow" and fault.rank is not None and fault.factor is not None:
            out[fault.rank] = out.get(fault.rank, 1.0) * fault.factor
    return out


# A timed fault may fire this many times the predicted run time, plus the margin, after
# its rank starts (a loaded machine runs slower than predicted); later, it never fires.
REACH_FACTOR = 10.0
REACH_MARGIN_S = 10.0


def refuse_unreachable(faults: list[Fault], predicted_s: float) -> None:
    """A timed fault the run will not live to fire is refused before any rank starts
    (`predicted_s`: the run's predicted time), not silently never fired."""
    reach = REACH_FACTOR * predicted_s + REACH_MARGIN_S
    for fault in faults:
        if fault.after_s is not None and fault.after_s > reach:
            spec, took = fault.describe(), f"{predicted_s:.3g}"
            raise FaultError(
                f"--fault {spec!r}: the run is predicted to take {took} s, so after="
                f"{fault.after_s:g}s would never fire; give after up to {reach:.3g}s",
                f"--fault {spec!r}: se predice que la ejecución dura {took} s, así que after="
                f"{fault.after_s:g}s nunca se dispararía; dé after hasta {reach:.3g}s",
            )


# Only a lesson with a loss scaler can honour an overflow (it skips the step): such a
# lesson accepts it in its own `check_faults` hook; the others refuse it with this.
NEEDS_SCALER = "an overflow needs a loss scaler to skip the step, and this lesson has none"
NEEDS_SCALER_ES = (
    "un overflow necesita un escalador de pérdida que salte el paso, y esta lección no lo tiene"
)


def refuse_overflow(faults: list[Fault]) -> None:
    """For lessons without a loss scaler: an overflow fault would never fire there."""
    for fault in faults:
        if fault.kind == "overflow":
            spec = fault.describe()
            raise FaultError(
                f"--fault {spec!r}: {NEEDS_SCALER}", f"--fault {spec!r}: {NEEDS_SCALER_ES}"
            )


def require_timed(faults: list[Fault]) -> None:
    """For scenarios without training steps or checkpoints: only time-based faults (and a
    slow rank, which every lesson honours) mean something there, so the others are
    refused rather than silently never fired."""
    refuse_overflow(faults)
    for fault in faults:
        if not fault.timed and fault.kind != "slow":
            spec = fault.describe()
            raise FaultError(
                f"--fault {spec!r}: step, checkpoint and corrupt faults need a "
                "scenario with training steps and checkpoints (failure-resume); "
                "use kill:rank=R,after=0.5s, hang:rank=R,after=1s or slow:rank=R,factor=F here",
                f"--fault {spec!r}: los fallos por paso, por punto de control y corrupt "
                "necesitan un escenario con pasos de entrenamiento y puntos de control "
                "(failure-resume); aquí use kill:rank=R,after=0.5s, hang:rank=R,after=1s o "
                "slow:rank=R,factor=F",
            )


def schedule_timed_faults(faults: list[Fault], rank: int) -> None:
    """Faults that fire after a time (kill or hang `after_s`): a timer in this rank
    process sends it SIGKILL or SIGSTOP."""
    for fault in faults:
        if fault.rank != rank or fault.after_s is None:
            continue  # step and checkpoint faults are fired by the rank code (ctx.faults)
        sig = signal.SIGKILL if fault.kind == "kill" else signal.SIGSTOP
        timer = threading.Timer(fault.after_s, os.kill, args=(os.getpid(), sig))
        timer.daemon = True
        timer.start()
