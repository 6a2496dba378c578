"""Lesson 5's goal and challenges: the bubble, the memory of 1F1B, the knob that shrinks it.

Declared beside the lesson's texts (scenarios.goals says what a goal is): each challenge
is a predicate over a real run's metrics, some asking the learner's number first.

Imports: scenarios.goals only.
"""

from __future__ import annotations

from scenarios.goals import Ask, Challenge, Facts, Goal, both


def _both_ran(facts: Facts) -> bool:
    return {"gpipe", "1f1b"} <= set(facts.params.schedule)


def _ratio(facts: Facts, predicted: bool) -> float | None:
    pick = facts.predicted if predicted else facts.measured
    gpipe, one = pick("makespan_s", "gpipe"), pick("makespan_s", "1f1b")
    if not isinstance(gpipe, int | float) or not isinstance(one, int | float) or gpipe <= 0:
        return None
    return one / gpipe


def _fewer_inflight(facts: Facts) -> str | None:
    gpipe = facts.value("peak_inflight_microbatches", "gpipe")
    one = facts.value("peak_inflight_microbatches", "1f1b")
    if not isinstance(gpipe, list) or not isinstance(one, list) or not gpipe or not one:
        return None
    return "1f1b" if one[0] < gpipe[0] else "gpipe" if gpipe[0] < one[0] else "same"


def _bubble_under(facts: Facts, limit: float) -> bool:
    """A real run of 4 stages whose schedule's bubble, (p−1)/(m+p−1), is under `limit`
    (the measured share sits above it on a CPU shared by more ranks than cores)."""
    bubbles = facts.by_series("bubble_fraction_formula")
    return facts.ran and facts.params.stages == 4 and any(b < limit for b in bubbles.values())


