"""The link's half of a calibration alone (runtime.fit.link_fit, `run_links`): what
`lab nodes -- calibrate` runs inside a node. Real ranks: marked `ranks`."""

from __future__ import annotations

import pytest

from runtime.engine.launch import LaunchSpec, launch
from runtime.fit import calibration
from runtime.fit.link_fit import SIZES, fit_link

pytestmark = pytest.mark.ranks


def test_the_link_half_alone_times_only_the_link_and_fits_it() -> None:
    result = launch(LaunchSpec(calibration.LINKS_ENTRY, 2, name="calibrate-links"))
    for ranks_own in result.rank_results:  # no compute timed: step 2 of the lab times it
        assert set(ranks_own) == {"sendrecv", "reduce_s"}
        assert all(len(ranks_own["sendrecv"][str(s)]) == calibration.REPS for s in SIZES)
    link = fit_link(result.rank_results, 2)
    assert [size for size, _ in link.points] == list(SIZES)
    assert all(seconds > 0 for _, seconds in link.points)  # every size was timed
    assert link.alpha > 0 and link.beta > 0 and link.gamma > 0
