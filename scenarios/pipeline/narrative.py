"""The narrative of lesson 5, in Spanish and English: where the bubble comes from and
what each schedule buys. Each step is shown while the time cursor is in one of
its phases (scenarios.pipeline.orders.phase_of) and quotes one of the lesson's
metrics (scenarios.pipeline.lesson.metrics), of the schedule under the cursor.

Imports: the lesson contract only.
"""

from __future__ import annotations

from scenarios.base import NarrativeStep

NARRATIVE = (
    NarrativeStep(
        "bubble",
        {"es": "De dónde sale la burbuja", "en": "Where the bubble comes from"},
        {
            "es": "La etapa s no puede empezar el microlote j hasta que la etapa s−1 lo termina. Al "
            "principio las etapas finales esperan (llenado) y al final esperan las primeras "
            "(vaciado). GPipe hace todos los forward y luego todos los backward: cada rango queda "
            "ocioso p−1 veces (F+B). En esta máquina cuatro rangos comparten dos núcleos: mientras un "
            "rango espera, los otros usan su núcleo, así que la burbuja cuesta menos tiempo que en "
            "GPUs dedicadas; la predicción reparte los núcleos igual.",
            "en": "Stage s cannot start microbatch j until stage s−1 has finished it. At the start "
            "the last stages wait (fill), at the end the first ones do (drain). GPipe runs every "
            "forward, then every backward: each rank sits idle for p−1 times (F+B). On this machine four "
            "ranks share two cores: while one rank waits, the others use its core, so the bubble "
            "costs less time than on dedicated GPUs; the prediction shares the cores the same way.",
        },
        formula="T = (m + p − 1)(F + B) ;  bubble = (p − 1)/(m + p − 1)",
        metric="bubble_fraction",
        phases=("forward", "backward", "start"),
    ),
    NarrativeStep(
        "1f1b",
        {"es": "1F1B: misma burbuja, menos memoria", "en": "1F1B: same bubble, less memory"},
        {
            "es": "1F1B hace en el rango r solo min(p−r−1, m) forward de calentamiento y luego alterna "
            "un forward y un backward. La burbuja es la misma que en GPipe (el llenado y el vaciado "
            "no cambian), pero cada backward libera las activaciones de su microlote: el rango r "
            "guarda como mucho p−r microlotes en vez de m.",
            "en": "1F1B runs only min(p−r−1, m) warm-up forwards on rank r, then alternates one "
            "forward and one backward. The bubble is GPipe's (fill and drain do not change), but "
            "each backward frees its microbatch's activations: rank r holds at most p−r "
            "microbatches instead of m.",
        },
        formula="warm-up_r = min(p − r − 1, m) ;  in-flight_r ≤ min(p − r, m)",
        metric="peak_inflight_microbatches",
        phases=("warmup", "steady", "cooldown"),
    ),
    NarrativeStep(
        "interleaved",
        {
            "es": "Intercalado: mensajes a cambio de burbuja",
            "en": "Interleaved: messages for bubble",
        },
        {
            "es": "Con v trozos por rango (la etapa s vive en el rango s mod p), cada etapa es v veces "
            "más corta, así que el llenado y el vaciado también: la burbuja se divide por v. A cambio "
            "cada microlote cruza v veces más fronteras (v veces más mensajes p2p) y se guardan más "
            "activaciones. Megatron exige que m sea múltiplo de p.",
            "en": "With v chunks per rank (stage s lives on rank s mod p), each stage is v times "
            "shorter, and so are fill and drain: the bubble is divided by v. In exchange each "
            "microbatch crosses v times more boundaries (v times more p2p messages) and more "
            "activations are held. Megatron requires m to be a multiple of p.",
        },
        formula="T = m(F + B) + (p − 1)(F + B)/v",
        metric="p2p_messages",
        phases=("interleaved",),
    ),
    NarrativeStep(
        "zero-bubble",
        {"es": "Zero-bubble: separar B y W", "en": "Zero-bubble: splitting B and W"},
        {
            "es": "El backward tiene dos partes: el gradiente de la entrada (B), que la etapa anterior "
            "espera, y el de los pesos (W), que nadie espera. ZB-H1 hace B en cuanto puede y deja W "
            "para los huecos del vaciado: la burbuja pasa de (p−1)(F+B+W) a (p−1)(F+B−W), y ningún "
            "rango guarda más de p microlotes, el pico de 1F1B.",
            "en": "The backward has two parts: the input gradient (B), which the previous stage is "
            "waiting for, and the weight gradient (W), which nobody waits for. ZB-H1 runs B as soon "
            "as it can and moves W into the drain's gaps: the bubble falls from (p−1)(F+B+W) to "
            "(p−1)(F+B−W), and no rank holds more than p microbatches, 1F1B's peak.",
        },
        formula="T = m(F + B + W) + (p − 1)(F + B − W)",
        metric="makespan_s",
        phases=("zero-bubble",),
    ),
)
