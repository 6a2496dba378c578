"""Lesson 7, distributed inference: `lesson` (params, Program, metrics; no torch),
the pure mechanism (`trace`, `blocks`, `router`, `scheduler`, `stepmodel`, `plan`,
`program`, `latency`, `predict`, `search`) and the rank side with torch (`rank`,
`decode`)."""
