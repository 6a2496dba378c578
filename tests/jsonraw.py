"""JSON with raw text spliced in: what a hostile saved run looks like (1e400, NaN, a huge
integer, deep nesting), which json.dumps alone cannot write.

Shared by tests/data/hostile/make_hostile.py (the corpus) and tests/test_fuzz.py.
"""

from __future__ import annotations

import json
from typing import Any


class Raw:
    """Text put into the JSON as is."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:40]!r})"


def dumps(doc: Any) -> str:
    """JSON as Python writes it (NaN and Infinity included), with Raw values spliced in."""
    raws: list[str] = []

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"@@RAW{len(raws) - 1}@@"
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    text = json.dumps(swap(doc))
    for i, raw in enumerate(raws):
        text = text.replace(f'"@@RAW{i}@@"', raw)
    return text
