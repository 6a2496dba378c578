"""The schema of a saved run: what `replay` accepts from a file, and nothing else.

A saved run is untrusted input (a classmate mails you one; docs/design.md's trust
rule). Every field of the `--json` document (format 2) and of a torchrun
`--out` directory is declared here with its type and range, and decoded by
msgspec, which stops at the first field that is wrong and names it
(`$.measured[3].rank`): strings are bounded and free of control characters (so
nothing printed can drive the terminal), numbers are finite and bounded, lists
are bounded, and nesting is only what the types allow. The lesson's params are
then parsed by the lesson's own Params, like the CLI's. The bounded scalar types are
playground.saved_types'; the saved cost model's, playground.saved_profile.

Imports: msgspec and the pure timeline types; never torch.
"""

from __future__ import annotations

import codecs
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from playground.saved_profile import ProfileDoc as ProfileDoc
from playground.saved_profile import RatesDoc as RatesDoc
from playground.saved_types import (
    Bytes,
    Index,
    Name,
    Number,
    ParamValue,
    Rank,
    Scalar,
    Seconds,
    Text,
    Time,
)
from runtime.sim.trace import Counter, Mark, Span, Timeline
from scenarios.metrics import ALL_CATEGORIES, UNITS, Curve, Metric

# What replay reads, at most (runtime.engine.files.read_bounded): a saved run's --json document,
# or all the files of a torchrun --out dir together; its run.json alone, a few hundred
# bytes, at most SIDECAR_MAX_BYTES.
MAX_FILE_BYTES = 256 * 2**20
SIDECAR_MAX_BYTES = 2**20


class SpanDoc(Struct, frozen=True):
    rank: Rank
    kind: Name
    label: Text
    start: Time
    end: Time
    action_id: Text | None = None
    series: Name | None = None
    stage: Index | None = None
    microbatch: Index | None = None
    chunk: Index | None = None
    step: Index | None = None
    bytes: Bytes | None = None
    peer: Rank | None = None


class CounterDoc(Struct, frozen=True):
    rank: Rank
    category: Name
    t: Time
    value: Number
    series: Name | None = None


class MarkDoc(Struct, frozen=True):
    t: Time
    kind: Name
    label: Text
    rank: Rank | None = None


class MetricDoc(Struct, frozen=True):
    name: Name
    unit: Literal[UNITS]  # type: ignore[valid-type]
    value: Scalar | Annotated[list[Scalar], Meta(max_length=1 << 16)] = None
    predicted: Scalar | Annotated[list[Scalar], Meta(max_length=1 << 16)] = None
    series: Name | None = None
    category: Literal[ALL_CATEGORIES] | None = None  # type: ignore[valid-type]
    per: Literal["rank", "step"] | None = None
    before: Scalar | Annotated[list[Scalar], Meta(max_length=1 << 16)] = None
    # The before-run interval's fast and slow ends (the calibration's spread).
    before_low: Scalar | Annotated[list[Scalar], Meta(max_length=1 << 16)] = None
    before_high: Scalar | Annotated[list[Scalar], Meta(max_length=1 << 16)] = None
    es: Scalar | Annotated[list[Scalar], Meta(max_length=1 << 16)] = None  # Spanish twin
    error: Number | None = None  # recomputed from the pair, never trusted
    before_error: Number | None = None  # likewise


class CurveDoc(Struct, frozen=True):
    title: Text
    x_label: Text
    y_label: Text
    x: Annotated[list[Number], Meta(max_length=10_000)]
    lines: Annotated[
        dict[Name, Annotated[list[Number | None], Meta(max_length=10_000)]], Meta(max_length=16)
    ]
    marks: Annotated[dict[Name, Number | None], Meta(max_length=16)]
    y_unit: Literal[UNITS] = "fraction"  # type: ignore[valid-type]
    log_x: bool = False
    x_unit: Literal[UNITS] = "s"  # type: ignore[valid-type]
    es: Annotated[dict[Text, Text], Meta(max_length=64)] = {}


