"""What an Action does beyond its kind: its effects, typed.

Part of the Program (runtime.sim.program, docs/design.md): a non-blocking collective
or send, a compute that ends with its group, one that waits on a device, an idle
wait until a moment, a collective timed inside another span. Both engines read these
fields (the simulator compiles them into its ops, runtime.sim.simulate; a lesson's
rank code reads `until`); none of them is a string in an Action's `args`.

Pure: stdlib only.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Until(NamedTuple):
    """An idle wait's end: `seconds` after the end of the rank's action `back` places
    earlier (a server waiting for a request's arrival, on the clock its run started)."""

    back: int
    seconds: float


class Effects(NamedTuple):
    """What an Action does beyond its kind (none by default); both engines read these.

    - nonblocking: a collective launched without waiting for it (`all_reduce(async_op=
      True)`, a DDP bucket), ended by a later `wait`; a send posted as an `isend` whose
      wait comes later (the sender goes on after issuing it);
    - synced: a compute with a `group` that runs collectives inside it (FSDP2's forward):
      it ends on every member together, when the last member's compute has;
    - io: a compute that waits on a device, not a core (a checkpoint's fsync'ed write);
    - until: a compute that computes nothing and idles until that moment (`Until`);
    - untimed: a collective whose work a run times inside another span (torch DDP's
      all-reduce inside backward): once a run has timed that span, it costs nothing.
    """

    nonblocking: bool = False
    synced: bool = False
    io: bool = False
    until: Until | None = None
    untimed: bool = False

    def as_args(self) -> dict[str, Any]:
        """The effects as the `args` names they once had (set ones only): for comparing
        Programs in a neutral form."""
        out: dict[str, Any] = {}
        for name in ("nonblocking", "synced", "io", "untimed"):
            if getattr(self, name):
                out[name] = True
        if self.until is not None:
            out["until"] = tuple(self.until)
        return out


NO_EFFECTS = Effects()
# The effects lessons use, made once (an Action of a large Program shares them).
NONBLOCKING = Effects(nonblocking=True)
SYNCED = Effects(synced=True)
IO = Effects(io=True)
UNTIMED = Effects(untimed=True)
