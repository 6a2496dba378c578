"""Every collective of a rank's trace: its kind, size, group, and the mechanism a lesson teaches.

Part of playground.kineto (issue 39). Where a trace records communication:

- NCCL jobs: each GPU kernel `ncclKernel_<Op>_<ALGO>_<PROTO>_…` / `ncclDevKernel_<Op>…`
  is one collective as the device ran it; its CPU op (`nccl:all_reduce`,
  `nccl:_all_gather_base`, …) is found through the kernel's launch (the `cuda_runtime`
  event of the same `correlation`) and the op enclosing that launch on the same thread,
  and its sizes from the `record_param_comms` op enclosing it (`In/Out msg nelems`,
  `dtype`, `Group size`) or the op's own `Input Dims` (recorded with record_shapes);
- gloo (and other CPU backends): each CPU op `gloo:<op>` is one collective.

The kind is the name torch gives the op, normalised to runtime.sim.collective_kinds'
names (`_all_gather_base` and `all_gather_into_tensor` are `all_gather`); a
`SendRecv` kernel without its op says `send_recv` (an all-to-all and pipeline
sends both run it). The mechanism is named only where the trace says it (the names of
the ops enclosing the collective, else the job's own annotations: DDP's
`DistributedDataParallel.forward`, FSDP's `FSDP::…`, pipelining's stages…, or the
`mechanism` our own --trace export writes); otherwise it is None, "cannot tell".

Pure: stdlib only.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass

from playground.kineto.figures import kernel_kind
from playground.kineto.reader import RankTrace
from playground.kineto.schema import Event

KERNEL = re.compile(
    r"nccl(?:Dev)?Kernel_(?P<op>[A-Za-z]+)(?:_(?P<algo>RING|TREE|COLLNET\w*?|NVLS\w*?|PAT))?"
    r"(?:_(?P<proto>LL128|LL|SIMPLE))?"
)
CPU_OP = re.compile(r"^(?P<backend>nccl|gloo|mpi|ucc|xccl|hccl|sim):(?P<op>\w+)$")
_PLAIN_KIND = re.compile(r"[a-z0-9_]{1,40}")
_KERNEL_OPS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "send_recv",
    "send": "send",
    "recv": "recv",
}
_OP_KINDS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "broadcast": "broadcast",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv",
    "barrier": "barrier",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
}
# Element sizes of the dtypes torch writes (record_param_comms' `dtype`, `Input type`).
DTYPE_BYTES = {
    "float": 4, "double": 8, "half": 2, "bfloat16": 2, "long": 8, "longint": 8, "int": 4,
    "short": 2, "unsignedchar": 1, "signedchar": 1, "byte": 1, "char": 1, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "complexfloat": 8, "complexdouble": 16,
}  # fmt: skip

# Mechanisms: (kinds, words in the names that reveal it, key, the lesson to open).
MECHANISMS = (
    (("all_gather",), ("fsdp", "fullyshardeddataparallel", "zero3", "zero_3"), "fsdp_param_all_gather", "zero"),
    (("reduce_scatter",), ("fsdp", "fullyshardeddataparallel", "zero3", "zero_3"), "fsdp_grad_reduce_scatter", "zero"),
    (("all_gather", "reduce_scatter"), ("sequence_parallel", "sequenceparallel"), "sequence_parallel", "tensor-parallel"),
    (("all_reduce",), ("rowwiseparallel", "colwiseparallel", "rowparallellinear", "columnparallellinear", "tensor_model_parallel", "tensor_parallel"), "tp_f_g_all_reduce", "tensor-parallel"),
    (("all_reduce",), ("distributeddataparallel", "ddp"), "ddp_bucket_all_reduce", "mixed-precision"),
    (("send", "recv", "send_recv"), ("pipelinestage", "pipelining", "pipelineschedule", "pipeline"), "pipeline_send_recv", "pipeline"),
    (("all_to_all", "send_recv"), ("moe", "mixtureofexperts", "expert"), "moe_all_to_all", None),
)  # fmt: skip
MECHANISM_NAMES = {
    "fsdp_param_all_gather": ("FSDP/ZeRO-3 parameter all-gather", "all-gather de parámetros de FSDP/ZeRO-3"),
    "fsdp_grad_reduce_scatter": ("FSDP/ZeRO gradient reduce-scatter", "reduce-scatter de gradientes de FSDP/ZeRO"),
    "sequence_parallel": ("sequence-parallel all-gather/reduce-scatter", "all-gather/reduce-scatter del paralelismo de secuencia"),
    "tp_f_g_all_reduce": ("tensor parallelism's f/g all-reduce", "all-reduce f/g del paralelismo tensorial"),
    "ddp_bucket_all_reduce": ("DDP bucket all-reduce", "all-reduce por cubos (buckets) de DDP"),
    "pipeline_send_recv": ("pipeline send/recv between stages", "send/recv del pipeline entre etapas"),
    "moe_all_to_all": ("MoE all-to-all (tokens to experts)", "all-to-all de MoE (tokens a expertos)"),
    "ring_all_reduce": ("ring all-reduce", "all-reduce en anillo"),
}  # fmt: skip
# The lesson that teaches each mechanism (None: no lesson yet).
LESSON_OF = {key: lesson for _, _, key, lesson in MECHANISMS} | {
    "ring_all_reduce": "ring-allreduce"
}
_CONTEXT = re.compile(
    r"record_param_comms|^(nccl|gloo|mpi|ucc|xccl|hccl|sim):|fsdp|fullysharded|sequence.?parallel"
    r"|rowwise|colwise|parallellinear|tensor.?model.?parallel|tensor.?parallel|distributeddataparallel"
    r"|ddp|pipelin|moe|expert",
    re.IGNORECASE,
)


MAX_DEPTH = 256  # ops looked at above a collective (a real call stack is far shallower)
MAX_DIM = 1 << 40  # one dimension of a recorded shape


@dataclass(frozen=True)
class Collective:
    """One collective as one rank's trace shows it (times in µs of the trace's clock)."""

    rank: int
    kind: str
    op: str  # the CPU op's or the kernel's name, as the trace wrote it
    start_us: float
    end_us: float
    nbytes: int | None  # the buffer as nccl-tests counts it (the larger of in and out)
    group: int | None
    algorithm: str | None  # RING, TREE, … (an NCCL kernel's name says it)
    protocol: str | None  # LL, LL128, SIMPLE
    on_gpu: bool
    mechanism: str | None  # a MECHANISM_NAMES key; None: the trace does not tell
    lesson: str | None
    peer: int | None = None
    action_id: str | None = None

    @property
    def seconds(self) -> float:
        return max(0.0, self.end_us - self.start_us) / 1e6


def normalise(op: str) -> str:
    """A torch op's collective name as a kind (`_all_gather_base` → `all_gather`)."""
    word = op.lower().lstrip("_")
    for tail in ("_coalesced", "_base", "_into_tensor", "_tensor", "_single", "_v"):
        word = word.replace(tail, "")
    kind = _OP_KINDS.get(word.replace("_", ""), word)
    # A kind becomes a series name, a legend entry, a colour key: only a plain identifier
    # from a file from elsewhere (never an escape sequence or markup).
    return kind if _PLAIN_KIND.fullmatch(kind) else "other"


