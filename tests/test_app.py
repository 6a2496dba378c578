"""The app's first screens, driven like a learner would: keys in, texts out.

docs/design.md, "Tests": App.run_test() + Pilot for behaviour, one snapshot of the
home screen (English, forced with PLAYGROUND_LANG so it is stable on any
machine), and a subprocess check that the UI never loads torch.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from textual.widgets import OptionList, Static

from playground.app import PlaygroundApp
from playground.screens.home import HomeScreen
from playground.screens.lesson import LessonScreen
from scenarios.registry import get_lesson, lessons

SIZE = (100, 30)
ROOT = Path(__file__).resolve().parent.parent


def prompts(app: PlaygroundApp) -> list[str]:
    options = app.screen.query_one("#lessons", OptionList)
    return [str(options.get_option_at_index(n).prompt) for n in range(options.option_count)]


def text(app: PlaygroundApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).content)


async def test_home_lists_every_lesson_in_order_with_the_unbuilt_marked() -> None:
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE):
        options = app.screen.query_one("#lessons", OptionList)
        infos = lessons()
        assert [options.get_option_at_index(n).id for n in range(options.option_count)] == [
            i.scenario for i in infos
        ]
        assert [i.lesson for i in infos] == list(range(8))
        for info, prompt in zip(infos, prompts(app), strict=True):
            assert prompt.startswith(f"Lesson {info.lesson} · {info.title['en']}")
            assert info.summary["en"] in prompt
            assert ("ready" if info.available else "coming soon") in prompt
        # The cursor starts on the first lesson one can open.
        assert options.highlighted_option is not None
        assert options.highlighted_option.id == next(i.scenario for i in infos if i.available)


async def test_l_switches_every_text_between_english_and_spanish() -> None:
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        assert app.title == "Distributed-AI playground"
        assert app.screen.active_bindings["q"].binding.description == "Quit"
        await pilot.press("l")
        assert app.language == "es"
        assert app.title == "Laboratorio de IA distribuida"
        assert prompts(app)[0].startswith("Lección 0 · ¿Por qué distribuir?  lista")
        assert app.screen.active_bindings["q"].binding.description == "Salir"
        await pilot.press("l")
        assert app.title == "Distributed-AI playground"
        assert prompts(app)[0].startswith("Lesson 0 · Why distribute at all  ready")


async def test_enter_opens_the_lesson_with_its_params_and_escape_goes_back() -> None:
    app = PlaygroundApp(language="en")
    lesson = get_lesson("ring-allreduce")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "enter")  # the cursor starts on lesson 0; lesson 1 is next
        assert isinstance(app.screen, LessonScreen)
        assert app.screen.title == f"Lesson 1 · {lesson.title['en']}"
        typed = lesson.params().typed()  # the defaults, as the learner would type them
        knobs = lesson.params.knobs()
        for name, _ in knobs:  # one field per declared knob, its help as tooltip
            field = app.screen.query_one(f"#param-{name}")
            assert field.tooltip == lesson.help(name)["en"]
            assert str(getattr(field, "value", "")) == typed[name]
        assert typed["size"] == "4MiB"
        # the plan is predicted at once; the lesson opens on its goal, `n` goes to the
        # narrative's first step
        await pilot.press("n")
        assert lesson.narrative[0].formula in text(app, "#narrative")
        assert "time_s" in text(app, "#metrics") and "predicted" in text(app, "#metrics")

        await pilot.press("l")  # the open screen follows the language too
        name, _ = knobs[0]
        assert app.screen.query_one(f"#param-{name}").tooltip == lesson.help(name)["es"]
        assert app.screen.active_bindings["escape"].binding.description == "Volver"

        await pilot.press("escape")
        assert isinstance(app.screen, HomeScreen)
        assert prompts(app)[0].startswith("Lección 0")  # changed while it was hidden


async def test_an_unbuilt_lesson_shows_a_notice_instead_of_opening(monkeypatch) -> None:
    # Every lesson of the unit is built now: lesson 0 stands for one still to come.
    from dataclasses import replace

    from scenarios import registry

    built = dict(registry.LESSONS)
    planned = replace(built.pop("why-distribute").info, available=False)
    monkeypatch.setattr(registry, "LESSONS", built)
    monkeypatch.setattr(registry, "PLANNED", (planned,))
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("up", "enter")  # lesson 0, "not built yet"
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        toasts = [str(toast.render()) for toast in app.screen.query("Toast")]
        assert any("This lesson is not built yet." in toast for toast in toasts)


async def test_q_quits() -> None:
    app = PlaygroundApp(language="en")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0


def test_the_language_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYGROUND_LANG", "es")
    assert PlaygroundApp().language == "es"
    monkeypatch.setenv("PLAYGROUND_LANG", "en")
    assert PlaygroundApp().language == "en"


def test_the_app_never_imports_torch() -> None:
    # A fresh interpreter: this test process may hold torch from other tests.
    script = textwrap.dedent(
        """
        import asyncio, sys
        import playground.app

        async def visit():
            app = playground.app.PlaygroundApp(language="en")
            async with app.run_test() as pilot:
                await pilot.press("enter", "l", "escape")
                await pilot.pause()  # every key handled before the app closes (a loaded machine)

        asyncio.run(visit())
        loaded = {"torch", "runtime.engine.worker", "runtime.engine.comm", "scenarios.ring_allreduce.rank"}
        loaded &= set(sys.modules)
        assert not loaded, loaded
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_home_snapshot(snap_compare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAYGROUND_LANG", "en")
    assert snap_compare(PlaygroundApp(), terminal_size=SIZE)