# A real run records a few thousand spans (a pipeline of 256 microbatches: ~10k), and a
# prediction is summarised to a few: 5M spans of 50 bytes fit under MAX_FILE_BYTES and
# took 24 s and 2.7 GB to replay. A million of each replays in a few seconds.
MAX_RECORDS = 1_000_000
# msgspec checks a list's max_length only once it has decoded it whole (9 s and 1.8 GB
# for 4.5M spans): the objects of a document are counted first, in a tenth of a second.
# Every span, counter, mark and metric is one; a brace inside a string counts too, so a
# document near the limit with braces in its labels is refused as well (none is real).
MAX_OBJECTS = 2 * MAX_RECORDS
Spans = Annotated[list[SpanDoc], Meta(max_length=MAX_RECORDS)]
Counters = Annotated[list[CounterDoc], Meta(max_length=MAX_RECORDS)]
Marks = Annotated[list[MarkDoc], Meta(max_length=100_000)]


Figure = Number | None
Figures = Annotated[list[Figure], Meta(max_length=1 << 16)]
Spread = Annotated[dict[Literal["min", "median", "max"], Number], Meta(max_length=3)]


class WindowDoc(Struct, frozen=True):
    series: Name | None
    step: Index | None
    start: Time
    end: Time
    closed: bool


class RankWorkerDoc(Struct, frozen=True):
    """One rank of `workers` (runtime.engine.stragglers.WorkersReport.to_dict)."""

    rank: Rank
    per_step: Annotated[dict[Name, Figures], Meta(max_length=32)]
    totals: Annotated[dict[Name, Figure], Meta(max_length=32)]
    memory: Annotated[
        dict[Name, Annotated[dict[Name, Number], Meta(max_length=4)]], Meta(max_length=32)
    ]
    device: Annotated[
        dict[Name, Annotated[dict[Name, Number], Meta(max_length=4)] | Figure], Meta(max_length=4)
    ]
    errors: Annotated[dict[Name, Index], Meta(max_length=8)]
    straggler_steps: Index = 0


class WorkersDoc(Struct, frozen=True):
    """`workers` of a run's --json: accepted and bounded, never trusted. A replay computes
    it again from the measured timeline, as a metric's error from its pair."""

    threshold: Annotated[float, Meta(gt=1, le=10)]
    windows: Annotated[list[WindowDoc], Meta(max_length=1 << 16)]
    ranks: Annotated[list[RankWorkerDoc], Meta(max_length=4096)]
    aggregate: Annotated[dict[Name, Spread | None], Meta(max_length=32)]
    steps: Annotated[list[dict[Name, Number | Rank | Name]], Meta(max_length=1 << 16)]
    items: Name | None = None
    slowest: Rank | None = None
    ratio: Number | None = None
    straggler: Rank | None = None
    reason: Literal["compute", "communication"] | None = None


class RunDoc(Struct, frozen=True):
    """The `--json` document of `run`, `predict` or `replay` (format 2)."""

    format: Literal[2]
    scenario: Name
    params: Annotated[dict[Name, ParamValue], Meta(max_length=256)]
    predicted: Spans
    profile: ProfileDoc | None = None
    metrics: Annotated[list[MetricDoc], Meta(max_length=100_000)] = []
    curves: Annotated[list[CurveDoc], Meta(max_length=16)] = []
    backend: Name | None = None
    measured: Spans | None = None
    marks: Marks = []
    counters: Counters = []
    workers: WorkersDoc | None = None


class TorchrunMeta(Struct, frozen=True):
    """run.json of a torchrun --out directory (rank 0 writes it)."""

    scenario: Name
    params: Annotated[dict[Name, ParamValue], Meta(max_length=256)]
    world_size: Annotated[int, Meta(ge=1, le=4096)]
    backend: Name
    launcher: Name | None = None


