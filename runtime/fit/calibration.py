"""Calibration: measure alpha, beta, gamma on this machine and cache them.

`playground calibrate` (and `playground run` on first use) launches the ranks
with the `calibrate` job (runtime.fit.calibration_rank): every rank runs the steps
of a hand-made ring (two all-gathers: as many steps as an all-reduce) with
chunks of several sizes, all ranks at once, so the fit includes what sharing the
CPU cores costs at this world size. Then it times a reduction (a += b) with
every rank doing it at once. The parent fits t = alpha + S·beta by least squares
on the median per size of a step as the lesson times it (ring_step_time: first
rank in to last rank out); gamma = the slowest rank's median reduce time per
byte. Then the generic compute rates (runtime.sim.compute.ComputeRates: blocks,
operators, Adam), and the lessons' own probes, which the caller hands in
(runtime.fit.calibration_probes: runtime imports no lesson), each fitted by its lesson.

The cache is one JSON file, keyed by host, backend, world size, torch version
and the version of this method: a calibration is only valid where and how it
was measured. Each model keeps in its details the conditions it was measured in
(runtime.fit.conditions: when, the machine's boot, the load average, and the spread
of the repetitions it already takes), read back to predict an interval before a
run and to say when the calibration is stale; an entry without them still loads.

Pure: stdlib only (torch's version is read from package metadata).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime.engine.files import make_private_dir, read_text_bounded, write_text_atomic
from runtime.fit import conditions
from runtime.fit.calibration_busy import busy_gather_scale, busy_ring_scales, busy_scale
from runtime.fit.calibration_probes import LessonProbes, fit_lessons
from runtime.fit.compute_fit import fit_block
from runtime.fit.link_fit import SIZES, fit_link, link_figures
from runtime.sim.compute import ComputeRates, block_flops
from runtime.sim.corrections import Corrections, ScaleKey
from runtime.sim.costmodel import CostModel

# Bumped whenever the measurement changes, so an old cache is never reused.
METHOD_VERSION = 24
# What the ranks of a calibration run (runtime.fit.calibration_rank).
RANK_ENTRY = "runtime.fit.calibration_rank:run_rank"
# The link's half alone (`lab nodes -- calibrate`, inside a node).
LINKS_ENTRY = "runtime.fit.calibration_rank:run_links"
REPS = 9  # repetitions of each timing: ring steps, the reduction, a lesson's probes
# (hidden, tokens, seq) of the MiniGPT blocks timed for the compute rates: from the
# smallest lesson shapes (all overhead) to the pipeline's (mostly FLOPs).
BLOCK_SHAPES = ((32, 64, 16), (32, 512, 16), (64, 512, 64), (64, 2048, 64), (128, 2048, 64))
BLOCK_ROUNDS = 3  # per shape, after a warm-up round: the median of every forward, backward
LIVE_GRAPHS = 4  # forwards whose activations are alive at once, then their backwards
# Adam's cost per tensor, from this many tensors of this many elements beside one large
# tensor (runtime.fit.calibration_compute.adam): a MiniGPT block's LayerNorm and bias sizes.
ADAM_TENSORS, ADAM_SMALL, ADAM_LARGE = 32, 64, 2**18
ADAM_REPS = 31  # Adam steps of each kind timed, by turns
OP_REPS = 101  # one-token block forwards timed for an operator's cost (each is short)
WAKE_REPS = 30  # block forwards timed right after a wait and back to back, by turns

# The cache holds a few hundred bytes per (host, backend, world size): more is not ours.
CACHE_MAX_BYTES = 16 * 2**20


def cache_dir() -> Path:
    base = os.environ.get("PLAYGROUND_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "playground"
    )
    return Path(base)


def make_cache_dir() -> Path:
    """The cache folder, made if need be: private (0700; the files in it name this host
    and what it measured), but a folder the user chose (PLAYGROUND_CACHE_DIR) is used as
    it is."""
    folder = cache_dir()
    make_private_dir(folder, tighten="PLAYGROUND_CACHE_DIR" not in os.environ)
    return folder


def cache_file() -> Path:
    return cache_dir() / "calibration.json"


def torch_version() -> str:
    from importlib import metadata  # here: slow to import, and few commands need it

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def backend_hint(requested: str) -> str:
    """What `auto` will resolve to, guessed without importing torch."""
    if requested != "auto":
        return requested
    return "nccl" if os.path.exists("/dev/nvidiactl") else "gloo"


def cache_key(backend: str, world_size: int, host: str | None = None) -> str:
    return (
        f"{host or socket.gethostname()}|{backend}|{world_size}|{torch_version()}|v{METHOD_VERSION}"
    )


def _load_cache() -> dict[str, Any]:
    try:
        return json.loads(read_text_bounded(cache_file(), CACHE_MAX_BYTES))
    except (OSError, ValueError):  # absent, not a file, too large, not JSON: start afresh
        return {}


def save(model: CostModel, backend: str, world_size: int) -> None:
    """Cache `model`; entries of an older calibration method go (no lookup reads them
    again: each bump of METHOD_VERSION had left them behind)."""
    method = f"v{METHOD_VERSION}"
    data = {k: v for k, v in _load_cache().items() if k.rsplit("|", 1)[-1] == method}
    data[cache_key(backend, world_size)] = model.describe()
    make_cache_dir()  # the file 0600, as write_text_atomic writes it
    write_text_atomic(cache_file(), json.dumps(data, indent=1))


def lookup(backend: str, world_size: int, *, nearest: bool = False) -> CostModel | None:
    """The cached model for this host/backend/torch at `world_size` (or the nearest one)."""
    data = _load_cache()
    exact = data.get(cache_key(backend, world_size))
    if exact:
        return CostModel.from_dict(exact)
    if not nearest:
        return None
    host, be, _, version, method = cache_key(backend, 0).split("|")
    candidates = []
    for key, value in data.items():
        parts = key.split("|")
        if len(parts) == 5 and (parts[0], parts[1], parts[3], parts[4]) == (
            host,
            be,
            version,
            method,
        ):
            candidates.append((abs(int(parts[2]) - world_size), int(parts[2]), value))
    if not candidates:
        return None
    _, world, value = min(candidates)
    model = CostModel.from_dict(value)
    return CostModel.from_dict(
        {**model.describe(), "name": f"{model.name} (nearest calibrated world size {world})"}
    )


def fit(
    rank_results: list[dict[str, Any]],
    backend: str,
    world_size: int,
    probes: Sequence[LessonProbes] = (),
    *,
    load1: float | None = None,
) -> CostModel:
    """Least-squares alpha, beta from a ring step per size as the lesson times it
    (ring_step_time); gamma from the reduce timing; the busy collectives' scales, the
    compute rates (fit_compute, with the lessons' own from `probes`, the ones the job
    ran) and what a compute pays after a wait (wake_seconds). In its details, the
    conditions it ran in (runtime.fit.conditions): when, the machine's boot, the load
    average `load1` (read before the ranks started; now if not given) and the spread
    of its repetitions, which make the before-run prediction an interval."""
    sizes = SIZES if world_size > 1 else ()
    link = fit_link(rank_results, world_size)
    alpha, beta, gamma, points = link.alpha, link.beta, link.gamma, link.points
    per_size, reduce_reps = link.per_size, link.reduce_reps
    host = socket.gethostname()
    scales = busy_ring_scales(rank_results, world_size, alpha, beta, gamma)
    builtin = busy_scale(
        rank_results, world_size, alpha, beta, gamma, timing="busy_builtin_all_reduce"
    )
    gather = busy_gather_scale(rank_results, world_size, alpha, beta, builtin)
    return CostModel(
        rates=fit_compute(rank_results, probes),
        corrections=Corrections(wake=wake_seconds([r["wake"] for r in rank_results])),
        # Hand-made collectives by their kind; torch's own blocking ones apart
        # (ScaleKey.builtin), each as timed between computes.
        collective_scale={
            **{ScaleKey(kind): scale for kind, scale in scales.items()},
            ScaleKey("all_reduce", builtin=True): builtin,
            ScaleKey("reduce_scatter", builtin=True): builtin,
            ScaleKey("all_gather", builtin=True): gather,
        },
        name=f"calibrated:{host}/{backend}/n={world_size}",
        alpha=alpha,
        beta=beta,
        gamma=gamma,
        cores=os.cpu_count(),
        source=f"measured on {host} on {time.strftime('%Y-%m-%d %H:%M')} with {world_size} ranks on "
        f"{os.cpu_count()} cores, torch {torch_version()}",
        details={
            "points": [[s, t] for s, t in points],
            "world_size": world_size,
            "backend": backend,
            "conditions": conditions.Conditions(
                calibrated_at=time.time(),
                booted_at=conditions.boot_time(),
                load1=conditions.load_now() if load1 is None else load1,
                spread=conditions.Spread(
                    compute=compute_spread(rank_results),
                    communication=conditions.pace_range(list(zip(*per_size, strict=True))),
                ),
                figures=link_figures(sizes, per_size, reduce_reps),
            ).to_dict(),
        },
    )


def compute_spread(rank_results: list[dict[str, Any]]) -> tuple[float, float]:
    """The compute's (fast, slow) factors: per rank and block shape, the fastest and the
    slowest forward-and-backward of one input against their median
    (runtime.fit.calibration_compute.blocks keeps them, the row's sixth item; a result
    without them: (1, 1)), the median over ranks and shapes (conditions.sample_range)."""
    groups = [row[5] for r in rank_results for row in r["blocks"] if len(row) > 5]
    return conditions.sample_range(groups)


def fit_compute(
    rank_results: list[dict[str, Any]], probes: Sequence[LessonProbes] = ()
) -> ComputeRates:
    """The compute rates from every rank's block timings (median over ranks per shape):
    t = overhead + flops / rate + elements · per_element (runtime.fit.compute_fit.fit_block),
    forward and backward fitted apart; Adam's and an operator's; and each lesson's own,
    fitted by the lesson from its probes' samples (calibration_probes.fit_lessons)."""
    forward, backward = [], []
    for i, (hidden, tokens, seq) in enumerate(BLOCK_SHAPES):
        rows = [r["blocks"][i] for r in rank_results]
        flops, elements = block_flops(tokens, hidden, seq), tokens * hidden
        forward.append((flops, elements, statistics.median(row[3] for row in rows)))
        backward.append((2 * flops, elements, statistics.median(row[4] for row in rows)))
    f_overhead, f_rate, f_element = fit_block(forward)
    b_overhead, b_rate, b_element = fit_block(backward)
    lessons = fit_lessons(probes, rank_results)
    return ComputeRates(
        forward_flops_per_s=f_rate,
        backward_flops_per_s=b_rate,
        forward_overhead_s=f_overhead,
        backward_overhead_s=b_overhead,
        forward_s_per_element=f_element,
        backward_s_per_element=b_element,
        **fit_adam(
            statistics.median(r["adam"][0] for r in rank_results),
            statistics.median(r["adam"][1] for r in rank_results),
        ),
        op_s=statistics.median(r["op_s"] for r in rank_results),
        lessons=lessons,
        source="MiniGPT blocks, eager operators and Adam timed on this machine, every rank "
        "busy at once (CPU seconds)"
        + (f"; the lessons' own probes: {', '.join(sorted(lessons))}" if lessons else ""),
    )


