"""Fitting compute rates from timed samples: the calibration's least squares.

runtime.fit.calibration times blocks and optimizer steps on every rank; these
functions turn those samples into the simulator's rates record
(runtime.sim.compute.ComputeRates). A lesson's own rates are fitted by the lesson
(runtime.fit.calibration_probes).
"""

from __future__ import annotations


def fit_block(samples: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """t = overhead + flops / rate + elements · per_element over (flops, elements,
    seconds) samples: (overhead_s, flops_per_s, s_per_element).

    FLOPs alone do not fit a block on a CPU: at hidden 64 a third of its time goes to
    operators that stream its activations (LayerNorm, GELU, softmax), which scale with
    tokens·h, not h². Fitted to FLOPs only, the calibration's shapes put the pipeline's
    default block 24% under its measured time and the widest 28% over it; with the
    elements, every shape within about 6%. Least squares of the relative error, as
    `fit_rates`; when a coefficient would come out negative (too few or too noisy
    samples), the FLOPs-only fit."""
    import numpy as np  # here only: predict imports this module and stays stdlib-only

    rows = np.array([(1.0, flops, elements) for flops, elements, _ in samples])
    seconds = np.array([t for _, _, t in samples])
    # Each row divided by its time: least squares of the relative error. Columns scaled
    # to 1 first, since FLOPs and elements differ by orders of magnitude.
    weighted = rows / seconds[:, None]
    scale = np.abs(weighted).max(axis=0)
    coefficients = np.linalg.lstsq(weighted / scale, np.ones(len(samples)), rcond=None)[0]
    overhead, seconds_per_flop, per_element = (coefficients / scale).tolist()
    if overhead >= 0 and per_element >= 0 and seconds_per_flop > 0:
        return overhead, 1.0 / seconds_per_flop, per_element
    overhead, rate = fit_rates([(flops, t) for flops, _, t in samples])
    return overhead, rate, 0.0


def fit_rates(samples: list[tuple[float, float]]) -> tuple[float, float]:
    """t = overhead + flops / rate over (flops, seconds) samples: (overhead_s, flops_per_s).

    Weighted by 1/t², i.e. least squares of the *relative* error: the samples span
    orders of magnitude (a tiny block is all overhead, a large one all FLOPs), and an
    ordinary fit would let the largest decide the overhead of the smallest."""
    weights = [1.0 / (y * y) for _, y in samples]
    total = sum(weights)
    mean_x = sum(w * x for w, (x, _) in zip(weights, samples, strict=True)) / total
    mean_y = sum(w * y for w, (_, y) in zip(weights, samples, strict=True)) / total
    var = sum(w * (x - mean_x) ** 2 for w, (x, _) in zip(weights, samples, strict=True))
    cov = sum(w * (x - mean_x) * (y - mean_y) for w, (x, y) in zip(weights, samples, strict=True))
    slope = max(cov / var if var else 0.0, 1e-15)  # seconds per FLOP
    overhead = max(mean_y - slope * mean_x, 0.0)
    return overhead, 1.0 / slope
