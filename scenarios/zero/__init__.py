"""Lesson 2: ZeRO and FSDP (lesson.py declares it; rank.py runs it on real ranks)."""
