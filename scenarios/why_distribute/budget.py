"""The course's cost sentence: GPUs × $/GPU-hour × (hours + setup) × margin, against a budget.

docs/references.md, "Cost discipline": before any cloud experiment, write "This
starts 2× RTX 4090 spot at ~$0.35/h each = $0.70/h, runs ~3 h including setup =
$2.10. Budget: $3.00. Accepted, $0.90 to spare." and refuse to launch above the
budget. This is that arithmetic and that sentence, pure: the lesson writes it for
the plan it recommends, and `playground budget` (playground.budget) for a real
launch, checked against its spend ledger and the unit's ceiling.

Imports: stdlib only (and the lesson's phrases).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scenarios.why_distribute.phrases import hours, money, phrase

# The unit's total ceiling, across every experiment of the course (dollars).
CEILING_USD = 5.0
# A cent of slack: $2.10 against a $2.10 budget is accepted whatever the float rounding.
EPSILON_USD = 0.005


class EstimateError(ValueError):
    """An estimate that means nothing; `field` names the input at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Estimate:
    gpu: str  # as the sentence names it: RTX 4090
    count: int
    price: float  # dollars per GPU-hour
    spot: bool
    hours: float  # the experiment itself
    setup_hours: float = 0.0  # provisioning, downloads, warm-up: billed all the same
    margin: float = 1.0  # safety margin: the estimate is multiplied by it

    def __post_init__(self) -> None:
        checks = (
            ("count", self.count >= 1, "must be at least 1"),
            ("price", self.price > 0, "must be more than 0 dollars per GPU-hour"),
            ("hours", self.hours >= 0, "must be 0 or more"),
            ("setup", self.setup_hours >= 0, "must be 0 or more"),
            ("margin", self.margin >= 1, "must be 1 or more (a safety margin)"),
        )
        for name, ok, rule in checks:
            value = getattr(self, {"setup": "setup_hours"}.get(name, name))
            if not ok or not math.isfinite(value):
                raise EstimateError(name, f"{name}={value}: {rule}")

    @property
    def rate(self) -> float:
        """Dollars per hour for all the GPUs."""
        return self.count * self.price

    @property
    def total_hours(self) -> float:
        return self.hours + self.setup_hours

    @property
    def raw_cost(self) -> float:
        return self.rate * self.total_hours

    @property
    def cost(self) -> float:
        return self.raw_cost * self.margin


@dataclass(frozen=True)
class Verdict:
    estimate: Estimate
    budget: float  # what this experiment may spend: its own budget or the ceiling's remainder

    @property
    def accepted(self) -> bool:
        return self.estimate.cost <= self.budget + EPSILON_USD

    @property
    def left(self) -> float:
        """Dollars to spare (negative: how far over)."""
        return self.budget - self.estimate.cost


def sentence(verdict: Verdict, language: str) -> str:
    """The course's sentence, in `language`."""
    est = verdict.estimate
    cost = money(est.cost)
    if est.margin != 1.0:
        cost = phrase(
            "budget_margin", language, raw=money(est.raw_cost), margin=f"{est.margin:g}", cost=cost
        )
    if verdict.accepted:
        outcome = phrase("budget_accepted", language, left=money(max(verdict.left, 0.0)))
    else:
        outcome = phrase("budget_refused", language, over=money(-verdict.left))
    return phrase(
        "budget_sentence",
        language,
        count=est.count,
        gpu=est.gpu,
        tier=phrase("spot" if est.spot else "on_demand", language),
        price=money(est.price),
        rate=money(est.rate),
        hours=hours(est.total_hours),
        cost=cost,
        budget=money(verdict.budget),
        verdict=outcome,
    )
