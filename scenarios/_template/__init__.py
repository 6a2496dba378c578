"""The template lesson: the smallest lesson package that runs, to copy for a new lesson.

Not part of the course (scenarios.registry lists it under the name `template`, never
on the home screen or in `playground list`); docs/adding-a-lesson.md walks through
copying it. Its modules import one another relatively (`from .params import …`), so a
copy under another name runs once its NAME (lesson.py) is changed.
"""
