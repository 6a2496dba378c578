"""Lesson 5, pipeline schedules: `orders` and `schedules` (GPipe, 1F1B, interleaved,
ZB-H1 as data), `params`, `formulas` (the textbook bubble), `report` (a schedule's
metrics), `lumped` (predict at scale), `lesson` (narrative, Program, hooks; no torch;
its texts in `texts.toml`), `rank` and `executor` (what a rank runs, with torch)."""
