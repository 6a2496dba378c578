"""One scenario, end to end: params -> Program -> predicted and (optionally) measured.

The orchestration both front ends share (the CLI in playground.cli and the
Textual app): resolve and validate params, pick the cost model (a named
profile, this machine's cached calibration, or the documented default),
simulate, launch the real ranks, collect the results and compute metrics, and
read back a saved run (`--json` output or a torchrun output dir) so it can be
shown like a new one.

Never imports torch: the real ranks run in their own processes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime import calibration
from runtime.costmodel import CostModel
from runtime.faults import parse_fault
from runtime.launch import LaunchResult, LaunchSpec, launch
from runtime.profiles import PROFILES, get_profile
from runtime.simulate import simulate
from runtime.trace import Counter, Mark, Span, Timeline
from scenarios.base import ParamError, Scenario
from scenarios.registry import get_scenario


class UsageError(ValueError):
    """Bad input from the user: the CLI prints its one line and exits with status 2."""


@dataclass
class Outcome:
    scenario: Scenario
    params: dict[str, Any]
    profile: CostModel
    predicted: Timeline
    measured: Timeline | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    backend: str | None = None
    run_dir: str | None = None

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "scenario": self.scenario.name,
            "params": self.params,
            "profile": self.profile.describe(),
            "metrics": self.metrics,
        }
        if self.measured is not None:
            doc["backend"] = self.backend
            doc["measured"] = [s.to_dict() for s in self.measured.spans]
            doc["marks"] = [m.to_dict() for m in self.measured.marks]
            doc["counters"] = [c.to_dict() for c in self.measured.counters]
        doc["predicted"] = [s.to_dict() for s in self.predicted.spans]
        return doc


def resolve(name: str, raw: dict[str, Any], mode: str) -> tuple[Scenario, dict[str, Any]]:
    try:
        scenario = get_scenario(name)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    try:
        return scenario, scenario.resolve(raw, mode)  # type: ignore[arg-type]
    except ParamError as exc:
        raise UsageError(str(exc)) from None


def select_model(
    hardware: str | None, backend: str, world_size: int, *, nearest: bool
) -> CostModel:
    """A named profile if asked; else this machine's calibration; else the documented default."""
    if hardware:
        try:
            return get_profile(hardware)
        except KeyError as exc:
            raise UsageError(exc.args[0]) from None
    cached = calibration.lookup(calibration.backend_hint(backend), world_size, nearest=nearest)
    return cached or PROFILES["cpu-default"]


def predict(
    name: str, raw: dict[str, Any], hardware: str | None = None, backend: str = "auto"
) -> Outcome:
    scenario, params = resolve(name, raw, "predict")
    model = select_model(hardware, backend, scenario.world_size(params), nearest=True)
    model = scenario.prepare_model(params, model)
    predicted = simulate(scenario.build(params), model)
    return Outcome(scenario, params, model, predicted, metrics=scenario.metrics(params, predicted))


def calibrate(
    world_size: int, backend: str = "auto", *, on_message: Callable | None = None
) -> CostModel:
    result = launch(LaunchSpec("calibrate", {}, world_size, backend=backend), on_message=on_message)
    model = calibration.fit(result.rank_results, result.backend, world_size)
    calibration.save(model, result.backend, world_size)
    return model


