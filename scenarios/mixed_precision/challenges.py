"""Lesson 6's goal and challenges: what fp16 and bf16 keep, loss scaling, and buckets.

Declared beside the lesson's texts (scenarios.goals says what a goal is): the format
explorer is arithmetic (a prediction meets it); the training ones need a real run.

Imports: scenarios.goals only.
"""

from __future__ import annotations

from scenarios.goals import Ask, Challenge, Facts, Goal, both


def _skips(facts: Facts) -> int:
    """Steps the loss scaler skipped, in the series that skipped most (a list of steps)."""
    lists = [m.value for m in facts.metrics if m.name == "skipped_steps"]
    return max((len(v) if isinstance(v, list) else int(v or 0) for v in lists), default=0)


def _overlap(facts: Facts, predicted: bool = False) -> float | None:
    """The largest overlapped share among the series (measured, or the model's)."""
    pick = facts.predicted if predicted else facts.value
    shares = [
        pick("comm_overlap_fraction", m.series)
        for m in facts.metrics
        if m.name == "comm_overlap_fraction"
    ]
    return max((s for s in shares if isinstance(s, int | float)), default=None)


def _fp16_bytes(facts: Facts, predicted: bool = False) -> float | None:
    pick = facts.predicted if predicted else facts.value
    for metric in facts.metrics:
        if metric.name == "memory_bytes_per_param" and (metric.series or "").startswith("fp16"):
            value = pick(metric.name, metric.series)
            if isinstance(value, int | float):
                return float(value)
    return None


GOAL = Goal(
    outcomes=(
        both(
            "Say what fp16 and bf16 keep of a number (range against precision), and why "
            "fp32 master weights.",
            "Decir qué conservan fp16 y bf16 de un número (rango frente a precisión), y por "
            "qué pesos maestros en fp32.",
        ),
        both(
            "Explain loss scaling: why fp16 needs it, what a skipped step is, when the scale "
            "halves and grows.",
            "Explicar el escalado de la pérdida: por qué fp16 lo necesita, qué es un paso "
            "saltado, cuándo la escala baja a la mitad y crece.",
        ),
        both(
            "Explain how DDP's buckets overlap communication with the backward.",
            "Explicar cómo los buckets de DDP solapan la comunicación con el backward.",
        ),
    ),
    challenges=(
        Challenge(
            "flush",
            both(
                "Find a number fp16 flushes to zero but bf16 keeps.",
                "Encuentre un número que fp16 convierte en cero y bf16 conserva.",
            ),
            both(
                "The value knob, then predict: below fp16's smallest subnormal, 6e-8.",
                "El parámetro value y prediga: por debajo del menor subnormal de fp16, 6e-8.",
            ),
            lambda f: f.value("value_fp16") == 0 and (f.number("value_bf16") or 0) > 0,
            both("e.g. value=1e-8.", "p. ej. value=1e-8."),
            both(
                "bf16 has fp32's 8 exponent bits: its range reaches 1e-38; fp16 stops at 6e-8.",
                "bf16 tiene los 8 bits de exponente de fp32: llega a 1e-38; fp16 se queda en 6e-8.",
            ),
            by="predict",
            minutes=6,
        ),
        Challenge(
            "bytes",
            both(
                "fp16 training with fp32 master weights and Adam: bytes per parameter?",
                "Entrenamiento fp16 con pesos maestros fp32 y Adam: ¿bytes por parámetro?",
            ),
            both("Answer, then run precision=fp16.", "Responda y ejecute precision=fp16."),
            lambda f: "fp16" in f.params.precision,
            both("16.", "16."),
            both(
                "2 + 2 + 4 + 4 + 4: the same 16 as fp32 Adam.",
                "2 + 2 + 4 + 4 + 4: los mismos 16 que Adam en fp32.",
            ),
            ask=Ask(
                both("Bytes per parameter:", "Bytes por parámetro:"),
                truth=_fp16_bytes,
                model=lambda f: _fp16_bytes(f, predicted=True),
                tolerance=0.0,
            ),
            minutes=6,
        ),
        Challenge(
            "overflow",
            both(
                "Make an overflow happen and watch the scale halve.",
                "Provoque un desbordamiento y vea la escala bajar a la mitad.",
            ),
            both(
                "overflow_step=3 in the form's faults (an inf in step 3's gradients); or "
                "precision=fp16, growth_interval=1, steps=40: the scale doubles until a "
                "gradient overflows.",
                "overflow_step=3 en los fallos del formulario (un inf en los gradientes del "
                "paso 3); o precision=fp16, growth_interval=1, steps=40: la escala se duplica "
                "hasta que un gradiente desborda.",
            ),
            lambda f: f.ran and _skips(f) >= 1,
            both(
                "A ⊘ on the timeline: the step skipped, the scale halved.",
                "Un ⊘ en la línea de tiempo: el paso saltado, la escala a la mitad.",
            ),
            both(
                "An inf in any gradient skips the update on every rank and halves the scale; "
                "growth_interval clean steps double it again.",
                "Un inf en cualquier gradiente salta la actualización en todos los rangos y "
                "reduce la escala a la mitad; growth_interval pasos limpios la duplican.",
            ),
            minutes=10,
        ),
        Challenge(
            "overlap",
            both(
                "What share of the communication hides under the backward at the default bucket cap?",
                "¿Qué fracción de la comunicación queda oculta bajo el backward con el bucket "
                "por defecto?",
            ),
            both(
                "Answer within 0.15, then run; then try bucket_cap=25MiB.",
                "Responda con un margen de 0,15 y ejecute; luego pruebe bucket_cap=25MiB.",
            ),
            lambda f: f.ran and _overlap(f) is not None,
            both("Read comm_overlap_fraction.", "Lea comm_overlap_fraction."),
            both(
                "A bucket's all-reduce starts when its last gradient is ready: small buckets "
                "start early, one big bucket waits for the whole backward.",
                "El all-reduce de un bucket empieza cuando su último gradiente está listo: "
                "los pequeños empiezan pronto, uno grande espera a todo el backward.",
            ),
            ask=Ask(
                both("Overlapped fraction (0–1):", "Fracción solapada (0–1):"),
                truth=_overlap,
                model=lambda f: _overlap(f, predicted=True),
                tolerance=0.0,
                absolute=0.15,
            ),
            minutes=10,
        ),
    ),
    discuss=(
        both(
            "Why does bf16 train without loss scaling, and what does it lose?",
            "¿Por qué bf16 entrena sin escalar la pérdida, y qué pierde?",
        ),
        both(
            "Why is torch's first bucket smaller (first_bucket_cap)?",
            "¿Por qué el primer bucket de torch es menor (first_bucket_cap)?",
        ),
    ),
    timings=(
        (both("Narrative, step by step (n)", "Narrativa, paso a paso (n)"), 20),
        (both("Challenges", "Retos"), 40),
        (both("Discussion", "Discusión"), 15),
    ),
)
