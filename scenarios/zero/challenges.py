"""Lesson 2's goal and challenges: what each ZeRO stage shards, and what it costs.

Declared beside the lesson's texts (scenarios.goals says what a goal is). The memory
accounting is arithmetic (a prediction meets it); the communication is measured.

Imports: scenarios.goals only.
"""

from __future__ import annotations

from scenarios.goals import Ask, Challenge, Facts, Goal, both

ORDER = ("ddp", "zero1", "zero2", "zero3", "fsdp2")


def _smallest_fitting(facts: Facts) -> str | None:
    for stage in ORDER:
        if facts.value("fits_gpu_memory", stage) is True:
            return stage
    return "none" if facts.by_series("per_device_total_bytes") else None


def _comm_ratio(facts: Facts, predicted: bool = False) -> float | None:
    """ZeRO-3's bytes per rank over DDP's (measured: the largest rank's; or the model's)."""
    if predicted:
        ddp, zero3 = (
            facts.predicted("comm_bytes_per_rank", "ddp"),
            facts.predicted("comm_bytes_per_rank", "zero3"),
        )
    else:
        ddp, zero3 = (
            facts.number("comm_bytes_per_rank", "ddp"),
            facts.number("comm_bytes_per_rank", "zero3"),
        )
    if not isinstance(ddp, int | float) or not isinstance(zero3, int | float) or not ddp:
        return None
    return zero3 / ddp


def _slower(facts: Facts) -> str | None:
    zero3, fsdp2 = facts.measured("makespan_s", "zero3"), facts.measured("makespan_s", "fsdp2")
    if not isinstance(zero3, int | float) or not isinstance(fsdp2, int | float):
        return None
    return "fsdp2" if fsdp2 > zero3 else "zero3"


def _stages(facts: Facts, *stages: str) -> bool:
    return set(stages) <= set(facts.params.stage)


