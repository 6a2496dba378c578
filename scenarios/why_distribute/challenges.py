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
                "The lesson's opening question: does training a 7B model (Llama 2) fit one "
                "80 GiB GPU? (yes/no)",
                "La pregunta con la que se abre la lección: ¿cabe el entrenamiento de un "
                "modelo de 7B (Llama 2) en una GPU de 80 GiB? (yes/no)",
            ),
            both(
                "Answer, then predict with the defaults (question=7b-one-gpu).",
                "Responda y prediga con los valores por defecto (question=7b-one-gpu).",
            ),
            lambda f: _size(f, 7),
            both(
                "No: 6.74B × 16 B = 108 GB = 100 GiB of weights, grads and Adam states, "
                "over 80 GiB before any activation.",
                "No: 6,74B × 16 B = 108 GB = 100 GiB de pesos, gradientes y estados de "
                "Adam, más de 80 GiB antes de cualquier activación.",
            ),
            both(
                "Its inference (2 B/param, 12.6 GiB) fits; its training state does not: the "
                "optimizer states are what is too big, so ZeRO-1 over a few GPUs is the plan.",
                "Su inferencia (2 B/parámetro, 12,6 GiB) cabe; su estado de entrenamiento no: "
                "lo que sobra son los estados del optimizador, así que el plan es ZeRO-1 "
                "sobre unas pocas GPUs.",
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
                "Answer, then switch to question=70b-64-gpus (Llama 3 70B on 8 nodes of 8 "
                "H100s) and predict.",
                "Responda, cambie a question=70b-64-gpus (Llama 3 70B en 8 nodos de 8 H100) y "
                "prediga.",
            ),
            lambda f: _size(f, 70) and f.params.gpus == 64 and f.params.gpu == "h100-80gb",
            both(
                "memory (and both once a 30-day deadline is given).",
                "memory (y both en cuanto hay un plazo de 30 días).",
            ),
            both(
                "1,051 GiB of state cannot sit in 80 GiB, and the weights alone (131 GiB) "
                "are too big: ZeRO-3 or PP; one GPU would take decades.",
                "1.051 GiB de estado no caben en 80 GiB, y ya los pesos (131 GiB) sobran: "
                "ZeRO-3 o PP; una GPU tardaría décadas.",
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
                "Answer, then predict question=70b-64-gpus with deadline=720h; read the plans "
                "table.",
                "Responda y prediga question=70b-64-gpus con deadline=720h; lea la tabla de "
                "planes.",
            ),
            lambda f: _size(f, 70) and f.params.gpus == 64 and f.params.deadline > 0,
            both(
                "Yes: tp4·pp1·dp16 with ZeRO-3 and selective recomputation, TP inside a node; "
                "and even so it takes about a year, not 30 days.",
                "Sí: tp4·pp1·dp16 con ZeRO-3 y recomputación selectiva, TP dentro de un nodo; "
                "y aun así tarda cerca de un año, no 30 días.",
            ),
            both(
                "ZeRO-3 over 16 and TP over 4 split the 1,051 GiB of state 64 ways (16.4 GiB "
                "a GPU); at seq 8192 the activations would not fit without TP, which stays "
                "inside a node, on NVLink. Memory is solved; the deadline needs about 12 "
                "times more GPUs.",
                "ZeRO-3 sobre 16 y TP sobre 4 reparten los 1.051 GiB de estado en 64 partes "
                "(16,4 GiB por GPU); con seq 8192 las activaciones no cabrían sin TP, que se "
                "queda dentro de un nodo, por NVLink. La memoria queda resuelta; el plazo pide "
                "unas 12 veces más GPUs.",
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
            "minigpt",
            both(
                "The closing contrast: the MiniGPT the real run trains, on 8 A100s: which "
                "pressure? (none/time/memory/both)",
                "El contraste final: el MiniGPT que entrena la ejecución real, en 8 A100: ¿qué "
                "presión? (none/time/memory/both)",
            ),
            both(
                "Answer, then predict with question=minigpt.",
                "Responda y prediga con question=minigpt.",
            ),
            lambda f: f.params.question == "minigpt" and f.params.shape_source == "demo",
            both("none.", "none."),
            both(
                "Its 1.7 MiB of state fits any GPU and one GPU trains it in a second: no "
                "reason to distribute. The real run distributes it only to show, under a "
                "per-rank cap, what ZeRO-3 and DDP do.",
                "Sus 1,7 MiB de estado caben en cualquier GPU y una sola lo entrena en un "
                "segundo: no hay razón para distribuir. La ejecución real lo distribuye solo "
                "para mostrar, con un límite por rango, qué hacen ZeRO-3 y DDP.",
            ),
            by="predict",
            ask=Ask(
                both("Pressure:", "Presión:"),
                truth=lambda f: f.value("pressure"),
                choices=("none", "time", "memory", "both"),
            ),
            minutes=5,
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
            both(
                "e.g. question=minigpt with params=125M, gpus=8, budget=1.",
                "p. ej. question=minigpt con params=125M, gpus=8, budget=1.",
            ),
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