def dtype_bytes(name: str | None) -> int | None:
    if not name:
        return None
    word = name.lower().replace("c10::", "").replace(" ", "").replace("_t", "")
    return DTYPE_BYTES.get(word)


class _Context:
    """The ops on one thread that can say what a collective is, found by time.

    Ops on a thread nest (a profiler records a call stack), so each op's parent is found
    once, in one sweep; the ops running at a time are then the last op started before it
    and its ancestors. The walk up is capped (MAX_DEPTH): a hostile trace's millions of
    nested ops cost a bounded time per collective, never a quadratic one."""

    def __init__(self, events: list[Event]) -> None:
        self.events = sorted(events, key=lambda e: (e.ts or 0.0, -(e.dur or 0.0)))
        self.starts = [e.ts or 0.0 for e in self.events]
        self.parent: list[int] = []
        stack: list[int] = []
        for index, event in enumerate(self.events):
            while stack and _end(self.events[stack[-1]]) < (event.ts or 0.0):
                stack.pop()
            self.parent.append(stack[-1] if stack else -1)
            stack.append(index)

    def enclosing(self, t: float) -> list[Event]:
        """The ops running at `t`, innermost first (at most MAX_DEPTH of them)."""
        out: list[Event] = []
        index = bisect.bisect_right(self.starts, t) - 1
        steps = 0
        while index >= 0 and steps < MAX_DEPTH:
            event = self.events[index]
            if _end(event) >= t:
                out.append(event)
            index = self.parent[index]
            steps += 1
        return out


def _end(event: Event) -> float:
    return (event.ts or 0.0) + (event.dur or 0.0)


def collectives(trace: RankTrace) -> list[Collective]:
    """The rank's collectives in time order, each named as far as the trace tells."""
    by_thread: dict[object, list[Event]] = defaultdict(list)
    launches: dict[int, Event] = {}
    kernels: list[Event] = []
    names: set[str] = set()
    for event in trace.events:
        if event.ts is None or event.dur is None:
            continue
        names.add(event.name)
        args = event.args
        if event.cat == "kernel" and kernel_kind(event.name) == "communication":
            kernels.append(event)
        elif event.cat == "cuda_runtime" and args is not None and isinstance(args.correlation, int):
            launches[args.correlation] = event
        elif event.cat != "kernel" and _CONTEXT.search(event.name):
            by_thread[(event.pid, event.tid)].append(event)
    contexts = {key: _Context(events) for key, events in by_thread.items()}
    job_words = " ".join(sorted(n for n in names if _CONTEXT.search(n))).lower()
    found: list[Collective] = []
    for kernel in kernels:
        launch = launches.get(kernel.args.correlation) if kernel.args else None  # type: ignore[arg-type]
        stack: list[Event] = []
        if launch is not None and (context := contexts.get((launch.pid, launch.tid))):
            stack = context.enclosing(launch.ts or 0.0)
        found.append(_from_kernel(trace, kernel, stack, job_words))
    if not kernels:  # a CPU backend: the ops themselves are the collectives
        for context in contexts.values():
            for event in context.events:
                match = CPU_OP.match(event.name)
                if match:
                    stack = context.enclosing(event.ts or 0.0)
                    found.append(_from_op(trace, event, match["op"], stack, job_words))
    return sorted(found, key=lambda c: c.start_us)


