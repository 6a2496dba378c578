"""A real terminal for tests: tmux runs the installed `playground`, types keys, reads the screen.

Shared by the tmux tests (tests/test_tmux.py, tests/test_tmux_lessons.py). The pane stays
after the program ends (remain-on-exit), so a test can tell a crash from a quit and read
the traceback the app left on screen.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

HAS_TMUX = shutil.which("tmux") is not None


def playground_command() -> str:
    """The console script of this environment, or the module where it is not installed."""
    playground = Path(sys.executable).with_name("playground")
    return str(playground) if playground.exists() else f"{sys.executable} -m playground.cli"


class Tmux:
    def __init__(self, command: str, env: dict[str, str], width: int = 140, height: int = 40):
        self.name = f"playground-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        for attempt in range(3):
            # The server the previous test's kill-session ended may still be going away
            # as this one asks it for a session (seen once in a full run): ask again.
            started = subprocess.run(
                ["tmux", "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                 f"env {exports} {command}"],
                capture_output=True, text=True,
            )  # fmt: skip
            if started.returncode == 0:
                break
            if attempt == 2:
                raise AssertionError(f"tmux new-session failed: {started.stderr}")
            time.sleep(0.5)
        # Another tmux server's default sizing (e.g. 80x24) must not apply to this window;
        # the pane outlives its program so that a crash stays readable.
        for option in (
            ["set-option", "-t", self.name, "window-size", "manual"],
            ["set-option", "-t", self.name, "remain-on-exit", "on"],
        ):
            subprocess.run(["tmux", *option], capture_output=True)  # fmt: skip
        self.resize(width, height)

    def resize(self, width: int, height: int) -> None:
        """The window at exactly width × height (checked: a resize can be lost while the
        session starts, and the app would then draw at tmux's default 80x24)."""
        for _ in range(50):
            subprocess.run(
                ["tmux", "resize-window", "-t", self.name, "-x", str(width), "-y", str(height)],
                capture_output=True,
            )
            if self.size() == (width, height):
                return
            time.sleep(0.05)
        raise AssertionError(f"tmux kept {self.size()} instead of {width}x{height}")

    def size(self) -> tuple[int, int]:
        result = subprocess.run(
            ["tmux", "display-message", "-p", "-t", self.name, "#{window_width} #{window_height}"],
            capture_output=True,
            text=True,
        )
        width, _, height = result.stdout.strip().partition(" ")
        return (int(width), int(height)) if width.isdigit() and height.isdigit() else (0, 0)

    def keys(self, *keys: str, pause: float = 0.15) -> None:
        for key in keys:
            subprocess.run(["tmux", "send-keys", "-t", self.name, key], check=True)
            time.sleep(pause)

    def screen(self) -> str:
        result = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        )
        return result.stdout

    def changed(self, before: str, timeout: float) -> str:
        """The screen once it differs from `before`, or as it is after `timeout` s."""
        deadline = time.monotonic() + timeout
        while (screen := self.screen()) == before and time.monotonic() < deadline:
            time.sleep(0.03)
        return screen

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            if not self.running():
                break
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; screen:\n{self.screen()}")

    def settle(self, quiet: float = 0.3, timeout: float = 5.0) -> str:
        """The screen once it has stopped changing for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        before = self.screen()
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self.screen()
            if now == before:
                return now
            before = now
        return before

    def alive(self) -> bool:
        """The tmux session exists (its program may have ended: see `running`)."""
        return (
            subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode
            == 0
        )

    def running(self) -> bool:
        """The program in the pane is still running."""
        result = subprocess.run(
            ["tmux", "list-panes", "-t", self.name, "-F", "#{pane_dead}"],
            capture_output=True,
            text=True,
        )
        return result.returncode == 0 and result.stdout.split()[:1] == ["0"]

    def pid(self) -> int:
        result = subprocess.run(
            ["tmux", "list-panes", "-t", self.name, "-F", "#{pane_pid}"],
            capture_output=True,
            text=True,
        )
        return int(result.stdout.split()[0])

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)
