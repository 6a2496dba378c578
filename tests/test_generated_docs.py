"""The generated pages of docs/ match the code they are generated from.

playground.docs_gen writes docs/lessons/ (each lesson's parameters and narrative)
and docs/cli.md, docs/cli.es.md (every command and option) from the declarations
themselves. Here they are generated again in memory and compared with the files:
a lesson's knob, a texts.toml line or an option's help that changed without the
pages fails this test, which names the command that brings them up to date.
"""

from __future__ import annotations

import os
from dataclasses import fields

from playground.docs_gen import COMMAND, ROOT, generate, stale
from scenarios.base import Hooks
from scenarios.registry import NAMES


def test_the_committed_pages_are_the_generated_ones() -> None:
    differ = stale(generate())
    assert not differ, f"out of date: {', '.join(differ)}; run `{COMMAND}` and commit the result"


def test_every_lesson_has_a_page_in_each_language_and_an_index() -> None:
    pages = generate()
    for language in ("en", "es"):
        ending = f".{language}.md"
        lessons = [p for p in pages if p.startswith("docs/lessons/0") and p.endswith(ending)]
        assert len(lessons) == len(NAMES)
    assert {"docs/lessons/README.md", "docs/lessons/README.es.md"} <= set(pages)
    assert {"docs/cli.md", "docs/cli.es.md"} <= set(pages)
    # The pages say what made them, and every command of the parser is in the reference.
    assert all("python -m playground.docs_gen" in text.splitlines()[0] for text in pages.values())
    for command in ("list", "predict", "run", "replay", "show", "calibrate", "budget"):
        assert f"### `playground {command}`" in pages["docs/cli.md"]


def test_the_guide_to_adding_a_lesson_shows_every_hook() -> None:
    """docs/adding-a-lesson(.es).md: a row per field of scenarios.base.Hooks, in both."""
    for name in ("adding-a-lesson.md", "adding-a-lesson.es.md"):
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        missing = [f.name for f in fields(Hooks) if f"| `{f.name}` |" not in text]
        assert not missing, f"docs/{name} lacks the hooks {missing}"


def test_generating_leaves_the_language_setting_as_it_was(monkeypatch) -> None:
    monkeypatch.setenv("PLAYGROUND_LANG", "en")
    generate()
    assert os.environ["PLAYGROUND_LANG"] == "en"
    monkeypatch.delenv("PLAYGROUND_LANG")
    generate()
    assert "PLAYGROUND_LANG" not in os.environ
    assert (ROOT / "docs" / "lessons").is_dir()


def test_each_lesson_page_is_a_teachers_page_read_off_its_challenges() -> None:
    """docs/lessons/: the goal, the timings, every challenge with its answer and why, and
    what to discuss, from the lesson's challenges.py (issue 40, item 8), in each language."""
    from playground.challenges import goal_of
    from playground.docs_gen import page_name
    from scenarios.registry import get_lesson

    pages = generate()
    for name in NAMES:
        lesson = get_lesson(name)
        goal = goal_of(lesson)
        assert goal is not None
        for language, heading in (("en", "## Goal"), ("es", "## Objetivo")):
            page = pages[f"docs/lessons/{page_name(lesson, language)}"]
            assert heading in page
            for outcome in goal.outcomes:
                assert outcome[language] in page
            for challenge in goal.challenges:
                for said in (challenge.text, challenge.answer, challenge.why, challenge.hint):
                    assert said[language] in page, (name, challenge.id)
            for item in goal.discuss:
                assert item[language] in page