class TorchrunRank(Struct, frozen=True):
    """rank<R>.json: the rank's result (checked by the lesson's own type) and records."""

    rank: Rank
    result: Annotated[dict[Name, Any], Meta(max_length=256)]
    spans: Spans = []
    counters: Counters = []
    backend: Name | None = None
    torch_version: Name | None = None


class RankCosts(Struct, frozen=True):
    """What a torchrun rank's result refines the prediction with (RankResult's
    compute_costs and p2p, runtime.fit.refine.refine), bounded: the lesson's own result
    type lets any float through, and 1e308 seconds made the prediction infinite (a
    DeadlockError traceback, or a profile its own replay refuses)."""

    compute_costs: Annotated[dict[Name, Seconds], Meta(max_length=100_000)] = {}
    p2p: Annotated[list[tuple[Bytes, Seconds]], Meta(max_length=100_000)] = []


_CHUNK = 2**20


class SavedRunError(ValueError):
    """A saved run that is not one: the message names the first bad field."""


def decode(data: bytes, kind: type[Struct]) -> Any:
    """`data` as `kind`, or SavedRunError with one line."""
    if len(data) > MAX_FILE_BYTES:
        raise SavedRunError(f"larger than {MAX_FILE_BYTES // 2**20} MiB")
    if data.count(b"{") > MAX_OBJECTS:
        raise SavedRunError(f"more than {MAX_OBJECTS} objects")
    # msgspec checks UTF-8 only in what it decodes: bytes that are not UTF-8 in a key
    # it skips were let through, so a file that is not JSON was accepted. Checked a MiB
    # at a time: the whole file decoded at once was a second copy of it in memory.
    check = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for at in range(0, len(data) + 1, _CHUNK):
        try:
            check.decode(view[at : at + _CHUNK], final=at + _CHUNK >= len(data))
        except UnicodeDecodeError as exc:
            raise SavedRunError(f"not JSON (not UTF-8 at byte {at + exc.start})") from None
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise SavedRunError(str(exc).splitlines()[0]) from None
    except msgspec.DecodeError as exc:
        raise SavedRunError(f"not JSON ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        # msgspec recurses into what it skips (an unknown key) and into `Any` (a torchrun
        # rank's result): `[[[[...]]]]` a few thousand deep overflows it.
        raise SavedRunError("nested too deeply") from None


def check_costs(result: dict[str, Any]) -> None:
    """A rank's result refines the prediction only with costs in range (RankCosts)."""
    try:
        msgspec.convert(result, RankCosts)
    except msgspec.ValidationError as exc:
        raise SavedRunError(str(exc).splitlines()[0]) from None


# The docs declare the timeline types' fields in the same order (a test checks it), so a
# doc's tuple builds one: a third of the time of a dict of keywords, per span.
_astuple = msgspec.structs.astuple


def span(doc: SpanDoc) -> Span:
    if doc.end < doc.start:
        raise SavedRunError(f"a span of rank {doc.rank} ends before it starts")
    return Span(*_astuple(doc))


def check_ranks(world_size: int, *records: list) -> None:
    """Every span, counter and mark belongs to one of the run's ranks."""
    for docs in records:
        for doc in docs or ():
            if doc.rank is not None and doc.rank >= world_size:
                kind = type(doc).__name__.removesuffix("Doc").lower()
                raise SavedRunError(f"a {kind} of rank {doc.rank} in a run of {world_size} ranks")


def timeline(spans: list[SpanDoc], counters=(), marks=()) -> Timeline:
    if len(spans) + len(counters) + len(marks) > 2 * MAX_RECORDS:
        raise SavedRunError(f"more than {2 * MAX_RECORDS} records in one timeline")
    return Timeline(
        [span(s) for s in spans],
        [Counter(*_astuple(c)) for c in counters],
        [Mark(*_astuple(m)) for m in marks],
    )


def metric(doc: MetricDoc) -> Metric:
    fields = msgspec.structs.asdict(doc)
    del fields["error"], fields["before_error"]
    return Metric(**fields)


def curve(doc: CurveDoc) -> Curve:
    return Curve(**msgspec.structs.asdict(doc))
