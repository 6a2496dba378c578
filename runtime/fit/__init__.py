"""Fitting the cost model to this machine: calibration runs and the after-run
refinement of a prediction from what the ranks measured.

docs/design.md's "calibration" and "after a run". It builds on the simulator
(runtime.sim) and starts calibration ranks through the engine (runtime.engine).
"""
