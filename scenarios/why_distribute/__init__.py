"""Lesson 0: why distribute at all: memory pressure or time pressure, a 3D plan, a budget."""
