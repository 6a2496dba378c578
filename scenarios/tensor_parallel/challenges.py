"""Lesson 4's goal and challenges: where TP communicates, and what a mistake breaks.

Declared beside the lesson's texts (scenarios.goals says what a goal is): each challenge
is a predicate over a real run's metrics, some asking the learner's number first.

Imports: scenarios.goals only.
"""

from __future__ import annotations

from scenarios.goals import Ask, Challenge, Facts, Goal, both


def _hand(facts: Facts) -> bool:
    return "hand" in facts.params.implementation


def _what_breaks(facts: Facts) -> str | None:
    loss = facts.number("max_loss_diff_vs_reference")
    grad = facts.number("max_grad_diff_vs_reference")
    if loss is None or grad is None:
        return None
    return "loss" if loss > 1e-4 else "grads" if grad > 1e-4 else "nothing"


GOAL = Goal(
    outcomes=(
        both(
            "Split an MLP column-then-row and say where its two collectives (f and g) go.",
            "Partir un MLP por columnas y luego por filas y decir dónde van sus dos "
            "colectivas (f y g).",
        ),
        both(
            "Explain why TP stays inside a node (a collective on every layer, twice).",
            "Explicar por qué TP se queda dentro de un nodo (una colectiva en cada capa, dos "
            "veces).",
        ),
        both(
            "Recognise a TP mistake by what it breaks: the loss or only the gradients.",
            "Reconocer un error de TP por lo que rompe: la pérdida o solo los gradientes.",
        ),
    ),
    challenges=(
        Challenge(
            "forward-all-reduces",
            both(
                "With tp=2 and no sequence parallelism, how many all-reduces per layer forward?",
                "Con tp=2 y sin paralelismo de secuencia, ¿cuántos all-reduce por capa en el forward?",
            ),
            both("Answer, then run the defaults.", "Responda y ejecute los valores por defecto."),
            lambda f: _hand(f) and f.params.sp == "off" and f.params.mistake == "none",
            both(
                "2: one after attention, one after the MLP (g).",
                "2: uno tras la atención y otro tras el MLP (g).",
            ),
            both(
                "Each row-parallel linear ends with partial sums that g all-reduces.",
                "Cada lineal por filas termina en sumas parciales que g reduce con all-reduce.",
            ),
            ask=Ask(
                both("All-reduces per layer (forward):", "All-reduce por capa (forward):"),
                truth=lambda f: f.number("collectives_per_layer.forward.all_reduce", "hand"),
                model=lambda f: f.predicted("collectives_per_layer.forward.all_reduce", "hand"),
                tolerance=0.0,
            ),
            minutes=8,
        ),
        Challenge(
            "sp-all-gathers",
            both(
                "Turn sequence parallelism on: how many all-gathers per layer forward?",
                "Active el paralelismo de secuencia: ¿cuántos all-gather por capa en el forward?",
            ),
            both("Answer, then run sp=on.", "Responda y ejecute sp=on."),
            lambda f: _hand(f) and f.params.sp == "on",
            both(
                "2: each all-reduce becomes a reduce-scatter and an all-gather.",
                "2: cada all-reduce se vuelve un reduce-scatter y un all-gather.",
            ),
            both(
                "Same bytes as the all-reduce, but the norms and dropouts run on 1/t of the "
                "sequence.",
                "Los mismos bytes que el all-reduce, pero normas y dropout trabajan sobre 1/t "
                "de la secuencia.",
            ),
            ask=Ask(
                both("All-gathers per layer (forward):", "All-gather por capa (forward):"),
                truth=lambda f: f.number("collectives_per_layer.forward.all_gather", "hand"),
                model=lambda f: f.predicted("collectives_per_layer.forward.all_gather", "hand"),
                tolerance=0.0,
            ),
            minutes=8,
        ),
        Challenge(
            "missing-f",
            both(
                "Leave f out (mistake=missing-f): what breaks? (loss/grads)",
                "Quite f (mistake=missing-f): ¿qué se rompe? (loss/grads)",
            ),
            both("Answer, then run mistake=missing-f.", "Responda y ejecute mistake=missing-f."),
            lambda f: f.params.mistake == "missing-f",
            both("grads: the loss is right.", "grads: la pérdida es correcta."),
            both(
                "f is the identity forward and an all-reduce backward: without it the forward "
                "is unchanged, the input's gradient is a partial sum.",
                "f es la identidad en el forward y un all-reduce en el backward: sin ella el "
                "forward no cambia y el gradiente de la entrada es una suma parcial.",
            ),
            ask=Ask(
                both("What breaks:", "Qué se rompe:"),
                truth=_what_breaks,
                choices=("loss", "grads"),
            ),
            minutes=10,
        ),
        Challenge(
            "torch",
            both(
                "How many all-reduces does torch's parallelize_module issue in one forward step?",
                "¿Cuántos all-reduce hace parallelize_module de torch en un paso forward?",
            ),
            both(
                "Count yours first (2 per layer, and the loss's), then run "
                "implementation=hand,torch, sp=off.",
                "Cuente primero los suyos (2 por capa, y los de la pérdida) y ejecute "
                "implementation=hand,torch, sp=off.",
            ),
            lambda f: {"hand", "torch"} <= set(f.params.implementation) and f.params.sp == "off",
            both(
                "Read torch_tp_collectives.forward.all_reduce beside step_collectives (hand).",
                "Lea torch_tp_collectives.forward.all_reduce junto a step_collectives (hand).",
            ),
            both(
                "The same Megatron split: the same collectives, issued by DTensor; where the "
                "counts differ, the loss is computed differently.",
                "La misma partición de Megatron: las mismas colectivas, emitidas por DTensor; "
                "donde las cuentas difieren, la pérdida se calcula de otro modo.",
            ),
            ask=Ask(
                both(
                    "torch's forward all-reduces per step:", "All-reduce de torch por paso forward:"
                ),
                truth=lambda f: f.number("torch_tp_collectives.forward.all_reduce", "torch"),
                tolerance=0.0,
            ),
            minutes=8,
        ),
    ),
    discuss=(
        both(
            "Why does the fused qkv need an interleaved split, not a contiguous one?",
            "¿Por qué el qkv fusionado necesita una partición intercalada y no contigua?",
        ),
        both(
            "TP across nodes: what would the comm-to-compute ratio become?",
            "TP entre nodos: ¿en qué se convertiría la razón comunicación/cómputo?",
        ),
    ),
    timings=(
        (both("Narrative, step by step (n)", "Narrativa, paso a paso (n)"), 25),
        (both("Challenges", "Retos"), 35),
        (both("Discussion", "Discusión"), 15),
    ),
)
