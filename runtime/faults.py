"""Fault specs: `--fault kill:rank=2,after=0.3s` and `--fault hang:rank=1,after=1s`.

Parsed in the parent (pure), carried to the ranks as plain dicts, and injected
for real inside the rank process by runtime.worker: `kill` sends SIGKILL to
the rank itself, `hang` sends it SIGSTOP so it stops answering altogether
(its heartbeat too), which is what a wedged GPU or a stuck NCCL call looks
like from outside. The launcher must then notice, name the rank, and tear down.

Pure: stdlib only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from runtime.units import parse_duration

FAULT_KINDS = {"kill": ("rank", "after"), "hang": ("rank", "after")}
USAGE = "use kill:rank=R,after=0.5s or hang:rank=R,after=1s"


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    after_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def parse_fault(spec: str, world_size: int) -> Fault:
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in FAULT_KINDS:
        raise ValueError(f"malformed --fault {spec!r}: {USAGE}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.partition("=")
        if not eq or not value:
            raise ValueError(f"malformed --fault {spec!r}: {USAGE}")
        fields[key.strip()] = value.strip()
    allowed = FAULT_KINDS[kind]
    unknown = sorted(set(fields) - set(allowed))
    missing = [k for k in allowed if k not in fields]
    if unknown or missing:
        raise ValueError(f"malformed --fault {spec!r}: {kind} takes {', '.join(allowed)}; {USAGE}")
    try:
        rank = int(fields["rank"])
    except ValueError:
        raise ValueError(f"malformed --fault {spec!r}: rank must be an integer") from None
    if not 0 <= rank < world_size:
        raise ValueError(
            f"--fault {spec!r}: rank must be in 0..{world_size - 1} for {world_size} ranks"
        )
    try:
        after = parse_duration(fields["after"])
    except ValueError as exc:
        raise ValueError(f"malformed --fault {spec!r}: {exc}") from None
    if after < 0:
        raise ValueError(f"--fault {spec!r}: after must be >= 0")
    return Fault(kind, rank, after)
