"""Lesson 5, pipeline schedules: `lesson` (params, narrative, Program, metrics; no
torch), `narrative`, `orders` and `schedules` (GPipe, 1F1B, interleaved, ZB-H1 as
data), `rank` and `executor` (what a rank runs, with torch)."""
