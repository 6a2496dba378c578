"""Lesson 7's goal and challenges: prefill and decode, the KV cache, SLOs and goodput.

Declared beside the lesson's texts (scenarios.goals says what a goal is): each challenge
is a predicate over a real run's metrics, some asking the learner's number first.

Imports: scenarios.goals only.
"""

from __future__ import annotations

from scenarios.goals import Ask, Challenge, Facts, Goal, both


def _longer(facts: Facts) -> str | None:
    ttft, tpot = facts.number("ttft_p50_s"), facts.number("tpot_p50_s")
    if ttft is None or tpot is None:
        return None
    return "ttft" if ttft > tpot else "tpot"


def _meets_both(facts: Facts) -> bool:
    series = {m.series for m in facts.metrics if m.name == "meets_slo"}
    return any(facts.measured("meets_slo", s) is True for s in series)


GOAL = Goal(
    outcomes=(
        both(
            "Tell prefill (compute-bound, sets TTFT) from decode (memory-bound, sets TPOT).",
            "Distinguir el prefill (limitado por cómputo, fija el TTFT) del decode (limitado "
            "por memoria, fija el TPOT).",
        ),
        both(
            "Explain the KV cache in blocks and what continuous batching changes.",
            "Explicar la caché KV en bloques y lo que cambia el batching continuo.",
        ),
        both(
            "Choose a serving config that meets both SLOs, and read goodput.",
            "Elegir una configuración de servicio que cumpla ambos SLO, y leer el goodput.",
        ),
    ),
    challenges=(
        Challenge(
            "ttft-tpot",
            both(
                "Which is longer at the defaults, TTFT or TPOT? (ttft/tpot)",
                "¿Qué es más largo con los valores por defecto, TTFT o TPOT? (ttft/tpot)",
            ),
            both("Answer, then run the defaults.", "Responda y ejecute los valores por defecto."),
            lambda f: f.ran,
            both(
                "ttft: it includes the prefill and the queue.",
                "ttft: incluye el prefill y la cola.",
            ),
            both(
                "The first token waits for the whole prompt (and any queue); each next one is "
                "one decode step.",
                "El primer token espera a todo el prompt (y a la cola); cada siguiente es un "
                "paso de decode.",
            ),
            ask=Ask(
                both("Longer:", "Más largo:"),
                truth=_longer,
                choices=("ttft", "tpot"),
            ),
            minutes=6,
        ),
        Challenge(
            "tp-collectives",
            both(
                "With TP over 2 ranks, how many collectives does one decode step take?",
                "Con TP en 2 rangos, ¿cuántas colectivas hace un paso de decode?",
            ),
            both("Answer, then run mode=tp.", "Responda y ejecute mode=tp."),
            lambda f: "tp" in f.params.mode,
            both("2 per layer, and one for the logits.", "2 por capa, y una para los logits."),
            both(
                "Every token pays TP's all-reduces: fine inside a node, costly across nodes.",
                "Cada token paga los all-reduce de TP: bien dentro de un nodo, caro entre nodos.",
            ),
            ask=Ask(
                both("Collectives per decode step:", "Colectivas por paso de decode:"),
                truth=lambda f: f.number("collectives_per_decode_step", "tp"),
                model=lambda f: f.predicted("collectives_per_decode_step", "tp"),
                tolerance=0.0,
            ),
            minutes=8,
        ),
        Challenge(
            "kv-waste",
            both(
                "With blocks of 8 positions, what fraction of the KV cache is wasted?",
                "Con bloques de 8 posiciones, ¿qué fracción de la caché KV se desperdicia?",
            ),
            both(
                "Answer within 0.05, then run kv_block=8; compare kv_block=32.",
                "Responda con un margen de 0,05 y ejecute kv_block=8; compare con kv_block=32.",
            ),
            lambda f: f.params.kv_block == 8,
            both(
                "Read kv_waste_fraction (about a sixth here).",
                "Lea kv_waste_fraction (alrededor de un sexto aquí).",
            ),
            both(
                "Only each sequence's last block is partly empty: waste ≈ block/2 per sequence.",
                "Solo el último bloque de cada secuencia está medio vacío: ≈ bloque/2 por "
                "secuencia.",
            ),
            ask=Ask(
                both("Wasted fraction (0–1):", "Fracción desperdiciada (0–1):"),
                truth=lambda f: f.number("kv_waste_fraction"),
                tolerance=0.0,
                absolute=0.05,
            ),
            minutes=8,
        ),
        Challenge(
            "slo-rate-10",
            both(
                "Find a config that meets both SLOs at rate 10.",
                "Encuentre una configuración que cumpla ambos SLO con rate 10.",
            ),
            both(
                "TP at rate 10 queues up: try mode=replicas with ranks=4.",
                "TP con rate 10 acumula cola: pruebe mode=replicas con ranks=4.",
            ),
            lambda f: f.params.rate >= 10 and _meets_both(f),
            both("e.g. mode=replicas, ranks=4.", "p. ej. mode=replicas, ranks=4."),
            both(
                "At this load the queue dominates TTFT: replicas add throughput, TP only "
                "shortens each step.",
                "Con esta carga la cola domina el TTFT: las réplicas añaden capacidad; TP "
                "solo acorta cada paso.",
            ),
            minutes=12,
        ),
    ),
    discuss=(
        both(
            "Why is goodput, not throughput, what a service sells?",
            "¿Por qué lo que vende un servicio es el goodput y no el throughput?",
        ),
        both(
            "When does disaggregating prefill and decode pay off?",
            "¿Cuándo compensa separar prefill y decode?",
        ),
    ),
    timings=(
        (both("Narrative, step by step (n)", "Narrativa, paso a paso (n)"), 20),
        (both("Challenges", "Retos"), 40),
        (both("Discussion", "Discusión"), 15),
    ),
)
