"""The lesson's controls: the parameter form, Run / Predict / Open, the status line, progress.

A `playground/` widget of docs/design.md that owns everything about getting an
Outcome: it validates the form, runs the real ranks in a thread worker
(harlequin's pattern: the worker only computes and posts messages), predicts,
opens a saved run (or, where the Open box names profiler traces, hands them to the
app's trace screen: playground.screens.trace), cancels, and says what is going on in
the status line. The lesson screen shows what it posts: `Started` (a run's Program,
so the Gantt can be cleared), `Records` (spans and counters streamed by the ranks
while the run goes: the Gantt and the Workers tab draw them) and `Ready` (an
Outcome: a finished run, a prediction or a saved run).

Runs go to the warm ranks of the app's RankPool when it hands one down (the
status line says whether a run's ranks were cold or warm, and how long it took
from Run to their first action).

Never imports torch: the ranks are other processes (playground.session).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Button, Input, ProgressBar, Static

from playground import session
from playground.i18n import t
from playground.outcome import Outcome
from playground.widgets.param_form import ParamForm
from runtime.engine.launch import RunCancelled, RunFailed
from runtime.engine.pool import RankPool
from runtime.sim.program import Program
from runtime.sim.trace import Counter, Span
from runtime.sim.units import format_seconds
from scenarios.base import Lesson
from scenarios.params import Params


class LessonControls(Vertical):
    """Form, buttons, open row, status and progress of one lesson."""

    language: reactive[str] = reactive("en")
    running: reactive[bool] = reactive(False)
    calibrated = False  # whether the run going on (or last) calibrated this machine first

    @dataclass
    class Started(Message):
        params: Params
        program: Program

    @dataclass
    class Records(Message):
        spans: list[Span]
        counters: list[Counter] = field(default_factory=list)

    @dataclass
    class Ready(Message):
        outcome: Outcome
        # What made it: "run" (this app's ranks), "predict" or "open" (a saved file, which
        # meets no challenge: playground.challenges).
        source: str = "run"

    @dataclass
    class Failed(Message):
        error: str
        cancelled: bool = False

    @dataclass
    class Status(Message):
        key: str
        values: dict[str, Any]

    class TracesOpened(Message):
        """The Open box named traces: the trace screen is on its way."""

    def __init__(
        self, lesson: Lesson, *, pool: RankPool | None = None, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.lesson = lesson
        self.pool = pool  # the app's warm ranks; None: every run starts its own
        self.cancel_event: threading.Event | None = None
        self._status: tuple[str, dict[str, Any]] = ("app.status_idle", {})

    def compose(self) -> ComposeResult:
        yield ParamForm(self.lesson, id="form")
        with Horizontal(id="actions"):
            yield Button("Run", id="run", variant="primary", compact=True)
            yield Button("Predict", id="predict", compact=True)
        with Horizontal(id="open-row"):
            yield Input(id="open-path", compact=True)
            yield Button("Open", id="open", compact=True)
        yield Static(id="status")
        yield ProgressBar(id="progress", show_eta=False)

    def on_mount(self) -> None:
        self.query_one("#progress", ProgressBar).display = False

    def relabel(self, language: str) -> None:
        self.language = language
        for button in ("run", "predict", "open"):
            self.query_one(f"#{button}", Button).label = t(f"app.{button}", language)
        self.query_one("#open-path", Input).placeholder = t("app.open_hint", language)
        form = self.query_one("#form", ParamForm)
        form.set_help(language)
        form.border_title = t("app.parameters", language)
        if form.error is not None:  # the error line in the new language too
            form.validate_form()
        self._show_status()

    # -- status ------------------------------------------------------------------------
    def set_status(self, key: str, **values: Any) -> None:
        self._status = (key, values)
        self._show_status()

    def _show_status(self) -> None:
        key, values = self._status
        style = "$text-error" if key == "app.status_failed" else ""
        text = Content.styled(t(key, self.language, **values), style)
        self.query_one("#status", Static).update(text)

    def on_lesson_controls_status(self, message: Status) -> None:
        self.set_status(message.key, **message.values)

    def on_param_form_changed(self, message: ParamForm.Changed) -> None:
        for button in ("#run", "#predict"):
            self.query_one(button, Button).disabled = message.values is None

    # -- run ---------------------------------------------------------------------------
    @on(Button.Pressed, "#run")
    def run(self) -> None:
        if self.running:
            return
        form = self.query_one("#form", ParamForm)
        params = form.validate_form("run")
        if params is None:
            self.set_status("app.status_invalid")
            return
        program = self.lesson.build(params)
        self.post_message(self.Started(params, program))
        progress = self.query_one("#progress", ProgressBar)
        progress.update(total=len(program), progress=0)
        progress.display = True
        self.running = True
        self.cancel_event = threading.Event()
        self.set_status("app.status_starting", ranks=params.world_size)
        self._run_worker(form.raw(), self.cancel_event)

    def cancel(self) -> bool:
        """Stop the run going on, if any (every rank is killed); False when none runs."""
        if not self.running or self.cancel_event is None:
            return False
        self.cancel_event.set()
        self.set_status("app.status_cancelling")
        return True

    @work(thread=True, exclusive=True, exit_on_error=False, group="run")
    def _run_worker(self, raw: dict[str, str], cancel: threading.Event) -> None:
        started = [0]

        def on_message(message: tuple) -> None:
            if message[0] == "ready":
                started[0] += 1
                if started[0] == 1:
                    warm = len(message) > 4 and message[4]
                    key = "app.status_running_warm" if warm else "app.status_running"
                    key = "app.status_running_calibrated" if self.calibrated else key
                    self.post_message(self.Status(key, {}))
            elif message[0] == "records":
                spans = [Span.from_dict(s) for s in message[2]]
                self.post_message(self.Records(spans, [Counter(**c) for c in message[3]]))

        def on_calibrate(world: int) -> None:
            # The run then goes on the ranks that calibrated: warm, but not from a run.
            self.calibrated = True
            self.post_message(self.Status("app.status_calibrating", {"ranks": world}))

        self.calibrated = False  # set before session.run, read when it is Ready

        name = self.lesson.name
        try:
            outcome = session.run(
                name,
                raw,
                on_message=on_message,
                cancel=cancel,
                on_calibrate=on_calibrate,
                pool=self.pool,
            )
        except RunCancelled:
            self.post_message(self.Failed("", cancelled=True))
        except session.UsageError as exc:
            self.post_message(self.Failed(exc.text(self.language)))
        except RunFailed as exc:
            self.post_message(self.Failed(str(exc)))
        except Exception as exc:  # a bug must not take the app down: show it, stay usable
            self.post_message(self.Failed(f"{type(exc).__name__}: {exc}"))
        else:
            self.post_message(self.Ready(outcome))

    def on_lesson_controls_records(self, message: Records) -> None:
        self.query_one("#progress", ProgressBar).advance(len(message.spans))

    def watch_running(self, running: bool) -> None:
        # The bar shows a run's progress only: once it ends, its line goes back to the form.
        if not running and self.is_mounted:
            self.query_one("#progress", ProgressBar).display = False

    def on_lesson_controls_ready(self, message: Ready) -> None:
        if self.running:
            self.running = False
            outcome = message.outcome
            if outcome.start_s is None:
                self.set_status("app.status_done")
            else:
                key = "app.status_done_warm" if outcome.warm else "app.status_done_cold"
                key = "app.status_done_calibrated" if self.calibrated else key
                self.set_status(key, start=format_seconds(outcome.start_s))

    def on_lesson_controls_failed(self, message: Failed) -> None:
        self.running = False
        if message.cancelled:
            self.set_status("app.status_cancelled")
        else:
            self.set_status("app.status_failed", error=message.error)
            self.notify(message.error, title=t("app.run_failed", self.language), severity="error")

    # -- predict and open ----------------------------------------------------------------
    @on(Button.Pressed, "#predict")
    def predict(self) -> None:
        form = self.query_one("#form", ParamForm)
        if form.validate_form("predict") is None:
            self.set_status("app.status_invalid")
            return
        try:
            outcome = session.predict(self.lesson.name, form.raw())
        except session.UsageError as exc:
            self.set_status("app.status_failed", error=exc.text(self.language))
            return
        self.post_message(self.Ready(outcome, "predict"))
        self.set_status("app.status_predicted")

    def ask_open(self) -> None:
        """`o`: open the path typed in the box, or put the cursor there."""
        path_input = self.query_one("#open-path", Input)
        if path_input.value.strip():
            self.open_path(path_input.value.strip())
        else:
            path_input.focus()

    @on(Button.Pressed, "#open")
    @on(Input.Submitted, "#open-path")
    def _open_pressed(self) -> None:
        self.open_path(self.query_one("#open-path", Input).value.strip())

    def open_path(self, path: str) -> None:
        """Open what `path` names: profiler traces go to the trace screen, as the lesson
        screen's `o` sends them (the Open button, clicked, reaches only this); anything
        else is tried as a saved run of this lesson."""
        if self._open_traces(path):
            return
        from playground.saved import replay

        try:
            outcome = replay(path)
        except session.UsageError as exc:
            self.set_status("app.status_failed", error=exc.text(self.language))
            return
        if outcome.lesson.name != self.lesson.name:
            wrong = t("app.wrong_scenario", self.language, name=outcome.lesson.name)
            self.set_status("app.status_failed", error=wrong)
            return
        self.query_one("#form", ParamForm).show(outcome.params)
        self.post_message(self.Ready(outcome, "open"))
        self.set_status("app.status_opened", path=path)

    def _open_traces(self, path: str) -> bool:
        """The trace screen on `path`, if it names traces (a folder of them, a trace file,
        several paths); False otherwise. Read as the app's own `o` reads them, on the app's
        loop, so that the screen binds to the app's language."""
        from playground.kineto.reader import typed_traces

        paths = typed_traces(path)
        if paths is None:
            return False
        opener = getattr(self.app, "action_open_trace", None)
        if opener is None:  # an app without a trace screen: a saved run, or its error
            return False
        self.post_message(self.TracesOpened())
        self.app.call_later(opener, paths)
        return True
