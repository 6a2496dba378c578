"""Lesson 7, distributed inference: `params` (the params, their rules, the rank
result), the pure mechanism (`trace`, `blocks`, `router`, `iteration`, `scheduler`,
`timing`, `serve`, `lumps`, `stepmodel`, `plan`, `program`, `latency`, `search`),
the prediction and metrics (`predict`, `goodput`, `report`), `lesson` (texts,
hooks, LESSON; no torch) and the rank side with torch (`rank`, `decode`,
`weights`)."""
