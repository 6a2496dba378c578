"""The words and figures of the per-rank report, for the Workers tab, the CLI and the HTML.

Part of `playground/` in docs/design.md, beside playground.formatting: the one place
that turns a runtime.engine.stragglers.WorkersReport into what a learner reads (a row
per rank, the median row, the straggler sentence, sparklines), so the app's tab
(playground.widgets.workers), `playground run`'s text and the HTML panel
(playground.export.workers) say the same thing in the same words, in Spanish
or English (playground/i18n). A figure a rank does not have is "—", never 0.

Imports: the pure report types and the catalog; never torch.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from playground.i18n import t
from runtime.engine.stragglers import RankTotals, WorkersReport
from runtime.sim.units import format_bytes, format_seconds

BLOCKS = "▁▂▃▄▅▆▇█"
ABSENT = "—"


def sparkline(values: list[float | None], width: int, top: float | None = None) -> str:
    """The last `width` values as block characters, 0 to `top` (default: their max);
    a missing value is a space."""
    shown = values[-width:] if width > 0 else []
    present = [v for v in shown if v is not None]
    scale = top if top is not None else max(present, default=0.0)
    out = []
    for value in shown:
        if value is None:
            out.append(" ")
        elif scale <= 0:
            out.append(BLOCKS[0])
        else:
            level = round(min(1.0, max(0.0, value / scale)) * (len(BLOCKS) - 1))
            out.append(BLOCKS[level])
    return "".join(out)


@dataclass(frozen=True)
class RankRow:
    """One rank's figures over the run, per step (means) and in all, formatted."""

    rank: int | None  # None: the median row
    step: str
    busy: str
    compute: str
    wait: str
    sent: str
    memory: str
    throughput: str
    straggler: bool = False


def _per_step(totals: RankTotals, seconds: float) -> float:
    return seconds / totals.steps if totals.steps else 0.0


def _memory(totals: RankTotals) -> str:
    return format_bytes(totals.memory_peak_bytes) if totals.memory_peak_bytes else ABSENT


def _throughput(totals: RankTotals) -> str:
    value = totals.throughput
    return f"{value:,.0f}" if value is not None else ABSENT


def rank_rows(report: WorkersReport) -> list[RankRow]:
    """A row per rank, then the median row."""
    rows = []
    for rank in report.ranks:
        totals = report.totals[rank]
        rows.append(
            RankRow(
                rank,
                format_seconds(_per_step(totals, totals.step_s)),
                f"{totals.busy:.0%}",
                format_seconds(_per_step(totals, totals.compute_s)),
                format_seconds(_per_step(totals, totals.wait_s)),
                format_bytes(totals.sent_bytes),
                _memory(totals),
                _throughput(totals),
                report.overall.straggler == rank,
            )
        )
    every = [report.totals[r] for r in report.ranks if report.totals[r].steps]
    if every:

        def median(values: list[float]) -> float:
            return statistics.median(values)

        peaks = [x.memory_peak_bytes for x in every if x.memory_peak_bytes]
        rates = [x.throughput for x in every if x.throughput is not None]
        rows.append(
            RankRow(
                None,
                format_seconds(median([_per_step(x, x.step_s) for x in every])),
                f"{median([x.busy for x in every]):.0%}",
                format_seconds(median([_per_step(x, x.compute_s) for x in every])),
                format_seconds(median([_per_step(x, x.wait_s) for x in every])),
                format_bytes(median([x.sent_bytes for x in every])),
                format_bytes(median(peaks)) if peaks else ABSENT,
                f"{median(rates):,.0f}" if rates else ABSENT,
            )
        )
    return rows


def columns(report: WorkersReport, language: str) -> list[str]:
    """The column titles of `rank_rows`, in the learner's language."""
    item = report.items_unit or "items"
    names = ("step", "busy", "compute", "wait", "sent", "memory")
    return [t(f"workers.{n}", language) for n in names] + [
        t("workers.per_second", language, item=t(f"workers.item_{item}", language))
    ]


def straggler_sentence(report: WorkersReport, language: str) -> str:
    """Who straggled, why and how often; or that no rank did, and the threshold."""
    verdict = report.overall
    if verdict.straggler is None:
        return t("workers.no_straggler", language, threshold=f"{report.threshold:g}")
    steps = sum(1 for c in report.closed if c)
    return t(
        "workers.straggler",
        language,
        rank=verdict.straggler,
        reason=t(f"workers.reason_{verdict.reason}", language),
        ratio=f"{verdict.ratio or 0:.1f}",
        count=report.totals[verdict.straggler].straggler_steps,
        steps=steps,
    )


def text_lines(report: WorkersReport, language: str) -> list[str]:
    """`playground run`'s block: a title, a row per rank and the median, the verdict."""
    titles = columns(report, language)
    widths = [max(9, len(title) + 1) for title in titles]
    lines = [t("workers.title", language)]
    lines.append("  " + f"{t('workers.rank', language):<8}" + _cells(titles, widths))
    for row in rank_rows(report):
        name = f"r{row.rank}" if row.rank is not None else t("workers.median", language)
        mark = " ⚠" if row.straggler else ""
        cells = [row.step, row.busy, row.compute, row.wait, row.sent, row.memory, row.throughput]
        lines.append("  " + f"{name:<8}" + _cells(cells, widths) + mark)
    lines.append("  " + straggler_sentence(report, language))
    return lines


def _cells(values: list[str], widths: list[int]) -> str:
    return "".join(f"{v:>{w}}" for v, w in zip(values, widths, strict=True))
