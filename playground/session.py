"""One lesson, end to end: params -> Program -> predicted and (optionally) measured.

The orchestration both front ends share (the CLI in playground.cli and the
Textual app): parse the typed params, pick the cost model (a named profile,
this machine's cached calibration, or the documented default), simulate,
launch the real ranks (handing the launcher the lesson's rank entry, params and
Program as data), decode the ranks' typed results, refine the prediction with
what they measured, and compute the typed metrics, as an Outcome (playground.outcome).
Saved runs are read back by playground.saved.

A run goes to warm ranks when the caller hands it a RankPool (runtime.engine.pool; the
app owns one) and the run may use one; else it starts its own ranks (cold). A
first run that must calibrate this machine runs the calibration and the lesson
on the same ranks, so spawning and importing torch is paid once, not twice.

Never imports torch: the real ranks run in their own processes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from playground.formatting import plain
from playground.outcome import Outcome
from playground.prediction_error import with_before
from playground.usage import UsageError, as_usage_error, param_usage_error
from runtime.engine.faults import parse_faults, refuse_unreachable, slow_factors
from runtime.fit import calibration, conditions
from runtime.fit.after_run import refine_after_run
from runtime.sim.costmodel import CostModel, slowed
from runtime.sim.profiles import PROFILES, get_profile, profile_names
from runtime.sim.program import Program
from runtime.sim.simulate import simulate
from runtime.sim.trace import Timeline
from scenarios.base import Lesson, RunData
from scenarios.params import Mode, ParamError, Params
from scenarios.registry import LESSONS, get_lesson

if TYPE_CHECKING:
    from runtime.engine.launch import LaunchResult
    from runtime.engine.pool import RankPool


def resolve(name: str, raw: dict[str, Any], mode: Mode) -> tuple[Lesson, Params]:
    """The lesson and its typed params; UsageError naming the field otherwise."""
    if name not in LESSONS:
        names = ", ".join(sorted(LESSONS))
        raise UsageError.said("cli.unknown_scenario", name=repr(name), names=names)
    lesson = get_lesson(name)
    try:
        return lesson, lesson.parse(raw, mode)
    except ParamError as exc:
        raise param_usage_error(exc) from None


def select_model(
    hardware: str | None, backend: str, world_size: int, *, nearest: bool
) -> CostModel:
    """A named profile if asked; else this machine's calibration; else the documented default."""
    if hardware:
        if hardware not in PROFILES:
            names = ", ".join(profile_names())
            raise UsageError.said("cli.unknown_hardware", name=repr(hardware), names=names)
        return get_profile(hardware)
    cached = calibration.lookup(calibration.backend_hint(backend), world_size, nearest=nearest)
    return cached or PROFILES["cpu-default"]


def predict(
    name: str, raw: dict[str, Any], hardware: str | None = None, backend: str = "auto"
) -> Outcome:
    lesson, params = resolve(name, raw, "predict")
    model = select_model(hardware, backend, params.world_size, nearest=True)
    # A slow rank the lesson's own fault knobs ask for is predicted slowed, as `run` does.
    slow = slow_factors(parse_faults(lesson.faults(params), params.world_size))
    model = slowed(lesson.prepare_model(params, model), slow)
    predicted, metrics = lesson.predict(params, model)  # lumped where it would be slow
    more, curves = lesson.figures(params, model)
    return Outcome(lesson, params, model, predicted, metrics=[*metrics, *more], curves=curves)


