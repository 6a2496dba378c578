"""Compute sharing the CPU cores: the simulator's model of ranks that outnumber the cores.

Part of runtime's pure part (docs/design.md: the simulator), used by runtime.sim.eventloop
when the cost model states how many cores the ranks share (`cores`). Every
computing rank progresses at the same rate (egalitarian processor sharing);
the class below keeps that in O(log k) per event. Pure: stdlib only.
"""

from __future__ import annotations

import heapq
import math

from runtime.sim.costmodel import CostModel

# Compute jobs whose finish tags differ by less than this (relative) end together:
# tags reached by different sums of the same durations can differ in the last
# bits, and an extra event a few ulps later would only split one instant in two.
TIE = 1e-12


class CoreSharing:
    """Compute ops sharing the model's CPU cores (egalitarian processor sharing).

    Every computing rank progresses at the same rate, CostModel.core_share(k)
    = min(1, cores/k) while k of them compute. So rather than decrementing
    each one's remaining work at every event, we keep one work clock
    `work_done`, the integral of that rate over time: a compute of base length
    w started when the clock read V ends when it reads V + w, its tag.
    Computes therefore end in tag order (a heap), an event costs O(log k), and
    computes with equal tags end at the same instant exactly.
    """

    def __init__(self, model: CostModel, ranks: int) -> None:
        self.now = 0.0
        self.work_done = 0.0
        self.jobs: list[tuple[float, int, float]] = []  # (tag, rank, start)
        # core_share(k) for every k the ranks can reach, looked up at every start and end.
        self.rates = [model.core_share(k) for k in range(ranks + 1)]
        self.rate = 1.0  # the rate while len(jobs) compute, kept as jobs come and go
        # When the next compute ends: it moves only as a compute starts or ends (an
        # advance credits work at the rate the end was computed with), so it is kept,
        # not recomputed at every event (a large pipeline asks at nearly every one).
        self.due = math.inf

    def _set_due(self) -> None:
        """The next end, once a compute started or ended (the rate may have moved)."""
        jobs = self.jobs
        self.rate = rate = self.rates[len(jobs)]
        if not jobs:
            self.due = math.inf
            return
        left = jobs[0][0] - self.work_done
        # An advance may land a rounding error short of (or past) a tag: that
        # compute is due now, not a few ulps later as an event of its own.
        self.due = self.now if left <= TIE * self.work_done else self.now + left / rate

    def advance(self, t: float) -> None:
        """Move the clock to `t`, crediting the computes in flight."""
        if t > self.now:
            if self.jobs:
                self.work_done += self.rate * (t - self.now)
            self.now = t

    def start(self, rank: int, base: float, t: float) -> None:
        # advance(t) and _set_due(), inline: the simulator's most frequent event
        jobs, now, done = self.jobs, self.now, self.work_done
        if t > now:
            if jobs:
                self.work_done = done = done + self.rate * (t - now)
            self.now = now = t
        heapq.heappush(jobs, (done + base, rank, t))
        self.rate = rate = self.rates[len(jobs)]
        left = jobs[0][0] - done
        self.due = now if left <= TIE * done else now + left / rate

    def pop_ended(self) -> list[tuple[int, float]]:
        """Advance to the next compute end; return (rank, start) of all ending then."""
        jobs = self.jobs
        tag = jobs[0][0]
        # Land exactly on the tag and time rather than on rate·dt sums, so the
        # finishing jobs leave no residue that would need another event.
        self.now = self.due
        self.work_done = work_done = max(self.work_done, tag)
        limit = work_done + TIE * work_done
        ended = []
        while jobs and jobs[0][0] <= limit:
            _, rank, start = heapq.heappop(jobs)
            ended.append((rank, start))
        self._set_due()
        return ended
