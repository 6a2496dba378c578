"""A lab run's report: the run as `replay` shows it, then its two-level prediction table.

Split off playground.lab_nodes (the `lab` command), which calls `show` once both nodes
exited 0. After the run's own report (its prediction: this machine's one-level model),
the link's rate is said and the measured metrics are set beside a two-level prediction
(`hierarchical`: this machine's calibration inside a node, the link's rate across,
ranks_per_node set) and, when the lab was calibrated for this link and ranks a node
(playground.lab_calibrate), beside the prediction on that profile, each with its error.

Imports: playground.formatting, playground.i18n, playground.lab_args (the lesson run)
and playground.lab_netns, runtime.sim types; when a run is shown, playground.report,
playground.saved, playground.session, playground.saved_schema, playground.lab_calibrate,
runtime.fit (refinement and compute replay), runtime.sim.simulate and scenarios.
Front-end part (playground): no torch here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playground.formatting import plain
from playground.i18n import t
from playground.lab_args import Inner
from playground.lab_netns import NODES
from runtime.sim.costmodel import CostModel
from runtime.sim.trace import Timeline


def show(out: Path, inner: Inner, per_node: int, bits: float, language: str) -> int:
    """The saved run `out` reported (its exit status), then, unless --json, the link's
    rate and the measured metrics beside the two-level predictions."""
    from playground.report import report
    from playground.saved import replay

    shown = argparse.Namespace(json=inner.json, compact=False, export=None, trace=None)
    outcome = replay(out)
    status = report(outcome, shown)
    if not inner.json:
        from playground.lab_calibrate import lookup

        print(t("lab.link_said", language, gbps=f"{bits / 8 / 1e9:.4g}", run=plain(str(out))))
        measured = {(m.name, m.series): m.value for m in outcome.metrics}
        profile = lookup(per_node, bits)
        timeline = outcome.measured
        if timeline is None:  # a saved torchrun run always has one: nothing to set beside
            return status
        on_link = dict(hierarchical(inner, per_node, bits, out, timeline))
        on_lab = (
            dict(hierarchical(inner, per_node, bits, out, timeline, profile)) if profile else {}
        )
        rows = [(key, measured.get(key), value, on_lab.get(key)) for key, value in on_link.items()]
        rows = [r for r in rows if _number(r[1]) and _number(r[2])]
        if rows:
            print(t("lab.hierarchical", language, per_node=per_node))
            if profile is not None:
                print(t("lab.hierarchical_calibrated", language))
            for (name, series), value, predicted, calibrated in rows:
                label = plain(name if series is None else f"{name} ({series})")
                line = f"  {label:<32} {value:>12.4g} {predicted:>12.4g} {_error(value, predicted):>8.1%}"
                if _number(calibrated):
                    line += f" {calibrated:>12.4g} {_error(value, calibrated):>8.1%}"
                print(line)
    return status


def _error(measured: float, predicted: float) -> float:
    return abs(measured - predicted) / abs(measured) if measured else 0.0


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def hierarchical(
    inner: Inner,
    per_node: int,
    bits: float,
    out: Path,
    measured: Timeline,
    profile: CostModel | None = None,
) -> list[tuple[tuple[str, str | None], object]]:
    """The lesson's prediction on a two-level cost model: this machine's calibration
    inside a node, the link's rate across (β = 8 / bits s a byte; α the loopback's, a
    veth being a kernel hop like it), ranks_per_node = `per_node`; or, given, the lab's
    own `profile` (`-- calibrate`: both links measured).

    Its compute as the run's after-run prediction takes it (runtime.fit.after_run's
    compute steps): the costs the ranks measured (`out`'s rank files, CPU seconds),
    scaled to the wall time the run's spans (`measured`) took, then replayed as each
    rank ran them. CPU seconds alone leave out the time a rank waits for a core, and in
    the lab both nodes' ranks share this machine's cores with whatever else runs on it:
    the pipeline came out at half its makespan that way. Its links as given, never
    fitted to the run's own transfers (that would predict the measurement from itself),
    and its collectives at their formula's time (no collective scales: see below)."""
    from dataclasses import replace

    from playground import saved_schema as schema
    from playground.session import decode_results, resolve, select_model
    from runtime.engine.files import read_bounded
    from runtime.fit.refine import refine, refine_compute
    from runtime.fit.replay import replay_compute
    from runtime.sim.simulate import simulate
    from scenarios.base import RunData

    raw = dict(pair.split("=", 1) for pair in inner.params)
    lesson, params = resolve(
        inner.lesson, {**raw, lesson_ranks(inner.lesson): str(per_node * NODES)}, "predict"
    )
    if profile is None:
        model = select_model(None, "gloo", params.world_size, nearest=True)
        model = replace(model, ranks_per_node=per_node, inter_alpha=model.alpha,
                        inter_beta=8 / bits)  # fmt: skip
    else:
        model = profile
    # The collective scales say what a 256 KiB collective paid beyond its α-β formula
    # between computes (a peer descheduled mid-ring, Python per step): a cost per step,
    # which a factor turns into 1.3-2.7× the transfer of a link-bound collective of
    # several MiB. Across the link, whose rate dominates, the formula is the measure:
    # every collective of a lab's lesson spans its world, so crosses the link.
    model = replace(model, collective_scale={})
    model = lesson.prepare_model(params, model)
    raw_results = [
        schema.decode(read_bounded(out / f"rank{r}.json", schema.MAX_FILE_BYTES),
                      schema.TorchrunRank).result
        for r in range(params.world_size)
    ]  # fmt: skip
    results = decode_results(lesson, raw_results)
    model = refine(model, [r.compute_costs for r in results],
                   what=lesson.hooks.refinement.measures)  # fmt: skip
    program = lesson.build(params)
    warmup = lesson.hooks.warmup_steps(params)
    model = refine_compute(model, program, measured, simulate(program, model), warmup)
    predicted = simulate(program, replay_compute(model, program, measured, warmup))
    metrics = lesson.metrics(params, predicted, RunData(measured, results))
    seen: dict[tuple[str, str | None], object] = {}
    for m in metrics:  # a name given twice (a figure's points): its first value
        seen.setdefault((m.name, m.series), m.predicted)
    return list(seen.items())


def lesson_ranks(name: str) -> str:
    """The name of the lesson's parameter that sets its ranks."""
    from scenarios.registry import get_lesson

    return get_lesson(name).params.ranks_field