def calibrate(
    world_size: int,
    backend: str = "auto",
    *,
    on_message: Callable | None = None,
    pool: RankPool | None = None,
    unless_cached: bool = False,
) -> CostModel:
    """Calibrate `world_size` ranks and cache the model, one calibration at a time on
    this machine (runtime.fit.calibration_lock); `unless_cached`: a calibration that
    another process saved while this one waited for its turn is used as it is."""
    from runtime.engine.launch import LaunchSpec, launch
    from runtime.fit import calibration_lock
    from runtime.fit.calibration_probes import job

    # Each lesson's own probes (Hooks.probes), handed in: runtime imports no lesson.
    probes = [lesson.hooks.probes for lesson in LESSONS.values() if lesson.hooks.probes]
    spec = LaunchSpec(
        calibration.RANK_ENTRY, world_size, name="calibrate", backend=backend, params=job(probes)
    )
    with calibration_lock.exclusive():
        if unless_cached:
            cached = calibration.lookup(calibration.backend_hint(backend), world_size)
            if cached is not None:
                return cached
        load = conditions.load_now()  # before the ranks load the machine themselves
        result = (pool.launch if pool is not None else launch)(spec, on_message=on_message)
        model = calibration.fit(result.rank_results, result.backend, world_size, probes, load1=load)
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
    keep: bool = False,
    host: str | None = None,
    pool: RankPool | None = None,
) -> Outcome:
    """A real multiprocess run, with its prediction and metrics. Raises RunFailed or UsageError.
    Every input is checked before a rank starts; `keep` keeps the run's checkpoints;
    `pool`: warm ranks to run on, when the run may use them."""
    # The launcher's modules are imported by a run, not by `predict` (a tenth of its
    # start on a large pipeline).
    from runtime.engine.launch import LaunchSpec, launch
    from runtime.engine.pool import RankPool
    from runtime.engine.rundirs import check_runs_root, drop_checkpoints
    from runtime.engine.spawn import check_host, warm_start

    requested_ns = time.perf_counter_ns()
    lesson, params = resolve(name, raw, "run")
    world = params.world_size
    check_backend(backend)
    try:
        check_runs_root()  # a runs folder that is ours (or new), before anything is written
        if host is not None:  # an address of this machine, before any rank tries it
            check_host(host)
        # The lesson's fault knobs (the app's form) first, then the CLI's --fault specs.
        parsed_faults = parse_faults([*lesson.faults(params), *(faults or [])], world)
        # Lessons with steps and checkpoints check step faults against their params.
        lesson.hooks.check_faults(params, parsed_faults)
    except ValueError as exc:
        raise as_usage_error(exc) from None
    except OSError as exc:  # the runs folder cannot even be looked at
        raise UsageError.said(
            "saved.cannot_read", path=plain(exc.filename or ""), reason=exc.strerror or exc
        ) from None
    policy = lesson.restart_policy(params)
    # Warm ranks only for a plain run. A run with --fault kills or stops a rank on
    # purpose, and one under the restart supervisor starts every rank of each attempt
    # afresh (like torchrun): either would tear a pool down, and a group that saw a
    # fault is never reused. A run with --host listens beyond loopback. These stay cold
    # (runtime.engine.pool.poolable refuses them too).
    warm_ok = policy is None and not parsed_faults and host is None
    ranks = pool if warm_ok else None
    if ranks is None:  # the input is valid: the fork server imports torch meanwhile
        warm_start((lesson.rank_entry.partition(":")[0], *lesson.hooks.preload))
    own_pool = None
    stale = None  # on a named profile: no calibration to judge
    try:
        if hardware:
            model = select_model(hardware, backend, world, nearest=False)
        else:
            model = calibration.lookup(calibration.backend_hint(backend), world)
            if model is not None:  # judged before this run's ranks add their own load
                stale = conditions.staleness_now(model)
            if model is None:
                if on_calibrate is not None:
                    on_calibrate(world)
                if ranks is None and warm_ok:
                    # The calibration and the run on the same ranks: spawn and import once.
                    ranks = own_pool = RankPool()
                model = calibrate(world, backend, pool=ranks, unless_cached=True)
                stale = conditions.Staleness("fresh")  # made just now, for this run
        # A slowed rank (--fault slow:...) is predicted slowed too: the same run.
        model = slowed(lesson.prepare_model(params, model), slow_factors(parsed_faults))
        program = lesson.build(params)
        # The prediction shown while the run goes (the app's), and a check that the
        # Program can finish: a deadlock is refused before any rank starts.
        before = simulate(program, model)
        # The before-run interval: the Program at the calibration's fast and slow ends.
        ends = [(simulate(program, end), end) for end in conditions.ends(model) or ()]
        try:  # and a timed fault the run would never live to fire
            refuse_unreachable(parsed_faults, before.makespan)
        except ValueError as exc:
            raise as_usage_error(exc) from None
        spec = LaunchSpec(
            lesson.rank_entry,
            world,
            params=params,
            program=program,
            name=lesson.name,
            backend=backend,
            faults=parsed_faults,
            stream=stream,
            host=host,
        )
        if policy is not None:  # restart like torchrun
            # Imported when a lesson restarts: it brings numpy and safetensors, which the
            # app's first paint does without.
            from runtime.engine.supervise import supervise

            result = supervise(spec, policy, on_message=on_message, cancel=cancel)
        elif ranks is not None:
            result = ranks.launch(spec, on_message=on_message, cancel=cancel)
        else:
            result = launch(spec, on_message=on_message, cancel=cancel)
    finally:
        if own_pool is not None:
            own_pool.close()
    if not keep:
        drop_checkpoints(result.run_dir)
    outcome = finish(lesson, params, model, result, program)
    # What the profile said before the run, beside what the run's own figures say.
    said = [*lesson.metrics(params, before, None), *lesson.figure_metrics(params, model)]
    at_ends = [
        [*lesson.metrics(params, timeline, None), *lesson.figure_metrics(params, end)]
        for timeline, end in ends
    ]
    outcome.metrics = with_before(
        outcome.metrics, said, (at_ends[0], at_ends[1]) if len(at_ends) == 2 else None
    )
    if stale is not None:  # with the profile: a saved run keeps it
        details = {**outcome.profile.details, "staleness": stale.to_dict()}
        outcome.profile = replace(outcome.profile, details=details)
    first_ns = result.first_action_ns()
    outcome.warm = result.warm
    outcome.start_s = (first_ns - requested_ns) / 1e9 if first_ns is not None else None
    return outcome


