"""Parsing and printing of quantities with units: bytes (`4MiB`), durations (`90s`).

Used by scenario parameters (scenarios.base) and fault specs (runtime.engine.faults);
every parse error is a ValueError whose message says what is allowed, which the
CLI turns into one line and exit status 2.

Pure: stdlib only.
"""

from __future__ import annotations

import math
import re

_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}
_TIME_UNITS = {
    "": 1.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


def parse_bytes(text: str) -> int:
    """'4MiB' -> 4194304; '64KiB', '1.5GB', '1000' (bytes) also work."""
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-z]*)", text.strip())
    if not match or match.group(2).lower() not in _BYTE_UNITS:
        raise ValueError(
            f"{text!r} is not a size; use bytes with a unit, e.g. 4096, 64KiB, 4MiB, 1GB"
        )
    value = float(match.group(1)) * _BYTE_UNITS[match.group(2).lower()]
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(value)


def parse_duration(text: str) -> float:
    """'90s' -> 90.0; '0.5s', '300ms', '3h', '2min' also work; a bare number is seconds."""
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-zµ]*)", text.strip())
    if not match or match.group(2).lower() not in _TIME_UNITS:
        raise ValueError(
            f"{text!r} is not a duration; use a number with a unit, e.g. 0.5s, 300ms, 90s, 3h"
        )
    return float(match.group(1)) * _TIME_UNITS[match.group(2).lower()]


def format_bytes(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def typed_bytes(n: int) -> str:
    """A size as a learner types it, exactly: 4MiB, 96KiB, 1000 (no rounding)."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def typed_duration(s: float) -> str:
    """A duration as a learner types it, exactly: 3h, 19min, 90s, 0.5s."""
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if s and abs(s) >= size and float(s / size).is_integer():
            return f"{s / size:g}{unit}"
    return f"{s:g}s"


def format_seconds(s: float) -> str:
    if s is None:
        return "-"
    # Minutes and hours from ten of them: an MTBF reads "3 h", not "1.08e+04 s".
    if abs(s) >= 36000 or abs(s) >= 3600 and float(s / 3600).is_integer():
        return f"{s / 3600:.3g} h"
    if abs(s) >= 600 or abs(s) >= 60 and float(s / 60).is_integer():
        return f"{s / 60:.3g} min"
    if abs(s) >= 1:
        return f"{s:.3g} s"
    if abs(s) >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


_COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}


def parse_count(text: str) -> int:
    """A count of things (model parameters): '7e9', '7B', '70B', '125M', '1.5T',
    '350k', '1000'. B (or G) is 10⁹, as in "a 7B model"."""
    match = re.fullmatch(_NUMBER + r"\s*([A-Za-z]?)", text.strip())
    if not match or match.group(2).lower() not in _COUNT_SUFFIXES:
        raise ValueError(f"{text!r} is not a count; use e.g. 1000000, 7e9, 125M, 7B, 70B")
    value = float(match.group(1)) * _COUNT_SUFFIXES[match.group(2).lower()]
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{text!r} is not a whole number")
    return int(value)
