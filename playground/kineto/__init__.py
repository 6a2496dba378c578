"""A learner's own distributed job: PyTorch profiler (Kineto) traces, read and explained.

`playground trace PATH...` (issue 39) reads one trace per rank (plain or gzipped JSON,
or a folder of them), measures each rank the way Holistic Trace Analysis does (idle,
compute and non-compute shares, communication overlapped by computation), names every
collective by kind and, where the trace lets it tell, by the mechanism a lesson teaches,
and sets the cost model's prediction beside each collective with a known size.

Modules, bottom to top: `schema` (the bounded msgspec shape of a trace), `reader`
(files to typed events, refusing hostile input in one line), `figures` (HTA's
temporal breakdown and overlap), `collectives` (kinds, sizes, mechanisms),
`predict` (the cost model beside them), `workers` (each rank's steps as a run's
Workers tab reads them, and the straggler), `report` (metrics and the `--json`
document), `command` (the CLI). Pure Python: no torch, no pandas, no Textual.
"""
