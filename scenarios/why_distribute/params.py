"""Lesson 0's params and rank result: the model, the run, the GPUs, the budget, the demo.

Read by every module of the package that needs them (the report, the demonstration,
the rank code, the lesson); they read the package's arithmetic (.footprint, .gpus,
.phrases), never the modules above.

Imports: runtime's pure part, the lesson contract and the lesson's pure modules (the
UI imports this).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from runtime.sim import formulas
from scenarios.base import RankResult
from scenarios.params import (
    KNOB,
    Knob,
    Mode,
    ParamError,
    Params,
    choice,
    count,
    duration,
    integer,
    number,
    shown,
    size,
)
from scenarios.shape import GPTShape
from scenarios.why_distribute.footprint import RECOMPUTE, Layout, shape_for, training_bytes
from scenarios.why_distribute.gpus import GPUS
from scenarios.why_distribute.model import MLPS, PRESETS, Model
from scenarios.why_distribute.phrases import phrase

# The MiniGPT the real demonstration trains (fp32, Adam): big enough that its training
# state, not its activations, is what the cap refuses; small enough for 2 cores.
DEMO_SHAPE: dict[str, int] = dict(layers=2, hidden=64, heads=4, seq=16, vocab=64)


def _refused(field: str, key: str, **values: object) -> ParamError:
    """A rule between the params, broken: texts.toml [phrases] `key`, English and Spanish."""
    return ParamError(field, phrase(key, "en", **values), es=phrase(key, "es", **values))


# A GFLOP/s: below it a training's days overflow any clock (and no GPU is that slow).
MIN_ACHIEVED_TFLOPS = 1e-3


# -- two knobs typed as a small syntax: the MLP's width, and a pinned layout -------------
LAYOUT_SYNTAX = "auto, tpT,ppP,dpD[,cpC][,vV][,zero1|zero3][,mbsB]"
FFN_SYNTAX = "auto, N, Nh (14336, 4h)"
LAYOUT_PART = re.compile(r"(tp|pp|dp|cp|v|mbs)([0-9]{1,6})|(ddp|zero1|zero2|zero3)")


@dataclass(frozen=True)
class Spec(Knob):
    """A knob whose value is a short syntax (`4h`, `tp8,pp12,dp8`), checked by `read`;
    kept as typed. Wrong input names the field and the syntax, in both languages."""

    syntax: str = ""
    read: Any = None  # str -> parsed value, ValueError when wrong
    examples: tuple[str, ...] = ()  # values the syntax accepts, for help and tests

    def allowed_parts(self, mode: Mode) -> list[tuple[str, dict[str, str]]]:
        return [("one_of", {"choices": self.syntax})]

    def parse(self, name: str, text: Any, mode: Mode) -> Any:
        value = str(text).strip().replace(" ", "")
        try:
            if not value.isprintable() or len(value) > 80:
                raise ValueError(value)
            if value != "auto":
                self.read(value)
        except ValueError:
            values = dict(name=name, value=shown(str(text)[:80]), syntax=self.syntax)
            raise _refused(name, "bad_syntax", **values) from None
        return value

    def format(self, value: Any) -> str:
        return str(value)


def spec(default: str, syntax: str, read: Any, examples: tuple[str, ...]) -> Any:
    knob = Spec("text", syntax=syntax, read=read, examples=examples)
    return field(default=default, metadata={KNOB: knob})


def read_ffn(text: str) -> tuple[int, bool]:
    """`14336` -> (14336, False); `4h` -> (4, True): a multiple of hidden."""
    multiple = text.endswith("h")
    number = int(text[:-1] if multiple else text, 10)
    if number < 1:
        raise ValueError(text)
    return number, multiple


def read_layout(text: str) -> dict[str, Any]:
    """`tp8,pp12,dp8,cp2,v2,zero1,mbs2` -> its degrees (each at most once)."""
    out: dict[str, Any] = {}
    for part in text.split(","):
        match = LAYOUT_PART.fullmatch(part)
        if match is None:
            raise ValueError(part)
        key = "zero" if match.group(3) else match.group(1)
        value = match.group(3) or int(match.group(2))
        if key in out or value == 0:
            raise ValueError(part)
        out[key] = value
    return out


# -- parameters -------------------------------------------------------------------------
@dataclass(frozen=True)
class WhyParams(Params):
    params: int | str = count("auto", maximum=10**13)
    tokens: int | str = count("auto")
    deadline: float = duration(0.0, minimum=0.0)  # 0: none given, so only memory can press
    gpu: str = choice("a100-80gb", tuple(GPUS))
    gpus: int = integer(8, 1, 1 << 16)
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

    def check(self, mode: Mode) -> None:
        if self.ranks & (self.ranks - 1):
            raise _refused("ranks", "ranks_power_of_two", ranks=self.ranks)
        if self.gpus % min(self.gpus_per_node, self.gpus):
            raise _refused("gpus", "whole_nodes", gpus=self.gpus, per_node=self.gpus_per_node)
        if self.global_batch and self.global_batch < self.microbatch_size:
            raise _refused(
                "global_batch",
                "global_batch_small",
                batch=self.global_batch,
                micro=self.microbatch_size,
            )
        if 0 < self.achieved_tflops < MIN_ACHIEVED_TFLOPS:  # 0: the GPU's own figure
            raise _refused("achieved_tflops", "achieved_tiny", least=MIN_ACHIEVED_TFLOPS)
        self._check_shape()
        self._check_layout(mode)

    def _check_shape(self) -> None:
        if self.shape_given and self.params != "auto":
            raise _refused("params", "params_and_shape", params=self.params)
        if not self.shape_given:
            for name in ("ffn", "kv_heads", "vocab", "mlp"):
                default = "auto" if name in ("ffn", "mlp") else 0
                if getattr(self, name) != default:
                    raise _refused(name, "shape_needs", name=name)
            return
        shape = self.shape
        for name in ("layers", "hidden", "heads"):
            if not getattr(shape, name):
                raise _refused(name, "shape_needs", name=name)
        if shape.hidden % shape.heads:
            raise _refused("heads", "heads_divide", heads=shape.heads, hidden=shape.hidden)
        if shape.heads % shape.kv:
            raise _refused("kv_heads", "kv_divide", kv=shape.kv, heads=shape.heads)

    def _check_layout(self, mode: Mode) -> None:
        lay = self.pinned
        if lay is None:
            return
        shape, text = self.shape, self.layout
        if lay.gpus != self.gpus:
            raise _refused("layout", "layout_product", layout=text, n=lay.gpus, gpus=self.gpus)
        if shape.heads % lay.tp:
            raise _refused("layout", "layout_tp", layout=text, tp=lay.tp, heads=shape.heads)
        if lay.pp * lay.chunks > shape.layers:
            raise _refused("layout", "layout_pp", layout=text, layers=shape.layers)
        if shape.seq % (2 * lay.cp) and lay.cp > 1:
            raise _refused("layout", "layout_cp", layout=text, cp=lay.cp, seq=shape.seq)
        if lay.zero in ("zero2", "zero3") and lay.pp > 1:
            raise _refused("layout", "layout_zero", layout=text, zero=lay.zero)
        if lay.dp * lay.micro > self.batch:
            raise _refused("layout", "layout_batch", layout=text, batch=self.batch)
        memory = training_bytes(
            shape.psi, shape, self.precision, lay, flash=self.attention == "flash"
        )
        total, room = sum(memory.values()), GPUS[self.gpu].memory_bytes
        if total > room:
            gb = {"need": f"{total / 1e9:,.1f}", "room": f"{room / 1e9:,.1f}"}
            raise _refused("layout", "layout_memory", layout=text, **gb)

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
        return Layout(tp, pp, dp, zero, recompute, micro, m, got.get("v", 1), cp)

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
