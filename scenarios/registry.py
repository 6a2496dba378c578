"""The registry of lessons and their scenarios, in the order the course teaches them.

Every lesson of the unit is listed, built or not: the app's home screen and
`playground list` show the ones still to come as such, rather than hiding them.

Imports: scenario definitions only (no torch).
"""

from __future__ import annotations

from scenarios import failure_resume, pipeline, ring_allreduce, zero
from scenarios.base import LessonInfo, Scenario

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        ring_allreduce.SCENARIO,
        zero.SCENARIO,
        failure_resume.SCENARIO,
        pipeline.SCENARIO,
    )
}

_PLANNED = [
    (
        0,
        "why-distribute",
        "¿Por qué distribuir?",
        "Why distribute at all",
        "Presión de memoria o de tiempo, y el coste de un experimento en la nube.",
        "Memory pressure vs time pressure, and the cost of a cloud experiment.",
    ),
    (
        2,
        "zero",
        "ZeRO y FSDP",
        "ZeRO and FSDP",
        "Dónde va la memoria del entrenamiento y qué quita cada etapa de ZeRO.",
        "Where training memory goes and what each ZeRO stage removes.",
    ),
    (
        3,
        "failure-resume",
        "Tolerancia a fallos",
        "Fault tolerance",
        "Punto de control, fallo y reanudación exacta; cada cuánto guardar.",
        "Checkpoint, fail, resume exactly; how often to save.",
    ),
    (
        4,
        "tensor-parallel",
        "Paralelismo de tensores",
        "Tensor parallelism",
        "Un bloque Transformer entero partido entre GPUs a la Megatron.",
        "A whole Transformer block split across GPUs, Megatron style.",
    ),
    (
        5,
        "pipeline",
        "Planificaciones de pipeline",
        "Pipeline schedules",
        "GPipe, 1F1B, intercalado y zero-bubble: burbujas y memoria.",
        "GPipe, 1F1B, interleaved and zero-bubble: bubbles and memory.",
    ),
    (
        6,
        "mixed-precision",
        "Precisión mixta y buckets",
        "Mixed precision and bucketing",
        "Escalado de la pérdida y buckets de DDP que solapan la comunicación.",
        "Loss scaling and DDP buckets that overlap communication.",
    ),
    (
        7,
        "inference",
        "Inferencia distribuida",
        "Distributed inference",
        "Decodificación TP/PP, caché KV, réplicas y un SLO de latencia.",
        "TP/PP decode, KV cache, replicas and a latency SLO.",
    ),
]


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(
            f"unknown scenario {name!r}; available: {', '.join(sorted(SCENARIOS))}"
        ) from None


def lessons() -> list[LessonInfo]:
    """Every lesson of the unit, in course order, built or still to come."""
    out = [LessonInfo(s.lesson, s.name, s.title, s.summary, True) for s in SCENARIOS.values()]
    for lesson, name, es, en, sum_es, sum_en in _PLANNED:
        if name not in SCENARIOS:
            out.append(
                LessonInfo(lesson, name, {"es": es, "en": en}, {"es": sum_es, "en": sum_en}, False)
            )
    return sorted(out, key=lambda info: info.lesson)