def check_backend(backend: str) -> None:
    """`--backend nccl` needs a CUDA GPU: refused before any rank starts when there is none
    (asked of the CUDA driver itself, so the UI process never imports torch)."""
    if backend == "nccl" and not cuda_devices():
        raise UsageError.said("cli.nccl_without_cuda")


def cuda_devices() -> int:
    """How many CUDA devices the driver sees (0 without a driver)."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    except (OSError, AttributeError):
        return 0


def decode_results(lesson: Lesson, raw_results: list[dict[str, Any]]) -> list[Any]:
    """The ranks' JSON results as the lesson's typed record (ValueError if malformed)."""
    import msgspec  # only when a run (or a saved torchrun run) is read

    try:
        return [msgspec.convert(data, lesson.result) for data in raw_results]
    except msgspec.ValidationError as exc:
        raise ValueError(f"a rank's result is not a {lesson.result.__name__}: {exc}") from None


def finish(
    lesson: Lesson,
    params: Params,
    model: CostModel,
    result: LaunchResult,
    program: Program | None = None,
) -> Outcome:
    """A finished launch as an Outcome: typed results, refined prediction, metrics.
    `program`: the one the run executed (built again when not given)."""
    results = decode_results(lesson, result.rank_results)
    marks = [*result.marks, *lesson.marks(params, results)]
    measured = Timeline(spans=result.spans, counters=result.counters, marks=marks)
    program = program if program is not None else lesson.build(params)
    # What the ranks measured (compute costs, p2p samples), then the run's own timeline:
    # the lesson's refinement policy (runtime.fit.after_run).
    refined, replayed = refine_after_run(
        lesson.prepare_model(params, model, results),
        program,
        measured,
        lesson.hooks.refinement,
        warmup_steps=lesson.hooks.warmup_steps(params),  # steps the lesson's times leave out
        restarted=result.restarts is not None and bool(result.restarts.failures),
    )
    predicted = simulate(program, replayed)
    run_data = RunData(measured, results, result.restarts)
    metrics = lesson.metrics(params, predicted, run_data)
    more, curves = lesson.figures(params, refined, run_data)
    return Outcome(
        lesson,
        params,
        replayed,  # the model behind `predicted` (figures predict from `refined`)
        predicted,
        measured,
        [*metrics, *more],
        result.backend,
        str(result.run_dir),
        curves,
    )
