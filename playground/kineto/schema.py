"""The bounded shape of a PyTorch profiler (Kineto) trace, as msgspec decodes it.

Part of playground.kineto (issue 39). A trace comes from elsewhere, so it is decoded
against this schema and nothing else (docs/design.md's rule for saved files): every
string has a length cap, every list a length cap, every number must be finite (a
range, so 1e400 is refused), nesting is only what the types below allow, and fields
the analysis does not read are skipped without being kept. msgspec names the first
bad field (`$.traceEvents[12].ts`), which the reader's one-line refusal repeats.

Only what the analysis reads is declared: an event's phase, category, name, time
and duration, thread, and from its args the GPU stream, the launch correlation and
the sizes `record_param_comms` records. Input shapes (recorded with `record_shapes`)
stay raw bytes and are decoded on their own, leniently (playground.kineto.collectives).

Imports: msgspec only.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

MAX_NAME = 65_536  # a C++ kernel's demangled name with its templates can run to kilobytes
MAX_TEXT = 4_096
MAX_EVENTS = 2_000_000  # per file: a few hundred MB of JSON, a long profiling window
MAX_RANKS = 1 << 20
MAX_LIST = 1 << 20
LIMIT = 9e15  # microseconds: ~285 years; beyond it a float loses the microsecond

Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME)]
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
Micros = Annotated[float, msgspec.Meta(ge=-LIMIT, le=LIMIT)]
Count = Annotated[int, msgspec.Meta(ge=-(1 << 62), le=1 << 62)]
Id = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
Rank = Annotated[int, msgspec.Meta(ge=0, le=MAX_RANKS)]


class Args(msgspec.Struct, frozen=True):
    """The args an event may carry that the analysis reads (all optional)."""

    stream: Id | Micros | Text | None = None
    correlation: Id | Micros | None = None
    external_id: Id | Text | None = msgspec.field(default=None, name="External id")
    collective: Text | None = msgspec.field(default=None, name="Collective name")
    in_nelems: Count | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Count | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: Count | None = msgspec.field(default=None, name="Group size")
    dtype: Text | None = None
    pg_name: Text | None = msgspec.field(default=None, name="Process Group Name")
    input_dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input type")
    # Our own --trace export (playground.export.chrome_trace): what a Span knew.
    action_id: Text | None = None
    bytes: Count | None = None
    peer: Count | None = None
    mechanism: Text | None = None
    series: Text | None = None


class Event(msgspec.Struct, frozen=True):
    """One trace event (Chrome Trace Event Format, as Kineto writes it)."""

    ph: Annotated[str, msgspec.Meta(max_length=8)]
    name: Name = ""
    cat: Text | None = None
    ts: Micros | None = None
    dur: Micros | None = None
    pid: Id | Text | None = None
    tid: Id | Text | None = None
    id: Id | Text | None = None
    args: Args | None = None


class ProcessGroup(msgspec.Struct, frozen=True):
    pg_name: Text | None = None
    pg_desc: Text | None = None
    pg_size: Count | None = None
    ranks: Annotated[list[Rank], msgspec.Meta(max_length=MAX_LIST)] | Text | None = None


class DistributedInfo(msgspec.Struct, frozen=True):
    """What torch.profiler records about the job (`distributedInfo`)."""

    backend: Text | None = None
    rank: Rank | None = None
    world_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_RANKS)] | None = None
    pg_config: Annotated[list[ProcessGroup], msgspec.Meta(max_length=4096)] | None = None
    nccl_version: Text | None = None


class Device(msgspec.Struct, frozen=True):
    id: Count | None = None
    name: Text | None = None


class TraceDoc(msgspec.Struct, frozen=True):
    """A trace in the JSON Object Format (what Kineto writes)."""

    traceEvents: Annotated[list[Event], msgspec.Meta(max_length=MAX_EVENTS)]
    distributedInfo: DistributedInfo | None = None
    deviceProperties: Annotated[list[Device], msgspec.Meta(max_length=4096)] | None = None


# The JSON Array Format (a bare list of events) is accepted too.
TRACE_TYPE = TraceDoc | Annotated[list[Event], msgspec.Meta(max_length=MAX_EVENTS)]
