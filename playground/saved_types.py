"""The bounded scalar types of a saved run's schema (playground.saved_schema).

A saved run is untrusted input (docs/design.md's trust rule): strings are bounded and
free of control characters (so nothing printed can drive the terminal), numbers are
finite and bounded. Every document type of the schema is built from these.

Imports: msgspec only; never torch.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

PRINTABLE = r"^[^\x00-\x1f\x7f-\x9f]*$"  # no control characters (C0, DEL, C1)

Name = Annotated[str, Meta(max_length=120, pattern=PRINTABLE)]
Text = Annotated[str, Meta(max_length=2000, pattern=PRINTABLE)]
Time = Annotated[float, Meta(ge=-1e9, le=1e9)]
Rank = Annotated[int, Meta(ge=0, lt=1 << 20)]
Index = Annotated[int, Meta(ge=0, lt=1 << 31)]
Bytes = Annotated[int, Meta(ge=0, lt=1 << 62)]
Number = Annotated[float, Meta(ge=-1e300, le=1e300)]
# A metric's integer, bounded like a float: 10**400 passed as an int, and formatting or
# the error (float()) ended in an OverflowError traceback.
Int = Annotated[int, Meta(ge=-(1 << 62), le=1 << 62)]
Scalar = bool | Int | Number | Text | None
ParamValue = bool | int | Number | Text | Annotated[list[Text], Meta(max_length=64)]
Seconds = Annotated[float, Meta(ge=0, le=1e6)]
Rate = Annotated[float, Meta(gt=0, le=1e30)]
Fraction = Annotated[float, Meta(gt=0, le=1)]