def run(
    name: str,
    raw: dict[str, Any],
    *,
    backend: str = "auto",
    faults: list[str] | None = None,
    hardware: str | None = None,
    on_message: Callable[[tuple], None] | None = None,
    cancel: threading.Event | None = None,
    stream: bool = True,
    on_calibrate: Callable[[int], None] | None = None,
) -> Outcome:
    """A real multiprocess run, with its prediction and metrics. Raises RunFailed or UsageError."""
    scenario, params = resolve(name, raw, "run")
    world = scenario.world_size(params)
    try:
        parsed_faults = [parse_fault(spec, world) for spec in faults or []]
        # Scenarios with steps and checkpoints check step faults against their params.
        scenario.check_faults(params, parsed_faults)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if hardware:
        model = select_model(hardware, backend, world, nearest=False)
    else:
        model = calibration.lookup(calibration.backend_hint(backend), world)
        if model is None:
            if on_calibrate is not None:
                on_calibrate(world)
            model = calibrate(world, backend)
    model = scenario.prepare_model(params, model)
    predicted = simulate(scenario.build(params), model)
    spec = LaunchSpec(
        name,
        params,
        world,
        backend=backend,
        faults=[f.to_dict() for f in parsed_faults],
        stream=stream,
    )
    policy = scenario.restart_policy(params)
    if policy is not None:  # restart like torchrun
        # Imported when a lesson restarts: it brings numpy and safetensors, which the
        # app's first paint does without.
        from runtime.supervise import supervise

        result = supervise(spec, policy, on_message=on_message, cancel=cancel)
    else:
        result = launch(spec, on_message=on_message, cancel=cancel)
    return _outcome(scenario, params, model, predicted, result)


def _outcome(scenario, params, model, predicted, result: LaunchResult) -> Outcome:
    measured = Timeline(spans=result.spans, counters=result.counters, marks=result.marks)
    # Scenarios that calibrate inside the run (pipeline stage costs) refine the model.
    refined = scenario.prepare_model(params, model, result.rank_results)
    if refined is not model:
        model, predicted = refined, simulate(scenario.build(params), refined)
    metrics = scenario.metrics(params, predicted, measured, result.rank_results)
    return Outcome(
        scenario, params, model, predicted, measured, metrics, result.backend, str(result.run_dir)
    )


def replay(path: str | Path) -> Outcome:
    """Show a saved run: a `--json` document, or the --out dir of a torchrun run."""
    path = Path(path)
    try:
        if path.is_dir():
            return _replay_dir(path)
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if not isinstance(doc, dict) or "scenario" not in doc or "predicted" not in doc:
        raise UsageError(
            f"{path} is not a playground run (expected the JSON of `run --json` or a torchrun --out dir)"
        )
    scenario, _ = resolve(doc["scenario"], {}, "predict")
    measured = None
    if "measured" in doc:
        measured = Timeline(
            [Span.from_dict(s) for s in doc["measured"]],
            counters=[Counter(**c) for c in doc.get("counters", [])],
            marks=[Mark(**m) for m in doc.get("marks", [])],
        )
    return Outcome(
        scenario,
        doc["params"],
        CostModel.from_dict(doc.get("profile") or PROFILES["cpu-default"].describe()),
        Timeline([Span.from_dict(s) for s in doc["predicted"]]),
        measured,
        doc.get("metrics", {}),
        doc.get("backend"),
    )


def _replay_dir(path: Path) -> Outcome:
    run_file = path / "run.json"
    if not run_file.exists():
        raise UsageError(f"{path} has no run.json: not a finished torchrun --out dir")
    meta = json.loads(run_file.read_text())
    scenario, params = resolve(meta["scenario"], meta["params"], "run")
    results = []
    spans: list[Span] = []
    counters: list[Counter] = []
    for rank in range(meta["world_size"]):
        rank_file = path / f"rank{rank}.json"
        if not rank_file.exists():
            raise UsageError(f"{path} lacks {rank_file.name}: rank {rank} did not finish")
        result = json.loads(rank_file.read_text())["result"]
        spans.extend(Span.from_dict(s) for s in result.pop("spans", []))
        counters.extend(Counter(**c) for c in result.pop("counters", []))
        results.append(result)
    world = meta["world_size"]
    model = calibration.lookup(meta["backend"], world, nearest=True) or PROFILES["cpu-default"]
    model = scenario.prepare_model(params, model)
    predicted = simulate(scenario.build(params), model)
    launched = LaunchResult(
        sorted(spans, key=lambda s: (s.start, s.rank)),
        results,
        meta["backend"],
        path,
        0.0,
        sorted(counters, key=lambda c: (c.t, c.rank)),
    )
    return _outcome(scenario, params, model, predicted, launched)
