"""Lesson 0's goal and challenges: which pressure, which plan, at what cost.

Declared beside the lesson's texts (scenarios.goals says what a goal is). The lesson is
arithmetic (a footprint, a planner, a price), so a prediction meets its challenges.

Imports: scenarios.goals only.
"""

from __future__ import annotations

import re

from scenarios.goals import Ask, Challenge, Facts, Goal, both


def _size(facts: Facts, billions: float) -> bool:
    return facts.near("parameters", billions * 1e9, 0.05)


def _splits_the_model(facts: Facts) -> str | None:
    """ "yes" when the recommended layout has tp or pp above 1 ("tp8·pp2·dp4 zero1")."""
    plan = facts.value("recommended")
    if not isinstance(plan, str):
        return None
    degrees = {k: int(v) for k, v in re.findall(r"(tp|pp)(\d+)", plan)}
    return "yes" if degrees.get("tp", 1) > 1 or degrees.get("pp", 1) > 1 else "no"


GOAL = Goal(
    outcomes=(
        both(
            "Say which pressure (memory, time, both or none) makes a training distributed, "
            "from the footprint and one GPU's days.",
            "Decir qué presión (memoria, tiempo, ambas o ninguna) obliga a distribuir un "
            "entrenamiento, a partir de la huella y los días de una GPU.",
        ),
        both(
            "Read a plan (tp·pp·dp, ZeRO stage) and say why TP stays inside a node.",
            "Leer un plan (tp·pp·dp, etapa ZeRO) y decir por qué TP se queda dentro de un nodo.",
        ),
        both(
            "State an experiment's cost in one sentence and hold it to a budget.",
            "Decir el coste de un experimento en una frase y ajustarlo a un presupuesto.",
        ),
    ),
    challenges=(
        Challenge(
            "bytes-per-param",
            both(
                "Mixed-precision Adam: how many bytes does it keep per parameter?",
                "Adam en precisión mixta: ¿cuántos bytes guarda por parámetro?",
            ),
            both(
                "Answer, then predict with precision=mixed.",
                "Responda y prediga con precision=mixed.",
            ),
            lambda f: f.params.precision == "mixed",
            both("16 bytes.", "16 bytes."),
            both(
                "2 (fp16 weights) + 2 (fp16 grads) + 4 (fp32 master) + 4 + 4 (Adam's moments).",
                "2 (pesos fp16) + 2 (gradientes fp16) + 4 (copia fp32) + 4 + 4 (momentos de Adam).",
            ),
            by="predict",
            ask=Ask(
                both("Bytes per parameter:", "Bytes por parámetro:"),
                truth=lambda f: f.number("state_bytes_per_param"),
                tolerance=0.0,
            ),
            minutes=5,
        ),
        Challenge(
            "seven-b",
            both(
                "Does training a 7B model fit one 80 GB GPU? (yes/no)",
                "¿Cabe el entrenamiento de un modelo de 7B en una GPU de 80 GB? (yes/no)",
            ),
            both("Answer, then predict with params=7B.", "Responda y prediga con params=7B."),
            lambda f: _size(f, 7),
            both("No: 7B × 16 B = 112 GB.", "No: 7B × 16 B = 112 GB."),
            both(
                "Its inference (2 B/param, 14 GB) fits; its training state does not.",
                "Su inferencia (2 B/parámetro, 14 GB) cabe; su estado de entrenamiento no.",
            ),
            by="predict",
            ask=Ask(
                both("Fits one GPU? (yes/no)", "¿Cabe en una GPU? (yes/no)"),
                truth=lambda f: "yes" if f.flag("fits_one_gpu") else "no",
                choices=("yes", "no"),
            ),
            minutes=6,
        ),
        Challenge(
            "seventy-b-pressure",
            both(
                "A 70B model on 64 H100s: which pressure? (none/time/memory/both)",
                "Un modelo de 70B en 64 H100: ¿qué presión? (none/time/memory/both)",
            ),
            both(
                "Answer, then predict params=70B, gpu=h100-80gb, gpus=64.",
                "Responda y prediga params=70B, gpu=h100-80gb, gpus=64.",
            ),
            lambda f: _size(f, 70) and f.params.gpus == 64 and f.params.gpu == "h100-80gb",
            both(
                "memory (and both once a 30-day deadline is given).",
                "memory (y both en cuanto hay un plazo de 30 días).",
            ),
            both(
                "1.1 TB of state cannot sit in 80 GB; one GPU would take years.",
                "1,1 TB de estado no caben en 80 GB; una GPU tardaría años.",
            ),
            by="predict",
            ask=Ask(
                both("Pressure:", "Presión:"),
                truth=lambda f: f.value("pressure"),
                choices=("none", "time", "memory", "both"),
            ),
            minutes=8,
        ),
        Challenge(
            "seventy-b-plan",
            both(
                "70B on 64 H100s within 30 days: does the plan split the model (TP or PP)? (yes/no)",
                "70B en 64 H100 en 30 días: ¿parte el plan el modelo (TP o PP)? (yes/no)",
            ),
            both(
                "Answer, then predict with deadline=720h; read the plans table.",
                "Responda y prediga con deadline=720h; lea la tabla de planes.",
            ),
            lambda f: _size(f, 70) and f.params.gpus == 64 and f.params.deadline > 0,
            both(
                "No at seq 2048: tp1·pp1·dp64 with ZeRO-3 and selective recomputation; with "
                "seq=8192 the activations push it to tp4.",
                "No con seq 2048: tp1·pp1·dp64 con ZeRO-3 y recomputación selectiva; con "
                "seq=8192 las activaciones lo llevan a tp4.",
            ),
            both(
                "ZeRO-3 divides the 1.1 TB of state by 64 (17.5 GB each); TP is the last "
                "resort, inside a node, when activations still do not fit.",
                "ZeRO-3 divide los 1,1 TB de estado entre 64 (17,5 GB cada una); TP es el "
                "último recurso, dentro de un nodo, cuando las activaciones aún no caben.",
            ),
            by="predict",
            ask=Ask(
                both("Splits the model? (yes/no)", "¿Parte el modelo? (yes/no)"),
                truth=_splits_the_model,
                choices=("yes", "no"),
            ),
            minutes=10,
        ),
        Challenge(
            "budget",
            both(
                "Make the budget refuse an experiment.",
                "Haga que el presupuesto rechace un experimento.",
            ),
            both(
                "A bigger model, more GPUs or a smaller budget: watch budget_sentence.",
                "Un modelo mayor, más GPU o un presupuesto menor: mire budget_sentence.",
            ),
            lambda f: f.value("budget_accepted") is False,
            both("e.g. params=125M, gpus=8, budget=1.", "p. ej. params=125M, gpus=8, budget=1."),
            both(
                "Cost = GPUs × price × hours (with setup and margin); over the ceiling, refused.",
                "Coste = GPU × precio × horas (con preparación y margen); sobre el techo, "
                "rechazado.",
            ),
            by="predict",
            minutes=6,
        ),
    ),
    discuss=(
        both(
            "When is 'no need to distribute' the right answer, and who decides the deadline?",
            "¿Cuándo es «no hace falta distribuir» la respuesta correcta, y quién fija el plazo?",
        ),
        both(
            "Why is the cheapest plan not always the fastest one?",
            "¿Por qué el plan más barato no es siempre el más rápido?",
        ),
    ),
    timings=(
        (both("Narrative, step by step (n)", "Narrativa, paso a paso (n)"), 20),
        (both("Challenges", "Retos"), 35),
        (both("Discussion", "Discusión"), 20),
    ),
)