def _from_kernel(trace: RankTrace, kernel: Event, stack: list[Event], job: str) -> Collective:
    match = KERNEL.search(kernel.name)
    op_event = next((e for e in stack if CPU_OP.match(e.name)), None)
    if op_event is not None:
        kind = normalise(CPU_OP.match(op_event.name)["op"])  # type: ignore[index]
    elif kernel.args is not None and kernel.args.collective:
        kind = normalise(kernel.args.collective)
    elif match:
        kind = _KERNEL_OPS.get(match["op"].lower(), "other")
    else:
        kind = "other"
    sources = [e for e in stack if e.name == "record_param_comms"] + [kernel]
    if op_event is not None:
        sources.append(op_event)
    nbytes, group = _sizes(trace, sources)
    mechanism, lesson = _mechanism(kind, stack, job, kernel)
    return Collective(
        rank=trace.rank,
        kind=kind,
        op=op_event.name if op_event is not None else kernel.name,
        start_us=kernel.ts or 0.0,
        end_us=(kernel.ts or 0.0) + (kernel.dur or 0.0),
        nbytes=nbytes,
        group=group,
        algorithm=match["algo"] if match else None,
        protocol=match["proto"] if match else None,
        on_gpu=True,
        mechanism=mechanism,
        lesson=lesson,
    )


def _from_op(trace: RankTrace, op: Event, name: str, stack: list[Event], job: str) -> Collective:
    kind = normalise(name)
    sources = [e for e in stack if e.name == "record_param_comms"] + [op]
    nbytes, group = _sizes(trace, sources)
    mechanism, lesson = _mechanism(kind, stack, job, op)
    args = op.args
    return Collective(
        rank=trace.rank,
        kind=kind,
        op=op.name,
        start_us=op.ts or 0.0,
        end_us=(op.ts or 0.0) + (op.dur or 0.0),
        nbytes=nbytes,
        group=group,
        algorithm=None,
        protocol=None,
        on_gpu=False,
        mechanism=mechanism,
        lesson=lesson,
        peer=args.peer if args is not None else None,
        action_id=args.action_id if args is not None else None,
    )


def _sizes(trace: RankTrace, sources: list[Event]) -> tuple[int | None, int | None]:
    """(bytes, group size) from the first source that records them."""
    nbytes: int | None = None
    group: int | None = None
    for event in sources:
        args = event.args
        if args is None:
            continue
        if group is None and args.group_size is not None and args.group_size > 0:
            group = args.group_size
        if group is None and args.pg_name is not None:
            group = trace.pg_sizes.get(args.pg_name)
        if nbytes is None and args.bytes is not None and args.bytes >= 0:
            nbytes = args.bytes
        if nbytes is None and (args.in_nelems is not None or args.out_nelems is not None):
            size = dtype_bytes(args.dtype)
            if size is not None:
                nbytes = max(args.in_nelems or 0, args.out_nelems or 0) * size
        if nbytes is None and len(args.input_dims):
            nbytes = _shape_bytes(bytes(args.input_dims), bytes(args.input_type))
    if group is None:
        group = trace.world_size
    return nbytes, group


def _shape_bytes(dims_raw: bytes, types_raw: bytes) -> int | None:
    """The largest tensor among `Input Dims` (flat shapes only) in bytes, its `Input type`
    giving the element size; None if they do not say. Bounded: raw bytes already capped."""
    try:
        dims = json.loads(dims_raw)
        types = json.loads(types_raw) if types_raw else []
    except (ValueError, RecursionError):
        return None
    best: int | None = None
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    for shape, dtype in zip(dims, types + [None] * (len(dims) - len(types)), strict=False):
        if not isinstance(shape, list) or not shape or len(shape) > 16:
            continue
        if not all(isinstance(d, int) and 0 <= d <= MAX_DIM for d in shape):
            continue
        size = dtype_bytes(dtype if isinstance(dtype, str) else None)
        if size is None:
            continue
        total = math.prod(shape) * size
        best = total if best is None else max(best, total)
    return best


def _mechanism(
    kind: str, stack: list[Event], job: str, event: Event
) -> tuple[str | None, str | None]:
    """The mechanism the names around the collective reveal: its own ops first, then the
    job's annotations; (None, None) when nothing says."""
    own = event.args.mechanism if event.args is not None else None
    if own in MECHANISM_NAMES:  # our own export says what the lesson ran
        return own, LESSON_OF.get(own)
    local = " ".join(e.name for e in stack).lower()
    for words_of in (local, job):
        for kinds, words, key, lesson in MECHANISMS:
            if kind in kinds and any(w in words_of for w in words):
                return key, lesson
    return None, None
