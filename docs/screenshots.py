"""Draws the README's screenshots (docs/screenshot-en.svg, docs/screenshot-es.svg) from a real run.

Runs the pipeline lesson for real (`playground run pipeline --json`: gloo ranks on this
machine, GPipe then 1F1B), opens the saved run in the app at 120×40 as a learner would
(`o`), steps the cursor into the run and shows the panel asked for, then saves the
screen as SVG, once per language. Run it again whenever the lesson screen changes:

    python docs/screenshots.py [--tab memory|metrics|ring|workers|curves]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from playground.app import PlaygroundApp
from playground.screens.lesson import LessonScreen

DOCS = Path(__file__).parent
SIZE = (120, 40)


def real_run(folder: Path) -> Path:
    saved = folder / "pipeline.json"
    command = [sys.executable, "-m", "playground.cli", "run", "pipeline", "--json"]
    with saved.open("w") as out:
        subprocess.run(command, stdout=out, check=True)
    return saved


async def draw(saved: Path, language: str, tab: str, target: Path) -> None:
    os.environ["TEXTUAL_ANIMATIONS"] = "none"
    app = PlaygroundApp(language=language)
    async with app.run_test(size=SIZE) as pilot:
        app.open_lesson("pipeline")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        screen.open_path(saved.name)  # as typed from its folder: no temporary path on show
        await pilot.pause()
        await pilot.press(*["right"] * 40)  # into the run: a step of the narrative
        screen.action_show_tab(f"tab-{tab}")
        await pilot.pause(0.5)
        app.save_screenshot(filename=target.name, path=str(target.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tab", default="memory", help="the panel shown (default: memory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        saved = real_run(Path(folder))
        os.chdir(folder)
        for language in ("en", "es"):
            target = DOCS / f"screenshot-{language}.svg"
            asyncio.run(draw(saved, language, args.tab, target))
            print(f"wrote {target}")


if __name__ == "__main__":
    main()
