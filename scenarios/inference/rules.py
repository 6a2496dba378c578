"""Lesson 7's rules between its params: what InferenceParams.check refuses.

Split out of scenarios.inference.lesson (so it reads in one sitting): the
degrees must fit the model and the ranks, every request must fit the context
and the KV cache, `predict` plans within a bounded work, and a real run serves
the fp32 MiniGPT on every rank. Each refusal is a ParamError naming its field,
in English and in Spanish (`es`).

Imports: the lesson contract and the lesson's pure modules (the UI imports this).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scenarios.inference.blocks import blocks_for
from scenarios.inference.trace import longest_context
from scenarios.params import Mode, ParamError

if TYPE_CHECKING:
    from scenarios.inference.lesson import InferenceParams

# `predict` plans every token of every mode's trace on every stage (some 7 us per
# sequence step): this many, over the modes, plan in a fraction of a second.
MAX_PREDICT_TOKENS = 30_000
# ... and writes every position of every request in its block table: this many at most.
MAX_PREDICT_POSITIONS = 400_000


def check(params: InferenceParams, mode: Mode) -> None:
    """Refuse (ParamError) params that break a rule between them."""
    for name in ("rate", "ttft_slo", "tpot_slo"):
        if getattr(params, name) <= 0:
            value = getattr(params, name)
            raise ParamError(
                name,
                f"{name}={value:g}: must be more than 0",
                es=f"{name}={value:g}: debe ser mayor que 0",
            )
    for m in params.mode:
        degree = params.degree(m)
        if mode == "run" and degree != params.ranks:
            raise ParamError(
                m,
                f"{m}={degree}: a real run of mode {m} uses every rank "
                f"({params.ranks}); leave {m} out or give --ranks {degree}",
                es=f"{m}={degree}: una ejecución real del modo {m} usa todos los rangos "
                f"({params.ranks}); quite {m} o dé --ranks {degree}",
            )
    shape = params.shape
    tp = params.degree("tp") if "tp" in params.mode else 1
    if shape.heads % tp or shape.vocab % tp:
        raise ParamError(
            "tp",
            f"tp={tp}: must divide heads={shape.heads} and "
            f"vocab={shape.vocab} (each rank holds whole heads and "
            "an equal slice of the vocabulary)",
            es=f"tp={tp}: debe dividir heads={shape.heads} y vocab={shape.vocab} (cada "
            "rango tiene cabezas enteras y una parte igual del vocabulario)",
        )
    if "pp" in params.mode and params.degree("pp") > shape.layers:
        pp = params.degree("pp")
        raise ParamError(
            "pp",
            f"pp={pp}: at most layers={shape.layers} stages",
            es=f"pp={pp}: a lo sumo layers={shape.layers} etapas",
        )
    steps = (
        params.requests
        * params.output_len
        * sum(params.degree(m) if m == "pp" else 1 for m in params.mode)
    )
    if mode == "predict" and steps > MAX_PREDICT_TOKENS:
        raise ParamError(
            "requests",
            f"requests={params.requests}: requests x output_len, over the modes (x pp "
            f"for pp), is at most {MAX_PREDICT_TOKENS:,} in predict, which plans every "
            "token on every stage (fewer requests or a shorter output)",
            es=f"requests={params.requests}: requests x output_len, sobre los modos (x pp "
            f"para pp), es a lo sumo {MAX_PREDICT_TOKENS:,} en predict, que planifica cada "
            "token en cada etapa (menos peticiones o una salida más corta)",
        )
    longest = longest_context(params.trace_spec)
    if mode == "predict" and params.requests * longest > MAX_PREDICT_POSITIONS:
        raise ParamError(
            "prompt_len",
            f"prompt_len={params.prompt_len}: requests x longest request ({params.requests} x "
            f"{longest} positions) is at most {MAX_PREDICT_POSITIONS:,} in "
            "predict, which places every position in the KV cache",
            es=f"prompt_len={params.prompt_len}: requests x petición más larga "
            f"({params.requests} x {longest} posiciones) es a lo sumo "
            f"{MAX_PREDICT_POSITIONS:,} en predict, que coloca cada posición en la caché KV",
        )
    if longest > shape.seq:
        raise ParamError(
            "prompt_len",
            f"prompt_len={params.prompt_len}: a request may take {longest} positions (prefix, "
            f"prompt and output) but the model's context is seq={shape.seq}",
            es=f"prompt_len={params.prompt_len}: una petición puede ocupar {longest} "
            f"posiciones (prefijo, prompt y salida) pero el contexto del modelo es "
            f"seq={shape.seq}",
        )
    if blocks_for(longest, params.kv_block) > params.kv_blocks:
        raise ParamError(
            "kv_blocks",
            f"kv_blocks={params.kv_blocks}: the longest request "
            f"needs {blocks_for(longest, params.kv_block)} blocks of {params.kv_block}",
            es=f"kv_blocks={params.kv_blocks}: la petición más larga necesita "
            f"{blocks_for(longest, params.kv_block)} bloques de {params.kv_block}",
        )
    if mode == "run":
        minigpt = (
            params.kv_heads in (0, shape.heads),
            params.head_dim in (0, shape.head_dim),
            params.dtype == "fp32",
            params.params == "auto",
        )
        if not all(minigpt):
            name = ("kv_heads", "head_dim", "dtype", "params")[minigpt.index(False)]
            raise ParamError(
                name,
                f"{name}: a real run serves the fp32 MiniGPT (kv_heads = "
                "heads, head_dim = hidden/heads); other shapes are for predict",
                es=f"{name}: una ejecución real sirve la MiniGPT en fp32 (kv_heads = "
                "heads, head_dim = hidden/heads); otras formas son para predict",
            )
