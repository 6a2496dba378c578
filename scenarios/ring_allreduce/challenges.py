"""Lesson 1's goal and challenges: the bytes a ring sends, and what its time is made of.

Declared beside the lesson's texts (scenarios.goals says what a goal is): each challenge
is a predicate over a real run's metrics, some asking the learner's number first.

Imports: scenarios.goals only.
"""

from __future__ import annotations

from scenarios.goals import Ask, Challenge, Facts, Goal, both

MiB = 1 << 20


def _ring(facts: Facts, ranks: int) -> bool:
    return facts.params.algorithm == "ring" and facts.params.ranks == ranks


GOAL = Goal(
    outcomes=(
        both(
            "Explain why each rank of a ring all-reduce sends 2(N−1)/N of its buffer, "
            "whatever the number of ranks N.",
            "Explicar por qué cada rango de un all-reduce en anillo envía 2(N−1)/N de su "
            "búfer, sea cual sea el número de rangos N.",
        ),
        both(
            "Point at the reduce-scatter and the all-gather on the timeline.",
            "Señalar el reduce-scatter y el all-gather en la línea de tiempo.",
        ),
        both(
            "Tell a latency-bound all-reduce (small buffers) from a bandwidth-bound one, "
            "with the bus bandwidth.",
            "Distinguir un all-reduce limitado por la latencia (búferes pequeños) de uno "
            "limitado por el ancho de banda, con el ancho de banda de bus.",
        ),
    ),
    challenges=(
        Challenge(
            "bytes-4",
            both(
                "With 4 ranks and a 4 MiB buffer, how many bytes does each rank send?",
                "Con 4 rangos y un búfer de 4 MiB, ¿cuántos bytes envía cada rango?",
            ),
            both(
                "Answer first (g), then run ranks=4, size=4MiB, algorithm=ring.",
                "Responda primero (g); después ejecute ranks=4, size=4MiB, algorithm=ring.",
            ),
            lambda f: _ring(f, 4) and f.params.size == 4 * MiB,
            both("6 MiB = 6,291,456 bytes.", "6 MiB = 6.291.456 bytes."),
            both(
                "Reduce-scatter sends N−1 chunks of size/N, all-gather N−1 more: 2·3/4 × 4 MiB.",
                "El reduce-scatter envía N−1 trozos de size/N y el all-gather otros N−1: "
                "2·3/4 × 4 MiB.",
            ),
            ask=Ask(
                both("Bytes each rank sends:", "Bytes que envía cada rango:"),
                truth=lambda f: f.number("bytes_sent_per_rank"),
                model=lambda f: f.predicted("bytes_sent_per_rank"),
                tolerance=0.02,
            ),
            minutes=8,
        ),
        Challenge(
            "bytes-8",
            both(
                "Now 8 ranks, same buffer: does each rank send twice as much? (yes/no)",
                "Ahora 8 rangos y el mismo búfer: ¿envía cada rango el doble? (yes/no)",
            ),
            both(
                "Answer, then run ranks=8, size=4MiB; compare bytes_sent_per_rank.",
                "Responda y ejecute ranks=8, size=4MiB; compare bytes_sent_per_rank.",
            ),
            lambda f: _ring(f, 8) and f.params.size == 4 * MiB,
            both(
                "No: 7 MiB, only 1/6 more than with 4 ranks.",
                "No: 7 MiB, solo 1/6 más que con 4 rangos.",
            ),
            both(
                "2(N−1)/N tends to 2: a ring's bytes per rank hardly grow with N, which is "
                "why it scales.",
                "2(N−1)/N tiende a 2: los bytes por rango de un anillo apenas crecen con N; "
                "por eso escala.",
            ),
            ask=Ask(
                both("Twice as much? (yes/no)", "¿El doble? (yes/no)"),
                truth=lambda f: (
                    "yes" if (f.number("bytes_sent_per_rank") or 0) >= 2 * 6 * MiB * 0.99 else "no"
                ),
                choices=("yes", "no"),
            ),
            minutes=6,
        ),
        Challenge(
            "latency",
            both(
                "With a 4 KiB buffer on 4 ranks, how many milliseconds does one all-reduce take?",
                "Con un búfer de 4 KiB en 4 rangos, ¿cuántos milisegundos tarda un all-reduce?",
            ),
            both(
                "Answer within a factor of 2, then run size=4KiB: 2(N−1) steps of latency α.",
                "Responda con un margen de factor 2 y ejecute size=4KiB: 2(N−1) pasos de "
                "latencia α.",
            ),
            lambda f: f.params.size <= 4096 and f.params.ranks == 4,
            both(
                "About 2(N−1)·α: a few tenths of a millisecond on one machine's loopback.",
                "Unos 2(N−1)·α: unas décimas de milisegundo en el loopback de una máquina.",
            ),
            both(
                "At 4 KiB the bytes cost nothing: the 6 hops' latency is the time.",
                "Con 4 KiB los bytes no cuestan nada: la latencia de los 6 saltos es el tiempo.",
            ),
            ask=Ask(
                both("Milliseconds per all-reduce:", "Milisegundos por all-reduce:"),
                truth=lambda f: _ms(f.measured("time_s")),
                model=lambda f: _ms(f.predicted("time_s")),
                tolerance=0.5,
            ),
            minutes=8,
        ),
        Challenge(
            "busbw",
            both(
                "Find a buffer size at which your ring's bus bandwidth reaches 80% of torch's.",
                "Encuentre un tamaño de búfer con el que el ancho de banda de bus de su anillo "
                "llegue al 80% del de torch.",
            ),
            both(
                "Grow size (16MiB, 64MiB): the latency is paid once per hop, the bytes scale.",
                "Aumente size (16MiB, 64MiB): la latencia se paga una vez por salto; los bytes "
                "escalan.",
            ),
            lambda f: f.params.algorithm == "ring" and (f.number("busbw_vs_builtin") or 0) >= 0.8,
            both(
                "Usually from a few MiB up, on this machine.",
                "Normalmente a partir de unos pocos MiB, en esta máquina.",
            ),
            both(
                "busbw = size/t × 2(N−1)/N: it approaches the link's bandwidth once α is "
                "small beside the bytes.",
                "busbw = size/t × 2(N−1)/N: se acerca al del enlace cuando α es pequeño "
                "frente a los bytes.",
            ),
            minutes=10,
        ),
    ),
    discuss=(
        both(
            "Why does NCCL report bus bandwidth and not the algorithm bandwidth?",
            "¿Por qué NCCL informa del ancho de banda de bus y no del del algoritmo?",
        ),
        both(
            "What happens to a ring when one rank is slow (the straggler step)?",
            "¿Qué le pasa a un anillo cuando un rango es lento (el paso del rezagado)?",
        ),
    ),
    timings=(
        (both("Narrative, step by step (n)", "Narrativa, paso a paso (n)"), 20),
        (both("Challenges", "Retos"), 35),
        (both("Discussion", "Discusión"), 20),
    ),
)


def _ms(seconds: object) -> float | None:
    return seconds * 1e3 if isinstance(seconds, int | float) else None
