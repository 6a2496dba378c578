"""Lesson 7's params, the rules between them, and the rank result.

The bottom of the lesson's own modules: the Program (.program), the metrics
(.report), the prediction (.predict, .goodput), the rank code (.rank) and the lesson
(.lesson) read these. The params are built from the serving mechanism's vocabulary
below them (the step model's Shape, the trace's TraceSpec, the plan's Serving, the
routers), which knows nothing of the params.

`check_rules`, what InferenceParams.check refuses: the degrees must fit the model
and the ranks, every request must fit the context and the KV cache, `predict` plans
within a bounded work, and a real run serves the fp32 MiniGPT on every rank. Each
refusal is a ParamError naming its field, in English and in Spanish (`es`).

Imports: the lesson contract and the lesson's pure mechanism (the UI imports this).
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.base import RankResult
from scenarios.inference.blocks import blocks_for
from scenarios.inference.plan import MODES, Serving
from scenarios.inference.router import ROUTERS
from scenarios.inference.stepmodel import DTYPE_BYTES, Shape
from scenarios.inference.trace import LENGTHS, TraceSpec, longest_context
from scenarios.params import (
    Mode,
    ParamError,
    Params,
    choice,
    choices,
    count,
    duration,
    integer,
    number,
)
from scenarios.shape import GPTShape

MAX_RUN_PARAMETERS = 1_000_000


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class InferenceParams(Params):
    mode: tuple[str, ...] = choices(("tp",), MODES)
    ranks: int = integer(2, 1, 4, 4096)
    tp: int = integer(0, 0, 4, 4096)
    pp: int = integer(0, 0, 4, 4096)
    replicas: int = integer(0, 0, 4, 4096)
    router: str = choice("round-robin", ROUTERS)
    batching: str = choice("continuous", ("continuous", "static"))
    max_batch: int = integer(8, 1, 64, 4096)
    rate: float = number(10.0, 0.0, 10_000.0, 1e9)
    requests: int = integer(16, 1, 64, 1000)
    prompt_len: int = integer(12, 1, 256, 1 << 20)
    output_len: int = integer(12, 1, 256, 1 << 20)
    lengths: str = choice("uniform", LENGTHS)
    prefixes: int = integer(0, 0, 16, 1024)
    prefix_len: int = integer(16, 0, 256, 1 << 20)
    ttft_slo: float = duration(0.25, 0.0)
    tpot_slo: float = duration(0.02, 0.0)
    attainment: float = number(0.9, 0.0, 1.0)
    kv_block: int = integer(8, 1, 64, 1024)
    kv_blocks: int = integer(128, 1, 4096, 1 << 20)
    seed: int = integer(0, 0, 2**31 - 1)
    model: GPTShape = GPTShape(
        layers=2, hidden=64, heads=4, seq=64, vocab=64, run_limit=MAX_RUN_PARAMETERS
    )
    kv_heads: int = integer(0, 0, 32, 1024)
    head_dim: int = integer(0, 0, 512, 4096)
    dtype: str = choice("fp32", tuple(DTYPE_BYTES))
    params: int | str = count("auto")
    gpus: int = integer(8, 1, 64, 4096)
    price: float = number(2.0, 0.0, 1000.0)

    def check(self, mode: Mode) -> None:
        check_rules(self, mode)  # below

    @property
    def world_size(self) -> int:
        """The most ranks a mode spans (on a real run, every mode spans all of them)."""
        return max(self.degree(m) for m in self.mode)

    def degree(self, mode: str) -> int:
        """Ranks a mode spans: its own knob, or every rank."""
        return int(getattr(self, mode)) or self.ranks

    @property
    def shape(self) -> Shape:
        m = self.model
        return Shape(
            layers=m.layers,
            hidden=m.hidden,
            heads=m.heads,
            kv_heads=self.kv_heads or m.heads,
            head_dim=self.head_dim or m.hidden // m.heads,
            vocab=m.vocab,
            seq=m.seq,
            dtype_bytes=DTYPE_BYTES[self.dtype],
            total_params=None if self.params == "auto" else int(self.params),
        )

    @property
    def trace_spec(self) -> TraceSpec:
        return TraceSpec(
            self.requests,
            self.rate,
            self.prompt_len,
            self.output_len,
            self.lengths,
            self.prefixes,
            self.prefix_len,
            self.model.vocab,
            self.seed,
        )

    def serving(self, mode: str) -> Serving:
        return Serving.of_mode(
            mode,
            self.degree(mode),
            batching=self.batching,
            router=self.router,
            max_batch=self.max_batch,
            kv_block=self.kv_block,
            kv_blocks=self.kv_blocks,
        )


@dataclass(frozen=True)
class SeriesRun:
    """What one rank saw of one mode: the requests it answered and whether their tokens
    are those of torch's own greedy decode (the whole model, one process, no cache)."""

    answered: int
    mismatched: list[int]  # request ids whose tokens differ
    kv_pool_bytes: int  # the KV pool this rank allocated
    kv_peak_bytes: int  # its blocks in use at the peak
    reference_tokens: int  # tokens torch's own decode produced for them, before the clock
    reference_s: float  # and the seconds it took (no cache: the whole sequence every step)


@dataclass(frozen=True, kw_only=True)
class InferenceResult(RankResult):
    """Per rank: `compute_costs` are measured/planned seconds of prefill and decode work
    (the step model's calibration), and each mode's run."""

    series: dict[str, SeriesRun]


# `predict` plans every token of every mode's trace on every stage: this many, over the
# modes, plan within the second predict promises.
MAX_PREDICT_TOKENS = 30_000
# ... and writes every position of every request in its block table: this many at most.
MAX_PREDICT_POSITIONS = 400_000


def check_rules(params: InferenceParams, mode: Mode) -> None:
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
