"""Lesson 5, pipeline schedules: `lesson` (params, narrative, Program, metrics; no
torch; its texts in `texts.toml`), `orders` and `schedules` (GPipe, 1F1B, interleaved,
ZB-H1 as data), `lumped` (predict at scale), `rank` and `executor` (what a rank runs,
with torch)."""
