"""Lesson 3's goal and challenges: a failure, a restart, an exact resume, and how often to save.

Declared beside the lesson's texts (scenarios.goals says what a goal is): the recovery
challenges need a real run with a fault; the checkpoint interval is arithmetic.

Imports: scenarios.goals only.
"""

from __future__ import annotations

from scenarios.goals import Ask, Challenge, Facts, Goal, both


def _restarted(facts: Facts) -> bool:
    return (facts.number("restarts") or 0) >= 1


def _killed(facts: Facts, rank: int, step: int) -> bool:
    """The run's own fault knobs asked for this kill (not another fault, rank or step)."""
    faults = getattr(facts.params, "faults", None)
    return faults is not None and faults.specs() == [f"kill:rank={rank},step={step}"]


GOAL = Goal(
    outcomes=(
        both(
            "Say what a checkpoint must hold for a resumed run to be bitwise equal to an "
            "uninterrupted one.",
            "Decir qué debe guardar un checkpoint para que una ejecución reanudada sea "
            "idéntica bit a bit a una sin interrupción.",
        ),
        both(
            "Explain why every rank restarts when one dies, and count the lost steps.",
            "Explicar por qué reinician todos los rangos cuando uno muere, y contar los pasos "
            "perdidos.",
        ),
        both(
            "Choose how often to save with Young's and Daly's formulas.",
            "Elegir cada cuánto guardar con las fórmulas de Young y Daly.",
        ),
    ),
    challenges=(
        Challenge(
            "kill-12",
            both(
                "Kill rank 2 at step 12 and resume with at most 2 lost steps.",
                "Mate el rango 2 en el paso 12 y reanude perdiendo como mucho 2 pasos.",
            ),
            both(
                "In the form's faults: fault=kill, fault_rank=2, fault_step=12; "
                "checkpoint_every decides the loss.",
                "En los fallos del formulario: fault=kill, fault_rank=2, fault_step=12; "
                "checkpoint_every decide la pérdida.",
            ),
            lambda f: (
                _killed(f, rank=2, step=12)
                and _restarted(f)
                and (f.number("lost_steps") if f.number("lost_steps") is not None else 99) <= 2
                and f.flag("bitwise_equal_to_uninterrupted")
            ),
            both(
                "checkpoint_every=5 (saved at 10) or 2, 3, 4, 6: any that saves at 10, 11 or 12.",
                "checkpoint_every=5 (guarda en 10) o 2, 3, 4, 6: cualquiera que guarde en 10, "
                "11 o 12.",
            ),
            both(
                "The steps completed since the last checkpoint are lost: 11 − 10 = 1 with a save "
                "every 5 (step 12, killed half-way, was never done).",
                "Se pierden los pasos completados desde el último checkpoint: 11 − 10 = 1 "
                "guardando cada 5 (el paso 12, matado a medias, nunca se completó).",
            ),
            minutes=10,
        ),
        Challenge(
            "bitwise",
            both(
                "After a restart, are the final weights bitwise equal to an uninterrupted run's? (yes/no)",
                "Tras un reinicio, ¿son los pesos finales idénticos bit a bit a los de una "
                "ejecución sin interrupción? (yes/no)",
            ),
            both(
                "Answer, then run with fault=kill (the form's faults).",
                "Responda y ejecute con fault=kill (los fallos del formulario).",
            ),
            _restarted,
            both("Yes.", "Sí (yes)."),
            both(
                "Weights, Adam's moments, the step, the data order and the RNG are all saved, "
                "and the gradient is summed in a fixed tree.",
                "Se guardan pesos, momentos de Adam, el paso, el orden de los datos y el RNG, "
                "y el gradiente se suma en un árbol fijo.",
            ),
            ask=Ask(
                both("Bitwise equal? (yes/no)", "¿Idénticos bit a bit? (yes/no)"),
                truth=lambda f: "yes" if f.flag("bitwise_equal_to_uninterrupted") else "no",
                choices=("yes", "no"),
            ),
            minutes=8,
        ),
        Challenge(
            "lost",
            both(
                "Checkpoints every 5 steps, a kill at step 12: how many steps are lost?",
                "Checkpoints cada 5 pasos y una muerte en el paso 12: ¿cuántos pasos se pierden?",
            ),
            both(
                "Answer, then run checkpoint_every=5 with fault=kill, fault_step=12.",
                "Responda y ejecute checkpoint_every=5 con fault=kill, fault_step=12.",
            ),
            lambda f: _restarted(f) and f.params.checkpoint_every == 5,
            both("1.", "1."),
            both(
                "Saved after step 10; step 11 was done and is lost; step 12, killed half-way, "
                "is redone but was never done: lost_steps counts completed work.",
                "Guardado tras el paso 10; el 11 se completó y se pierde; el 12, matado a "
                "medias, se rehace pero nunca se completó: lost_steps cuenta trabajo terminado.",
            ),
            ask=Ask(
                both("Lost steps:", "Pasos perdidos:"),
                truth=lambda f: f.number("lost_steps"),
                tolerance=0.0,
            ),
            minutes=6,
        ),
        Challenge(
            "young",
            both(
                "MTBF 3 h, a checkpoint costs 60 s: how many seconds between checkpoints (Young)?",
                "MTBF 3 h y un checkpoint cuesta 60 s: ¿cuántos segundos entre checkpoints (Young)?",
            ),
            both(
                "Answer within 5%, then predict mtbf=3h, save_cost=60s.",
                "Responda con un margen del 5% y prediga mtbf=3h, save_cost=60s.",
            ),
            lambda f: f.params.mtbf == 10800.0 and f.params.save_cost == 60.0,
            both("√(2·60·10800) ≈ 1138 s.", "√(2·60·10800) ≈ 1138 s."),
            both(
                "Saving often costs C each time; saving rarely loses half an interval per "
                "failure: the optimum balances them, √(2CM).",
                "Guardar a menudo cuesta C cada vez; guardar poco pierde medio intervalo por "
                "fallo: el óptimo los equilibra, √(2CM).",
            ),
            by="predict",
            ask=Ask(
                both("Seconds between checkpoints:", "Segundos entre checkpoints:"),
                truth=lambda f: f.number("young_interval_s"),
                tolerance=0.05,
            ),
            minutes=8,
        ),
    ),
    discuss=(
        both(
            "Why is 'almost the same loss' not good enough for a resumed run?",
            "¿Por qué «casi la misma pérdida» no basta en una ejecución reanudada?",
        ),
        both(
            "What changes when the job resumes on fewer ranks (resume_ranks)?",
            "¿Qué cambia cuando el trabajo se reanuda con menos rangos (resume_ranks)?",
        ),
    ),
    timings=(
        (both("Narrative, step by step (n)", "Narrativa, paso a paso (n)"), 20),
        (both("Challenges", "Retos"), 35),
        (both("Discussion", "Discusión"), 20),
    ),
)
