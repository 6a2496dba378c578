"""One lesson's result: its typed params, the cost model, the timelines and the metrics.

Part of `playground/` in docs/design.md, below playground.session (which makes an
Outcome: predicted, or run and refined) and playground.saved (which reads one back);
every front end reads it (the CLI's text and `--json`, the app's panels, the HTML
and trace exports). `to_doc` is the `--json` document; the per-rank figures
(playground.worker_figures) and the error budget's rows (playground.prediction_error)
are computed from it, never stored.

Never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from playground.prediction_error import BudgetRow, budget_doc, budget_rows, error_rows
from playground.worker_figures import workers_of
from runtime.fit import conditions
from runtime.sim.costmodel import CostModel
from runtime.sim.trace import Timeline
from scenarios.base import Lesson
from scenarios.metrics import Curve, Metric, finite
from scenarios.params import Params

if TYPE_CHECKING:
    from runtime.engine.stragglers import WorkersReport

# The shape of `--json` documents: 2 since metrics are a typed list (README, "JSON").
FORMAT = 2


@dataclass
class Outcome:
    lesson: Lesson
    params: Params
    profile: CostModel
    predicted: Timeline
    measured: Timeline | None = None
    metrics: list[Metric] = field(default_factory=list)
    backend: str | None = None
    run_dir: str | None = None
    curves: list[Curve] = field(default_factory=list)
    # A real run: whether its ranks were warm (kept from an earlier run), and the
    # seconds from the request to the first action of any rank.
    warm: bool | None = None
    start_s: float | None = None

    @property
    def calibration(self) -> conditions.Staleness | None:
        """A real run on this machine's calibration: whether it was stale as the run
        started (kept in its profile's details, so a saved run keeps it too); None on a
        named profile or a prediction."""
        return conditions.Staleness.from_dict(self.profile.details.get("staleness"))

    @cached_property
    def workers(self) -> WorkersReport | None:
        """Each rank's figures in the measured run (playground.worker_figures); None
        before a run. Always computed from the timeline, never read back from a file."""
        return workers_of(self, self.measured) if self.measured is not None else None

    @property
    def budget_rows(self) -> list[BudgetRow]:
        """The lesson's headline times, predicted before and after the run, against their
        error budgets (playground.prediction_error); none before a run."""
        if self.measured is None:
            return []
        return budget_rows(self.metrics, self.lesson.hooks.headline)

    def to_doc(self) -> dict[str, Any]:
        """The `--json` document (strict JSON: non-finite numbers become null)."""
        doc: dict[str, Any] = {
            "format": FORMAT,
            "scenario": self.lesson.name,
            "params": self.params.to_dict(),
            "profile": finite(self.profile.describe()),
            "metrics": [m.to_dict() for m in self.metrics],
        }
        if self.curves:
            doc["curves"] = [c.to_dict() for c in self.curves]
        if self.measured is not None:
            doc["backend"] = self.backend
            doc["measured"] = [s.to_dict() for s in self.measured.spans]
            doc["marks"] = [m.to_dict() for m in self.measured.marks]
            doc["counters"] = [c.to_dict() for c in self.measured.counters]
            if self.workers is not None:
                doc["workers"] = self.workers.to_dict()
            doc["prediction_error"] = budget_doc(
                error_rows(self.metrics, self.lesson.hooks.headline),
                self.calibration,
                self.profile.details.get("conditions"),
            )
        doc["predicted"] = [s.to_dict() for s in self.predicted.spans]
        return doc
