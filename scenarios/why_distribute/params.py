"""Lesson 0's params and rank result: the model, the run, the GPUs, the budget, the demo.

Read by every module of the package that needs them (the report, the demonstration,
the rank code, the lesson); they read the package's arithmetic (.footprint, .gpus,
.model) and its two knobs typed as a syntax (.syntax: `ffn`, `layout`), never the
modules above.

Imports: runtime's pure part, the lesson contract and the lesson's pure modules (the
UI imports this).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from runtime.sim import formulas
from scenarios.base import RankResult
from scenarios.params import (
    Mode,
    Params,
    choice,
    count,
    duration,
    integer,
    number,
    size,
)
from scenarios.shape import GPTShape
from scenarios.why_distribute.footprint import (
    RECOMPUTE,
    Layout,
    fits_chunks,
    shape_for,
    training_bytes,
)
from scenarios.why_distribute.gpus import GPUS
from scenarios.why_distribute.model import MLPS, PRESETS, Model
from scenarios.why_distribute.syntax import (
    FFN_SYNTAX,
    LAYOUT_SYNTAX,
    read_ffn,
    read_layout,
    refused,
    spec,
)

# The MiniGPT the real demonstration trains (fp32, Adam): big enough that its training
# state, not its activations, is what the cap refuses; small enough for 2 cores.
DEMO_SHAPE: dict[str, int] = dict(layers=2, hidden=64, heads=4, seq=16, vocab=64)


# A GFLOP/s: below it a training's days overflow any clock (and no GPU is that slow).
MIN_ACHIEVED_TFLOPS = 1e-3


# -- the questions the lesson opens on (issue 40): a model, a GPU, a cluster -------------
@dataclass(frozen=True)
class Question:
    """What `question` fills into the knobs left at auto: the model (a preset, or "none":
    the MiniGPT), the GPU and how many of them. Anything the learner types wins."""

    preset: str
    gpu: str
    gpus: int


# The 7B first (memory: its training state outgrows one 80 GiB GPU), then 70B on 8 nodes
# of 8 H100s (memory and scale: which plan), then the MiniGPT the real run trains.
QUESTIONS: dict[str, Question] = {
    "7b-one-gpu": Question("llama2-7b", "a100-80gb", 1),
    "70b-64-gpus": Question("llama3-70b", "h100-80gb", 64),
    "minigpt": Question("none", "a100-80gb", 8),
}
# The knobs that name the model: typing any of them sets the model aside from the question.
MODEL_KNOBS = ("params", "preset", "layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "mlp")


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class WhyParams(Params):
    question: str = choice("7b-one-gpu", tuple(QUESTIONS))
    params: int | str = count("auto", maximum=10**13)
    tokens: int | str = count("auto")
    deadline: float = duration(0.0, minimum=0.0)  # 0: none given, so only memory can press
    gpu: str = choice("auto", ("auto", *GPUS))
    gpus: int = integer(0, 0, 1 << 16)  # 0: the question's
    gpus_per_node: int = integer(8, 1, 64)
    precision: str = choice("mixed", formulas.ZERO_PRECISIONS)
    recompute: str = choice("auto", ("auto", *RECOMPUTE))
    microbatch_size: int = integer(1, 1, 8, 1024)
    preset: str = choice("none", ("none", *PRESETS))
    layers: int = integer(0, 0, 1 << 12)
    hidden: int = integer(0, 0, 1 << 18)
    ffn: str = spec("auto", FFN_SYNTAX, read_ffn, ("4h", "14336", "28672"))
    heads: int = integer(0, 0, 1 << 12)
    kv_heads: int = integer(0, 0, 1 << 12)
    vocab: int = integer(0, 0, 1 << 22)
    mlp: str = choice("auto", ("auto", *MLPS))
    attention: str = choice("naive", ("naive", "flash"))
    seq: int = integer(0, 0, 1 << 20)
    layout: str = spec("auto", LAYOUT_SYNTAX, read_layout, ("tp8,pp1,dp1", "tp1,pp1,dp8,zero3"))
    global_batch: int = integer(0, 0, 1 << 24)
    achieved_tflops: float = number(0.0, 0.0, 1e6)
    price: float = number(0.0, 0.0, 1e4)
    spot: str = choice("no", ("no", "yes"))
    setup: float = duration(0.0, minimum=0.0)
    margin: float = number(1.0, 1.0, 100.0)
    budget: float = number(5.0, 0.0, 1e9)
    rank_by: str = choice("time", ("time", "cost"))
    top: int = integer(8, 1, 64)
    ranks: int = integer(4, 2, 8, 8)
    gpu_memory: int = size(0)
    steps: int = integer(3, 1, 5)

    def _filled(self, raw: Any, mode: Mode) -> WhyParams:
        """The typed values, then the question's model, GPU and GPUs in the knobs left
        at auto (so every reader, and `to_dict`, sees the concrete ones)."""
        typed = super()._filled(raw, mode)
        return typed.asked()

    def asked(self) -> WhyParams:
        """These params with the question filled in where nothing was typed."""
        question, values = QUESTIONS[self.question], {}
        if self.gpu == "auto":
            values["gpu"] = question.gpu
        if self.gpus == 0:
            values["gpus"] = question.gpus
        defaults = WhyParams.__dataclass_fields__
        if all(getattr(self, name) == defaults[name].default for name in MODEL_KNOBS):
            values["preset"] = question.preset
        return replace(self, **values) if values else self

    def check(self, mode: Mode) -> None:
        if self.ranks & (self.ranks - 1):
            raise refused("ranks", "ranks_power_of_two", ranks=self.ranks)
        if self.gpus % min(self.gpus_per_node, self.gpus):
            raise refused("gpus", "whole_nodes", gpus=self.gpus, per_node=self.gpus_per_node)
        if self.global_batch and self.global_batch < self.microbatch_size:
            raise refused(
                "global_batch",
                "global_batch_small",
                batch=self.global_batch,
                micro=self.microbatch_size,
            )
        if 0 < self.achieved_tflops < MIN_ACHIEVED_TFLOPS:  # 0: the GPU's own figure
            raise refused("achieved_tflops", "achieved_tiny", least=MIN_ACHIEVED_TFLOPS)
        self._check_shape()
        self._check_layout(mode)

    def _check_shape(self) -> None:
        if self.shape_given and self.params != "auto":
            raise refused("params", "params_and_shape", params=self.params)
        if not self.shape_given:
            for name in ("ffn", "kv_heads", "vocab", "mlp"):
                default = "auto" if name in ("ffn", "mlp") else 0
                if getattr(self, name) != default:
                    raise refused(name, "shape_needs", name=name)
            return
        shape = self.shape
        for name in ("layers", "hidden", "heads"):
            if not getattr(shape, name):
                raise refused(name, "shape_needs", name=name)
        if shape.hidden % shape.heads:
            raise refused("heads", "heads_divide", heads=shape.heads, hidden=shape.hidden)
        if shape.heads % shape.kv:
            raise refused("kv_heads", "kv_divide", kv=shape.kv, heads=shape.heads)

    def _check_layout(self, mode: Mode) -> None:
        lay = self.pinned
        if lay is None:
            return
        shape, text = self.shape, self.layout
        if lay.gpus != self.gpus:
            raise refused("layout", "layout_product", layout=text, n=lay.gpus, gpus=self.gpus)
        if shape.heads % lay.tp:
            raise refused("layout", "layout_tp", layout=text, tp=lay.tp, heads=shape.heads)
        if not fits_chunks(shape.layers, lay.pp * lay.chunks):
            raise refused("layout", "layout_pp", layout=text, layers=shape.layers)
        if shape.seq % (2 * lay.cp) and lay.cp > 1:
            raise refused("layout", "layout_cp", layout=text, cp=lay.cp, seq=shape.seq)
        if lay.zero == "zero3" and lay.pp > 1:
            raise refused("layout", "layout_zero", layout=text, zero=lay.zero)
        if lay.engine == "deepspeed" and lay.chunks > 1:
            raise refused("layout", "layout_engine", layout=text, chunks=lay.chunks)
        if lay.dp * lay.micro > self.batch:
            raise refused("layout", "layout_batch", layout=text, batch=self.batch)
        memory = training_bytes(
            shape.psi, shape, self.precision, lay, flash=self.attention == "flash"
        )
        total, room = sum(memory.values()), GPUS[self.gpu].memory_bytes
        if total > room:
            gb = {"need": f"{total / 2**30:,.1f}", "room": f"{room / 2**30:,.1f}"}  # GiB
            raise refused("layout", "layout_memory", layout=text, **gb)

    # -- what the params mean -------------------------------------------------------------
    @property
    def demo_shape(self) -> GPTShape:
        return GPTShape(**DEMO_SHAPE)

    @property
    def shape_given(self) -> bool:
        """A shape typed, or a preset: the model is that shape, Ψ follows from it."""
        return self.preset != "none" or any((self.layers, self.hidden, self.heads))

    @property
    def shape_source(self) -> str:
        """Where the planned shape comes from: preset, shape, derived (from params) or
        demo (the MiniGPT)."""
        if self.preset != "none":
            return "preset"
        if self.shape_given:
            return "shape"
        return "demo" if self.params == "auto" else "derived"

    @property
    def shape(self) -> Model:
        """The planned model: a preset's shape with what was typed over it, or the typed
        shape, or one derived from `params` (footprint.shape_for, at `seq` tokens, auto
        2048), or the MiniGPT's (`params=auto`)."""
        if not self.shape_given:
            if self.params == "auto":
                base = self.demo_shape
                seq = self.seq or base.seq
                mini = GPTShape(**{**DEMO_SHAPE, "seq": seq})
                return Model(
                    base.layers, base.hidden, base.heads, seq, base.vocab,
                    psi_given=float(mini.parameters),
                )  # fmt: skip
            return shape_for(int(self.params), self.seq or 2048)
        base = PRESETS[self.preset].model if self.preset != "none" else None
        hidden = self.hidden or (base.hidden if base else 0)
        mlp = self.mlp if self.mlp != "auto" else (base.mlp if base else "gelu")
        ffn = 0
        if self.ffn != "auto":
            number, multiple = read_ffn(self.ffn)
            ffn = number * hidden if multiple else number
        elif base and not self.hidden:
            ffn = base.ffn
        return Model(
            layers=self.layers or (base.layers if base else 0),
            hidden=hidden,
            heads=self.heads or (base.heads if base else 0),
            seq=self.seq or (base.seq if base else 2048),
            vocab=self.vocab or (base.vocab if base else 51200),
            ffn=ffn,
            kv_heads=self.kv_heads or (base.kv_heads if base and not self.heads else 0),
            mlp=mlp,
        )

    @property
    def psi(self) -> int:
        """Ψ: of the shape (a preset's or one typed), as given, or the MiniGPT's."""
        return round(self.shape.psi)

    @property
    def pinned(self) -> Layout | None:
        """The layout typed in `layout`, its microbatches from the global batch; None: auto."""
        if self.layout == "auto":
            return None
        got = read_layout(self.layout)
        tp, pp, cp = got.get("tp", 1), got.get("pp", 1), got.get("cp", 1)
        dp = got.get("dp", max(1, self.gpus // (tp * pp * cp)))
        micro = got.get("mbs", self.microbatch_size)
        m = max(1, math.ceil(self.batch / (dp * micro)))
        recompute = self.recompute if self.recompute != "auto" else "none"
        zero = got.get("zero", "ddp")
        engine = got.get("engine", "megatron")
        return Layout(tp, pp, dp, zero, recompute, micro, m, got.get("v", 1), cp, engine)

    @property
    def deadline_s(self) -> float:
        """The deadline in seconds; without one (0), time never presses."""
        return self.deadline or math.inf

    @property
    def total_tokens(self) -> float:
        """Training tokens: as given, or Chinchilla's 20 per parameter."""
        return 20.0 * self.psi if self.tokens == "auto" else float(self.tokens)

    @property
    def diagnosis_recompute(self) -> str:
        """The diagnosis' recomputation: as asked, none for auto."""
        return "none" if self.recompute == "auto" else self.recompute

    @property
    def batch(self) -> int:
        """Sequences per optimizer step: as given, or 512 (the MiniGPT: one per GPU)."""
        if self.global_batch:
            return self.global_batch
        if self.shape_source == "demo":
            return max(self.microbatch_size * self.gpus, 1)
        return max(512, self.microbatch_size)


@dataclass(frozen=True, kw_only=True)
class WhyResult(RankResult):
    """What each rank reports of the demonstration, per series: the peak bytes by
    category and the largest total it held, whether it refused (and the line saying
    why), how far its parameters are from one process training the same batches."""

    peaks: dict[str, dict[str, int]]
    peak_total: dict[str, int]
    refused: dict[str, dict[str, str]]  # series -> language -> the line saying why
    param_diff: dict[str, float]
    cpu_cores: int = 0  # the cores this rank may run on: 4 ranks on 2 cores cannot speed up