def wake_seconds(rows: list[list[float]]) -> float:
    """What a compute pays right after its rank blocked (Corrections.wake): the
    median over ranks of [after a wait, back to back] apart, never below zero."""
    return max(0.0, statistics.median(after - back for after, back in rows)) if rows else 0.0


def fit_adam(large_s: float, small_s: float) -> dict[str, float]:
    """Adam's seconds per element and per tensor (ComputeRates.adam_s_per_*) from one
    step over one tensor of ADAM_LARGE elements (`large_s`) and one over ADAM_TENSORS of
    ADAM_SMALL (`small_s`): t = elements · e + tensors · c, two equations, two unknowns;
    neither below zero (noise can make the small step look cheaper than its elements)."""
    small_elements = ADAM_TENSORS * ADAM_SMALL
    # Eliminate e: small_s - large_s · small_elements / ADAM_LARGE = c · (tensors - that share)
    per_tensor = max(0.0, small_s - large_s * small_elements / ADAM_LARGE) / (
        ADAM_TENSORS - small_elements / ADAM_LARGE
    )
    # Positive: the inference step model reads a memory bandwidth off it (28 B / this).
    per_element = max(1e-12, (large_s - per_tensor) / ADAM_LARGE)
    return {"adam_s_per_element": per_element, "adam_s_per_tensor": per_tensor}