GOAL = Goal(
    outcomes=(
        both(
            "Account for a rank's memory as 2Ψ + 2Ψ + KΨ and say what each ZeRO stage divides by N.",
            "Contar la memoria de un rango como 2Ψ + 2Ψ + KΨ y decir qué divide por N cada etapa de ZeRO.",
        ),
        both(
            "Explain why ZeRO-3 communicates 1.5× what DDP does, and ZeRO-1/2 the same.",
            "Explicar por qué ZeRO-3 comunica 1,5× lo que DDP, y ZeRO-1/2 lo mismo.",
        ),
        both(
            "Recognise FSDP as ZeRO-3.",
            "Reconocer FSDP como ZeRO-3.",
        ),
    ),
    challenges=(
        Challenge(
            "fits-24gb",
            both(
                "A 7B model in mixed precision on 8 ranks of 24 GB: the smallest stage that fits?",
                "Un modelo de 7B en precisión mixta en 8 rangos de 24 GB: ¿la menor etapa que cabe?",
            ),
            both(
                "Answer, then predict params=7B, precision=mixed, ranks=8, gpu_memory=24GB.",
                "Responda y prediga params=7B, precision=mixed, ranks=8, gpu_memory=24GB.",
            ),
            lambda f: (
                f.near("parameters", 7e9) and f.params.gpu_memory == 24e9 and f.params.ranks == 8
            ),
            both("zero3 (14 GB); zero2 needs 26.25 GB.", "zero3 (14 GB); zero2 necesita 26,25 GB."),
            both(
                "Per rank: ddp 16Ψ, zero1 4Ψ+12Ψ/N, zero2 2Ψ+14Ψ/N, zero3 16Ψ/N; Ψ = 7e9, N = 8.",
                "Por rango: ddp 16Ψ, zero1 4Ψ+12Ψ/N, zero2 2Ψ+14Ψ/N, zero3 16Ψ/N; Ψ = 7e9, N = 8.",
            ),
            by="predict",
            ask=Ask(
                both("Smallest stage:", "Menor etapa:"),
                truth=_smallest_fitting,
                choices=(*ORDER[:4], "none"),
            ),
            minutes=10,
        ),
        Challenge(
            "comm",
            both(
                "How many times DDP's bytes does ZeRO-3 send per rank?",
                "¿Cuántas veces los bytes de DDP envía ZeRO-3 por rango?",
            ),
            both(
                "Answer, then run stage=ddp,zero3 (the default runs all).",
                "Responda y ejecute stage=ddp,zero3 (por defecto se ejecutan todas).",
            ),
            lambda f: _stages(f, "ddp", "zero3"),
            both("1.5×.", "1,5×."),
            both(
                "DDP: reduce-scatter + all-gather of the gradients (2Ψ); ZeRO-3 adds an "
                "all-gather of the parameters in the backward (3Ψ).",
                "DDP: reduce-scatter + all-gather de los gradientes (2Ψ); ZeRO-3 añade un "
                "all-gather de los parámetros en el backward (3Ψ).",
            ),
            ask=Ask(
                both("ZeRO-3 ÷ DDP:", "ZeRO-3 ÷ DDP:"),
                truth=_comm_ratio,
                model=lambda f: _comm_ratio(f, predicted=True),
                tolerance=0.05,
            ),
            minutes=8,
        ),
        Challenge(
            "zero2-shards",
            both(
                "What does ZeRO-2 shard that ZeRO-1 does not? (params/grads/optimizer)",
                "¿Qué reparte ZeRO-2 que ZeRO-1 no? (params/grads/optimizer)",
            ),
            both(
                "Answer, then run stage=zero1,zero2 and compare the Memory tab.",
                "Responda y ejecute stage=zero1,zero2; compare la pestaña Memoria.",
            ),
            lambda f: _stages(f, "zero1", "zero2") and (f.number("peak_bytes", "zero2") or 0) > 0,
            both("grads.", "grads (los gradientes)."),
            both(
                "ZeRO-1 shards Adam's state; ZeRO-2 also reduce-scatters the gradients.",
                "ZeRO-1 reparte el estado de Adam; ZeRO-2 además hace reduce-scatter de los "
                "gradientes.",
            ),
            ask=Ask(
                both("Sharded by ZeRO-2 only:", "Solo ZeRO-2 reparte:"),
                truth=lambda f: "grads",
                choices=("params", "grads", "optimizer"),
            ),
            minutes=6,
        ),
        Challenge(
            "fsdp",
            both(
                "FSDP2 against the hand-written ZeRO-3: which step is slower here? (zero3/fsdp2)",
                "FSDP2 frente a ZeRO-3 escrito a mano: ¿cuál tarda más por paso aquí? (zero3/fsdp2)",
            ),
            both(
                "Answer, then run stage=zero3,fsdp2.",
                "Responda y ejecute stage=zero3,fsdp2.",
            ),
            lambda f: _stages(f, "zero3", "fsdp2"),
            both(
                "Usually fsdp2: torch's general machinery costs more on a model this small.",
                "Normalmente fsdp2: la maquinaria general de torch cuesta más en un modelo "
                "tan pequeño.",
            ),
            both(
                "Same algorithm, same bytes; the difference is overhead per collective.",
                "Mismo algoritmo, mismos bytes; la diferencia es el coste fijo por colectiva.",
            ),
            ask=Ask(
                both("Slower:", "Más lento:"),
                truth=_slower,
                choices=("zero3", "fsdp2"),
            ),
            minutes=8,
        ),
        Challenge(
            "seventy-b",
            both(
                "70B on 8 ranks of 80 GB: does any stage fit? (yes/no)",
                "70B en 8 rangos de 80 GB: ¿cabe alguna etapa? (yes/no)",
            ),
            both(
                "Answer, then predict params=70B, precision=mixed, ranks=8, gpu_memory=80GB.",
                "Responda y prediga params=70B, precision=mixed, ranks=8, gpu_memory=80GB.",
            ),
            lambda f: (
                f.near("parameters", 70e9) and f.params.gpu_memory == 80e9 and f.params.ranks == 8
            ),
            both(
                "No: even ZeRO-3 needs 140 GB per rank.",
                "No: incluso ZeRO-3 necesita 140 GB por rango.",
            ),
            both(
                "16Ψ/N = 16 × 70e9 / 8; more ranks, or TP/PP to cut activations, or offload.",
                "16Ψ/N = 16 × 70e9 / 8; más rangos, TP/PP para recortar activaciones, o "
                "descargar a CPU.",
            ),
            by="predict",
            ask=Ask(
                both("Any stage fits? (yes/no)", "¿Cabe alguna etapa? (yes/no)"),
                truth=lambda f: (
                    None
                    if _smallest_fitting(f) is None
                    else "no"
                    if _smallest_fitting(f) == "none"
                    else "yes"
                ),
                choices=("yes", "no"),
            ),
            minutes=6,
        ),
    ),
    discuss=(
        both(
            "Activations are not sharded by any ZeRO stage: what is?",
            "Ninguna etapa de ZeRO reparte las activaciones: ¿qué se hace con ellas?",
        ),
        both(
            "When is ZeRO-3's extra 50% of communication worth it?",
            "¿Cuándo compensa el 50% de comunicación extra de ZeRO-3?",
        ),
    ),
    timings=(
        (both("Narrative, step by step (n)", "Narrativa, paso a paso (n)"), 20),
        (both("Challenges", "Retos"), 40),
        (both("Discussion", "Discusión"), 15),
    ),
)