GOAL = Goal(
    outcomes=(
        both(
            "Derive the bubble (p−1)/(m+p−1) from the timeline and say what shrinks it.",
            "Deducir la burbuja (p−1)/(m+p−1) de la línea de tiempo y decir qué la reduce.",
        ),
        both(
            "Explain why 1F1B has GPipe's bubble but keeps fewer microbatches in flight.",
            "Explicar por qué 1F1B tiene la burbuja de GPipe pero guarda menos "
            "microbatches en vuelo.",
        ),
        both(
            "Say what interleaving and zero-bubble schedules trade for a smaller bubble.",
            "Decir qué cambian los planes intercalados y de burbuja cero por una burbuja menor.",
        ),
    ),
    challenges=(
        Challenge(
            "bubble",
            both(
                "With 4 stages and 8 microbatches, what share of the time is bubble?",
                "Con 4 etapas y 8 microbatches, ¿qué fracción del tiempo es burbuja?",
            ),
            both(
                "Answer as a fraction within 0.1 (0.3), then run the defaults.",
                "Responda como fracción con un margen de 0,1 (0.3) y ejecute los valores por "
                "defecto.",
            ),
            lambda f: f.params.stages == 4 and f.params.microbatches == 8,
            both("About 3/11 ≈ 0.27.", "Unos 3/11 ≈ 0,27."),
            both(
                "p−1 slots at the start and at the end of each stage are idle out of m+p−1.",
                "p−1 huecos al principio y al final de cada etapa están vacíos, de m+p−1.",
            ),
            ask=Ask(
                both("Bubble fraction:", "Fracción de burbuja:"),
                truth=lambda f: f.number("bubble_fraction", "gpipe"),
                model=lambda f: f.predicted("bubble_fraction", "gpipe"),
                tolerance=0.0,
                absolute=0.1,
            ),
            minutes=8,
        ),
        Challenge(
            "under-10",
            both(
                "With 4 stages, get the bubble under 10% without adding stages: which knob?",
                "Con 4 etapas, baje la burbuja del 10% sin añadir etapas: ¿qué parámetro?",
            ),
            both(
                "(p−1)/(m+p−1) < 0.1 needs m ≥ 28: raise microbatches.",
                "(p−1)/(m+p−1) < 0,1 pide m ≥ 28: suba microbatches.",
            ),
            lambda f: _bubble_under(f, 0.10),
            both("microbatches=32 (or more).", "microbatches=32 (o más)."),
            both(
                "More microbatches per step fill the pipeline; the bubble is fixed in slots, "
                "so its share falls.",
                "Más microbatches por paso llenan el pipeline; la burbuja es fija en huecos, "
                "así que su fracción baja.",
            ),
            minutes=10,
        ),
        Challenge(
            "inflight",
            both(
                "Which schedule keeps fewer microbatches in flight on stage 0? (gpipe/1f1b)",
                "¿Qué plan guarda menos microbatches en vuelo en la etapa 0? (gpipe/1f1b)",
            ),
            both(
                "Answer, then run schedule=gpipe,1f1b and open the Memory tab.",
                "Responda y ejecute schedule=gpipe,1f1b; abra la pestaña Memoria.",
            ),
            _both_ran,
            both(
                "1f1b: p on stage 0, where GPipe keeps all m.",
                "1f1b: p en la etapa 0, donde GPipe guarda los m.",
            ),
            both(
                "1F1B starts each backward as soon as it can, freeing activations early.",
                "1F1B empieza cada backward en cuanto puede y libera antes las activaciones.",
            ),
            ask=Ask(
                both("Schedule with fewer in flight:", "Plan con menos en vuelo:"),
                truth=_fewer_inflight,
                choices=("gpipe", "1f1b"),
            ),
            minutes=8,
        ),
        Challenge(
            "ratio",
            both(
                "How long will 1F1B take relative to GPipe (1F1B's time ÷ GPipe's)?",
                "¿Cuánto tardará 1F1B respecto a GPipe (tiempo de 1F1B ÷ el de GPipe)?",
            ),
            both(
                "Answer within 15%, then run schedule=gpipe,1f1b.",
                "Responda con un margen del 15% y ejecute schedule=gpipe,1f1b.",
            ),
            _both_ran,
            both(
                "1.0 by the bubble; on a CPU with fewer cores than stages, more (1.4 seen): "
                "the measurement decides.",
                "1,0 por la burbuja; en una CPU con menos núcleos que etapas, más (se vio 1,4): "
                "decide la medida.",
            ),
            both(
                "1F1B reorders the same work, so its bubble is GPipe's; its finer switching "
                "between forward and backward costs more where ranks share cores (cpu_cores).",
                "1F1B reordena el mismo trabajo, así que su burbuja es la de GPipe; su "
                "alternancia más fina entre forward y backward cuesta más donde los rangos "
                "comparten núcleos (cpu_cores).",
            ),
            ask=Ask(
                both("1F1B ÷ GPipe:", "1F1B ÷ GPipe:"),
                truth=lambda f: _ratio(f, False),
                model=lambda f: _ratio(f, True),
                tolerance=0.15,
            ),
            minutes=8,
        ),
        Challenge(
            "interleaved",
            both(
                "Run the interleaved schedule and see it send more messages than 1F1B.",
                "Ejecute el plan intercalado y vea que envía más mensajes que 1F1B.",
            ),
            both(
                "schedule=1f1b,interleaved, chunks=2: compare p2p_messages.",
                "schedule=1f1b,interleaved, chunks=2: compare p2p_messages.",
            ),
            lambda f: (
                (f.number("p2p_messages", "interleaved") or 0)
                > (f.number("p2p_messages", "1f1b") or float("inf"))
            ),
            both("v = 2 chunks: twice the messages.", "v = 2 trozos: el doble de mensajes."),
            both(
                "Each rank holds v chunks, so each microbatch crosses v·p stage boundaries: "
                "the bubble shrinks by v, messages grow by v.",
                "Cada rango tiene v trozos, así que cada microbatch cruza v·p fronteras: la "
                "burbuja baja v veces y los mensajes suben v veces.",
            ),
            minutes=8,
        ),
    ),
    discuss=(
        both(
            "Why not just take m very large? What does the global batch have to do with it?",
            "¿Por qué no tomar m muy grande? ¿Qué tiene que ver el lote global?",
        ),
        both(
            "Where does a zero-bubble schedule put the weight-gradient work (W)?",
            "¿Dónde pone un plan de burbuja cero el trabajo de gradiente de pesos (W)?",
        ),
    ),
    timings=(
        (both("Narrative, step by step (n)", "Narrativa, paso a paso (n)"), 20),
        (both("Challenges", "Retos"), 40),
        (both("Discussion", "Discusión"), 15),
    ),
)
