"""Every lesson's outputs stay what they were: the redesign's behaviour check.

For each lesson's defaults, the Program `build` returns (every field of every Action,
in a neutral form that does not depend on how Action stores its effects) and the
`predict --json` document on two hardware profiles are hashed part by part and
compared with tests/golden/outputs.json. A refactor that changes an output fails
here, naming the lesson and the part (`timeline`, `metrics`, …) that moved.

An intended change of outputs is recorded with
`PLAYGROUND_UPDATE_GOLDEN=1 pytest tests/test_golden_outputs.py`, and says why in
its commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from playground import session
from playground.report import finite
from runtime.sim.program import Action
from scenarios.registry import NAMES

GOLDEN = Path(__file__).parent / "golden" / "outputs.json"
PROFILES = ("cpu-default", "h100-nvlink")
UPDATE = os.environ.get("PLAYGROUND_UPDATE_GOLDEN") == "1"


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def neutral_action(action: Action) -> dict[str, Any]:
    """An Action as plain data: its fields, with what it does beyond its kind (its
    effects) flattened to the names they had when they were `args` strings."""
    out: dict[str, Any] = {}
    for f in fields(action):
        value = getattr(action, f.name)
        if f.name == "effects" or (f.name == "sizes" and value is None):
            continue  # the effects are flattened below; per-member sizes came later
        if f.name == "args":
            value = dict(value)
        out[f.name] = value
    args = dict(out.get("args") or {})
    args.update(action_effect_args(action))
    out["args"] = args
    return out


def action_effect_args(action: Action) -> dict[str, Any]:
    """What an Action's typed effects meant as the old `args` keys (empty while the
    effects still live in `args`)."""
    effects = getattr(action, "effects", None)
    return effects.as_args() if effects is not None else {}


def program_parts(name: str) -> dict[str, str]:
    lesson, params = session.resolve(name, {}, "predict")
    program = lesson.build(params)
    ranks = [[neutral_action(a) for a in rank] for rank in program.ranks]
    return {"program.world_size": str(program.world_size), "program.ranks": _digest(ranks)}


def predict_parts(name: str, profile: str) -> dict[str, str]:
    doc = finite(session.predict(name, {}, hardware=profile).to_doc())
    doc.pop("profile", None)  # the profile's record is an input, not an output
    return {f"predict[{profile}].{key}": _digest(value) for key, value in doc.items()}


def current(name: str) -> dict[str, str]:
    parts = program_parts(name)
    for profile in PROFILES:
        parts.update(predict_parts(name, profile))
    return parts


@pytest.fixture(scope="module")
def golden() -> dict[str, dict[str, str]]:
    if UPDATE:
        data = {name: current(name) for name in NAMES}
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", NAMES)
def test_outputs_are_unchanged(name: str, golden: dict[str, dict[str, str]]) -> None:
    assert name in golden, f"no golden outputs for {name}: record them (see module doc)"
    now = current(name)
    moved = sorted(k for k in golden[name].keys() | now.keys() if golden[name].get(k) != now.get(k))
    assert not moved, f"{name}: these outputs changed: {', '.join(moved)}"
