"""The failure-resume lesson's own rates: what writing a checkpoint costs on this machine.

The lesson's part of calibration (docs/adding-a-lesson.md, "Calibration probes"):
`ResumeRates`, the record the lesson's `estimate` reads (ResumeRates.of the profile's
rates), and `PROBES`, its Hooks.probes: the rank-side probes
(scenarios.failure_resume.probes: one large fsync'ed write, and checkpoints written
as the lesson writes them) and `fit`, which turns their samples into the record.
runtime keeps the rates every lesson shares (runtime.sim.compute).

Imports: runtime's pure part only (no torch: lesson.py imports this).
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.fit.calibration_probes import LessonProbes, Probe, Samples
from runtime.sim.compute import ComputeRates, LessonRates

# The bytes of the large write, and of the checkpoints timed (by turns, CHECKPOINT_REPS
# of each): next to no bytes, and CHECKPOINT_BYTES in their model and optimizer files
# (of the order of the lesson's default).
DISK_BYTES = 4 * 2**20
CHECKPOINT_REPS, CHECKPOINT_BYTES = 11, 2**20


@dataclass(frozen=True)
class ResumeRates(LessonRates):
    """A checkpoint's bytes, written and fsync'ed file by file, at `disk_bytes_per_s`;
    and its fixed cost, its bytes apart: every rank's files fsync'ed and renamed, two
    barriers and rank 0's commit (runtime.engine.checkpoint), every rank writing at
    once (calibrated; else a guess)."""

    lesson = "failure-resume"

    disk_bytes_per_s: float = 5e8
    checkpoint_s: float = 5e-3

    @classmethod
    def on_datasheet(cls, rates: ComputeRates) -> ResumeRates:
        """A GPU server's checkpoint goes to an NVMe disk at about 2 GB/s."""
        return cls(disk_bytes_per_s=2e9)

    def write_seconds(self, nbytes: float) -> float:
        return nbytes / self.disk_bytes_per_s

    def checkpoint_seconds(self, nbytes: float) -> float:
        """A checkpoint of `nbytes` in all: its fixed cost, then its bytes at the disk's
        bandwidth."""
        return self.checkpoint_s + self.write_seconds(nbytes)


def checkpoint_costs(
    checkpoint: list[float] | None, disk: list[float]
) -> tuple[float | None, float]:
    """A checkpoint's fixed cost and the bandwidth its bytes see, from rank 0's
    [seconds of next to no bytes, of CHECKPOINT_BYTES more]: the first, and the bytes
    over the difference; the large write's bandwidth (`disk`) where the difference is not
    positive (noise), 5e8 without either."""
    fallback = disk[0] if disk else ResumeRates.disk_bytes_per_s
    if not checkpoint:
        return None, fallback
    small, large = checkpoint
    return small, CHECKPOINT_BYTES / (large - small) if large > small else fallback


def fit(samples: Samples) -> ResumeRates | None:
    """ResumeRates from rank 0's samples (the probes measure on every rank, rank 0
    reports): `checkpoint_costs`; None where neither probe measured anything."""
    disk = [float(v) for v in samples.get("disk") or [] if v]
    checkpoint = [v for v in samples.get("checkpoint") or [] if v]
    if not disk and not checkpoint:
        return None
    fixed, bandwidth = checkpoint_costs(checkpoint[0] if checkpoint else None, disk)
    if fixed is None:
        return ResumeRates(disk_bytes_per_s=bandwidth)
    return ResumeRates(disk_bytes_per_s=bandwidth, checkpoint_s=fixed)


PROBES = LessonProbes(
    ResumeRates,
    (
        Probe("disk", "scenarios.failure_resume.probes:disk"),
        Probe("checkpoint", "scenarios.failure_resume.probes:checkpoint_seconds"),
    ),
    fit,
)
