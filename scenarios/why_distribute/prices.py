"""The price table shipped with the course: $/GPU-hour, its source and its date.

Part of lesson 0's cost discipline (docs/references.md, "Cost discipline": a
price table that states its source and date, and a guard that refuses a stale
one; an estimate only warns). The table is data, scenarios/why_distribute/prices.toml, read and checked
once: every GPU of scenarios.why_distribute.gpus that it prices has a positive,
finite on-demand and spot price, and the date is a real date. How old it is
depends on the day it is read, which callers pass in (tests pin it).

Imports: stdlib only (and the GPU names).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from datetime import date
from functools import cache
from importlib import resources

from scenarios.why_distribute.gpus import GPUS

# A table older than this is stale: an estimate says its date and age, and the commands
# that spend (`budget guard`, `cloud launch`) refuse it without --price or --allow-stale.
MAX_AGE_DAYS = 90
TIERS = ("on_demand", "spot")


class PriceTableError(ValueError):
    """The shipped table is malformed: a bug of the repository, found when it is read."""


@dataclass(frozen=True)
class PriceTable:
    source: str
    as_of: date
    currency: str
    prices: dict[str, dict[str, float]]  # gpu -> tier -> $/GPU-hour
    source_es: str = ""  # the source in Spanish (the English one where none is given)

    def price(self, gpu: str, spot: bool) -> float | None:
        """$/GPU-hour of `gpu` (None when the table does not list it)."""
        tiers = self.prices.get(gpu)
        return None if tiers is None else tiers["spot" if spot else "on_demand"]

    def age_days(self, today: date) -> int:
        return (today - self.as_of).days

    def stale(self, today: date) -> bool:
        return self.age_days(today) > MAX_AGE_DAYS

    def said(self, today: date) -> str:
        """Where the prices come from and how old they are, in one line."""
        return f"{self.source}; dated {self.as_of.isoformat()}, {self.age_days(today)} days old"


@cache
def price_table() -> PriceTable:
    """The shipped table, checked."""
    text = resources.files(__package__).joinpath("prices.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    try:
        as_of = date.fromisoformat(str(data["date"]))
        source, currency = str(data["source"]), str(data["currency"])
        rows = data["gpu"]
    except (KeyError, ValueError) as exc:
        raise PriceTableError(f"prices.toml: {exc}") from None
    prices: dict[str, dict[str, float]] = {}
    for name, tiers in rows.items():
        if name not in GPUS:
            raise PriceTableError(f"prices.toml prices {name!r}, which is not a known GPU")
        row = {}
        for tier in TIERS:
            value = tiers.get(tier)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise PriceTableError(f"prices.toml: {name}.{tier} must be a positive number")
            row[tier] = float(value)
        prices[name] = row
    return PriceTable(source, as_of, currency, prices, str(data.get("source_es", source)))
