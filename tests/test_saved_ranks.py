"""A saved run names only its own ranks: a span, counter or mark of a rank outside the
run (or past the schema's bound) is refused in one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_replay import cli

RUN = Path(__file__).parent / "data" / "ring-allreduce-2ranks.json"

pytestmark = pytest.mark.usefixtures("english")


@pytest.mark.parametrize("where", ["measured", "predicted"])
@pytest.mark.parametrize("rank", [2, 5, 1 << 19, 1 << 20, 1 << 30])
def test_a_span_of_a_rank_outside_the_run_is_refused(tmp_path, where, rank) -> None:
    doc = json.loads(RUN.read_text())
    doc[where][0]["rank"] = rank
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    status, out, err = cli("replay", str(path))
    assert (status, out) == (2, "") and err.count("\n") == 1
    assert "is not a valid playground run" in err and str(min(rank, 1048575)) in err


def test_the_last_rank_of_the_run_is_accepted(tmp_path) -> None:
    doc = json.loads(RUN.read_text())
    doc["measured"][0]["rank"] = 1
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    assert cli("replay", str(path))[0] == 0
