"""Widgets of the lesson screen, each usable and testable on its own.

Part of `playground/` in docs/design.md: the Gantt chart, the ring and the memory
bars are drawn with Textual's Line API (render_line -> Strip, cached); the
parameter form is generated from a scenario's declared params.
"""
