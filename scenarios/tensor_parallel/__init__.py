"""Lesson 4: tensor parallelism of a whole Transformer block (lesson.py reads first)."""
