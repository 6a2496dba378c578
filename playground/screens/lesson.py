"""A lesson's screen: set the knobs, run it for real or predict it, step through it.

Part of `playground/` in DESIGN.md: the UI on top of playground.session, which
both front ends share. Left, the parameter form (generated from the scenario's
Params, validated inline) with Run, Predict and Open; right, the Gantt chart of
the run (measured, predicted or both), and under it the narrative step the
time cursor is in, with its formula and measured number, beside a panel with
the metrics, the ring and the memory bars.

How a run flows (harlequin's pattern): a thread worker calls `session.run`,
which launches the ranks; every batch of records a rank streams arrives in the
worker's `on_message` callback and is posted to this screen as a message, so
the Gantt grows while the run goes; the Outcome (or the failure) comes back
the same way. Esc cancels: the launcher kills every rank and raises
RunCancelled. Nothing here imports torch: the ranks are other processes.

Stepping: the cursor moves from event to event (← →), plays as an animation
driven by `advance()` on a timer (space; tests call `advance` directly instead
of waiting on wall time), zooms (+ −) and jumps (Home End).
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import (
    Button,
    Footer,
    Header,
    Input,
    ProgressBar,
    Static,
    TabbedContent,
    TabPane,
)

from playground import session
from playground.export.html import write_html
from playground.formatting import format_metric
from playground.i18n import t
from playground.screens import BilingualBindings, bilingual
from playground.widgets.gantt import MODES, GanttView
from playground.widgets.memory import MemoryBars, MemoryRow
from playground.widgets.param_form import ParamForm
from playground.widgets.ring import RingView
from runtime.launch import RunCancelled, RunFailed
from runtime.program import Action
from runtime.trace import Span, Timeline
from scenarios.base import Scenario

PLAY_FPS = 20
PLAY_SECONDS = 10.0  # one pass over the whole run while playing


def narrative_text(
    scenario: Scenario, language: str, step_index: int | None, metric: str
) -> Content:
    """The current step (title, body, formula, measured number) or, before any
    cursor, the lesson's summary and the list of its steps."""
    if step_index is None:
        lines: list[Content | str] = [Content.styled(scenario.summary[language], "italic")]
        for n, step in enumerate(scenario.narrative, 1):
            lines.append(Content.styled(f"{n}. {step.title[language]}", "bold"))
        return Content("\n").join(lines)
    step = scenario.narrative[step_index]
    parts: list[str | tuple[str, str]] = [
        (f"{step_index + 1}/{len(scenario.narrative)} · {step.title[language]}", "bold"),
        "\n",
        step.body[language],
    ]
    if step.formula:
        parts += ["\n\n", (step.formula, "bold $text-accent")]
    if metric:
        parts += ["\n", (metric, "$text-success")]
    return Content.assemble(*parts)


def paired_metrics(metrics: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(name, measured key, predicted key) for metrics given both ways: `X_predicted_s`
    with `X_measured_s`, `predicted_s` with `measured_s`, `X_predicted` with `X` (or
    with the one other `X_...` that is not a prediction or a formula)."""
    pairs = []
    for key in metrics:
        if "predicted" not in key:
            continue
        base = key.replace("_predicted", "").replace("predicted_", "")
        candidates = [key.replace("predicted", "measured"), base]
        candidates += [
            k
            for k in metrics
            if k.startswith(base + "_") and "predicted" not in k and "formula" not in k
        ]
        measured = next((c for c in candidates if c in metrics and c != key), None)
        if measured is not None:
            # `predicted_s` / `measured_s`: the pair is the run's time itself.
            pairs.append((base if base not in ("s", "") else "time_s", measured, key))
    return pairs


def _error(measured: Any, predicted: Any) -> str:
    """Relative error, the largest over ranks for per-rank lists."""
    if (
        isinstance(measured, list)
        and isinstance(predicted, list)
        and len(measured) == len(predicted)
    ):
        errors = [_error(m, p) for m, p in zip(measured, predicted, strict=True)]
        values = [float(e.rstrip("%")) for e in errors if e]
        return f"{max(values):.0f}%" if values else ""
    if isinstance(measured, int | float) and isinstance(predicted, int | float) and measured:
        return f"{abs(predicted - measured) / abs(measured):.0%}"
    return ""


def metrics_text(metrics: dict[str, Any], language: str) -> Content:
    """First, every metric that has a measured and a predicted value, side by side
    with the error; then the rest. Groups (one per schedule) are indented."""
    if not metrics:
        return Content(t("app.no_metrics", language))
    lines: list[Content] = []

    def walk(group: dict[str, Any], indent: str) -> None:
        pairs = paired_metrics(group)
        shown = {k for _, m, p in pairs for k in (m, p)}
        if pairs:
            width = max(len(name) for name, _, _ in pairs)
            header = f"{indent}{'':<{width}}  {t('app.measured', language):>10}  {t('app.predicted', language):>10}  {t('app.error', language):>6}"
            lines.append(Content.styled(header, "$foreground-muted"))
            for name, measured, predicted in pairs:
                m, p = group[measured], group[predicted]
                error = _error(m, p)
                if isinstance(m, list):  # per rank: both lists, then the worst error
                    values = f"{format_metric(measured, m)} / {format_metric(predicted, p)}  "
                else:
                    values = (
                        f"{format_metric(measured, m):>10}  {format_metric(predicted, p):>10}  "
                    )
                lines.append(
                    Content.assemble(
                        (f"{indent}{name:<{width}}  ", "bold"),
                        values,
                        (f"{error:>6}", "$text-warning"),
                    )
                )
        rest = {k: v for k, v in group.items() if k not in shown}
        width = max((len(k) for k, v in rest.items() if not isinstance(v, dict)), default=0)
        for name, value in rest.items():
            if isinstance(value, dict):
                lines.append(Content.styled(f"{indent}{name}", "bold"))
                walk(value, indent + "  ")
            else:
                style = "$text-warning" if name.endswith("error") else ""
                lines.append(
                    Content.assemble(
                        (f"{indent}{name:<{width}} ", "$foreground-muted"),
                        (format_metric(name, value), style),
                    )
                )

    walk(metrics, "")
    return Content("\n").join(lines)


class LessonScreen(BilingualBindings, Screen[None]):
    """Form, Gantt, narrative and panels of one lesson; run, predict or open a run."""

    BINDINGS = [
        *bilingual("escape", "escape", "app.back_or_cancel"),
        *bilingual("r", "run", "app.run"),
        *bilingual("p", "predict", "app.predict"),
        *bilingual("o", "open", "app.open", show=False),
        *bilingual("space", "play", "app.play"),
        *bilingual("left", "step(-1)", "app.prev", show=False),
        *bilingual("right", "step(1)", "app.next", show=False),
        *bilingual("plus,equals_sign", "zoom(2.0)", "app.zoom_in"),
        *bilingual("minus", "zoom(0.5)", "app.zoom_out", show=False),
        *bilingual("shift+left", "pan(-0.25)", "app.pan_left", show=False),
        *bilingual("shift+right", "pan(0.25)", "app.pan_right", show=False),
        *bilingual("home", "jump(0)", "app.home", show=False),
        *bilingual("end", "jump(1)", "app.end", show=False),
        *bilingual("m", "view", "app.view"),
        *bilingual("e", "export", "app.export"),
        *bilingual("question_mark", "help", "app.help"),
    ]

    language: reactive[str] = reactive("en")
    running: reactive[bool] = reactive(False)

    @dataclass
    class Records(Message):
        spans: list[Span]

    @dataclass
    class Finished(Message):
        outcome: session.Outcome

    @dataclass
    class Failed(Message):
        error: str
        cancelled: bool = False

    @dataclass
    class Status(Message):
        key: str
        values: dict[str, Any]

    def __init__(self, scenario: Scenario) -> None:
        super().__init__()
        self.sub_title = ""
        self.scenario = scenario
        self.outcome: session.Outcome | None = None
        self.actions: dict[str, Action] = {}
        self.events: list[float] = []
        self.cancel_event: threading.Event | None = None
        self.playing = False
        self._timer = None
        self._status: tuple[str, dict[str, Any]] = ("app.status_idle", {})
        self._step: int | None = None
        self._metric_line = ""
        self.last_export: Path | None = None

    # -- layout ----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            with Vertical(id="side"):
                yield ParamForm(self.scenario, id="form")
                with Horizontal(id="actions"):
                    yield Button("Run", id="run", variant="primary", compact=True)
                    yield Button("Predict", id="predict", compact=True)
                with Horizontal(id="open-row"):
                    yield Input(id="open-path", compact=True)
                    yield Button("Open", id="open", compact=True)
                yield Static(id="status")
                yield ProgressBar(id="progress", show_eta=False)
            with Vertical(id="main"):
                with VerticalScroll(id="gantt-box"):
                    yield GanttView(id="gantt")
                with Horizontal(id="lower"):
                    yield Static(id="narrative")
                    with TabbedContent(id="panels"):
                        with TabPane("Metrics", id="tab-metrics"), VerticalScroll():
                            yield Static(id="metrics")
                        with TabPane("Ring", id="tab-ring"):
                            yield RingView(id="ring")
                        with TabPane("Memory", id="tab-memory"), VerticalScroll():
                            yield MemoryBars(id="memory")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#gantt", GanttView).can_focus = True
        self.query_one("#gantt", GanttView).focus()
        self.query_one("#progress", ProgressBar).display = False
        self.relabel(self.language)
        self.predict()  # the plan is on screen at once; Run measures it

    def watch_language(self, language: str) -> None:
        if self.is_mounted:
            self.relabel(language)

    def relabel(self, language: str) -> None:
        s = self.scenario
        self.title = f"{t('app.lesson', language, n=s.lesson)} · {s.title[language]}"
        self.query_one("#run", Button).label = t("app.run", language)
        self.query_one("#predict", Button).label = t("app.predict", language)
        self.query_one("#open", Button).label = t("app.open", language)
        self.query_one("#open-path", Input).placeholder = t("app.open_hint", language)
        self.query_one("#form", ParamForm).set_help(language)
        self.query_one("#form", ParamForm).border_title = t("app.parameters", language)
        self.query_one("#gantt-box").border_title = self._gantt_title(language)
        panels = self.query_one("#panels", TabbedContent)
        for pane, key in (
            ("tab-metrics", "app.metrics"),
            ("tab-ring", "app.ring"),
            ("tab-memory", "app.memory"),
        ):
            panels.get_tab(pane).label = t(key, language)
        self._show_status()
        self._update_narrative()
        if self.outcome is not None:
            self._show_panels(self.outcome)

    def _gantt_title(self, language: str) -> str:
        mode = self.query_one("#gantt", GanttView).mode
        return f"{t('app.timeline', language)} · {t('app.mode_' + mode, language)}"

    # -- status ------------------------------------------------------------------------
    def set_status(self, key: str, **values: Any) -> None:
        self._status = (key, values)
        self._show_status()

    def _show_status(self) -> None:
        key, values = self._status
        style = "$text-error" if key == "app.status_failed" else ""
        self.query_one("#status", Static).update(
            Content.styled(t(key, self.language, **values), style)
        )

    def on_lesson_screen_status(self, message: Status) -> None:
        self.set_status(message.key, **message.values)

    # -- actions -----------------------------------------------------------------------
    def action_escape(self) -> None:
        focused = self.focused
        if (
            isinstance(focused, Input)
            or focused is not None
            and focused.id
            and focused.id.startswith("param-")
        ):
            self.query_one("#gantt", GanttView).focus()
        elif self.running and self.cancel_event is not None:
            self.cancel_event.set()
            self.set_status("app.status_cancelling")
        else:
            self.app.pop_screen()

    @on(Button.Pressed, "#run")
    def action_run(self) -> None:
        if self.running:
            return
        form = self.query_one("#form", ParamForm)
        values = form.validate_form("run")
        if values is None:
            self.set_status("app.status_invalid")
            return
        program = self.scenario.build(values)
        self.actions = {a.id: a for a in program.actions()}
        gantt = self.query_one("#gantt", GanttView)
        predicted = (
            self.outcome.predicted if self.outcome and self.outcome.params == values else None
        )
        gantt.set_timelines(None, predicted)
        gantt.follow = True
        progress = self.query_one("#progress", ProgressBar)
        progress.update(total=len(program), progress=0)
        progress.display = True
        self.running = True
        self.cancel_event = threading.Event()
        self.set_status("app.status_starting", ranks=self.scenario.world_size(values))
        self._run_worker(form.raw(), self.cancel_event)

    @work(thread=True, exclusive=True, exit_on_error=False, group="run")
    def _run_worker(self, raw: dict[str, str], cancel: threading.Event) -> None:
        started = [0]

        def on_message(message: tuple) -> None:
            kind = message[0]
            if kind == "ready":
                started[0] += 1
                if started[0] == 1:
                    self.post_message(self.Status("app.status_running", {}))
            elif kind == "records":
                self.post_message(self.Records([Span.from_dict(s) for s in message[2]]))

        def on_calibrate(world: int) -> None:
            self.post_message(self.Status("app.status_calibrating", {"ranks": world}))

        try:
            outcome = session.run(
                self.scenario.name,
                raw,
                on_message=on_message,
                cancel=cancel,
                on_calibrate=on_calibrate,
            )
        except RunCancelled:
            self.post_message(self.Failed("", cancelled=True))
        except (RunFailed, session.UsageError) as exc:
            self.post_message(self.Failed(str(exc)))
        except Exception as exc:  # a bug must not take the app down: show it, stay usable
            self.post_message(self.Failed(f"{type(exc).__name__}: {exc}"))
        else:
            self.post_message(self.Finished(outcome))

    def on_lesson_screen_records(self, message: Records) -> None:
        gantt = self.query_one("#gantt", GanttView)
        gantt.add_spans(message.spans)
        self.query_one("#progress", ProgressBar).advance(len(message.spans))

    def on_lesson_screen_finished(self, message: Finished) -> None:
        self.running = False
        self.show_outcome(message.outcome)
        key = "app.status_done" if message.outcome.measured is not None else "app.status_predicted"
        self.set_status(key)

    def on_lesson_screen_failed(self, message: Failed) -> None:
        self.running = False
        if message.cancelled:
            self.set_status("app.status_cancelled")
        else:
            self.set_status("app.status_failed", error=message.error)
            self.notify(message.error, title=t("app.run_failed", self.language), severity="error")

    @on(Button.Pressed, "#predict")
    def action_predict(self) -> None:
        self.predict()

    def predict(self) -> None:
        form = self.query_one("#form", ParamForm)
        values = form.validate_form("predict")
        if values is None:
            self.set_status("app.status_invalid")
            return
        try:
            outcome = session.predict(self.scenario.name, form.raw())
        except session.UsageError as exc:
            self.set_status("app.status_failed", error=str(exc))
            return
        self.show_outcome(outcome)
        self.set_status("app.status_predicted")

    def action_open(self) -> None:
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
        try:
            outcome = session.replay(path)
        except session.UsageError as exc:
            self.set_status("app.status_failed", error=str(exc))
            return
        if outcome.scenario.name != self.scenario.name:
            self.set_status(
                "app.status_failed",
                error=t("app.wrong_scenario", self.language, name=outcome.scenario.name),
            )
            return
        for name, value in outcome.params.items():
            self.query_one("#form", ParamForm).set_value(name, value)
        self.show_outcome(outcome)
        self.set_status("app.status_opened", path=path)

    def on_param_form_changed(self, message: ParamForm.Changed) -> None:
        self.query_one("#run", Button).disabled = message.values is None
        self.query_one("#predict", Button).disabled = message.values is None

    # -- showing an outcome -------------------------------------------------------------
    def show_outcome(self, outcome: session.Outcome) -> None:
        self.outcome = outcome
        self.actions = {a.id: a for a in outcome.scenario.build(outcome.params).actions()}
        gantt = self.query_one("#gantt", GanttView)
        gantt.set_timelines(outcome.measured, outcome.predicted)
        gantt.follow = False
        self._rebuild_events()
        self._show_panels(outcome)
        gantt.cursor = gantt.start
        self._update_narrative()

    def _show_panels(self, outcome: session.Outcome) -> None:
        self.query_one("#metrics", Static).update(metrics_text(outcome.metrics, self.language))
        titles = {s.phases[0]: s.title[self.language] for s in self.scenario.narrative if s.phases}
        for step in self.scenario.narrative:
            for phase in step.phases:
                titles[phase] = step.title[self.language].split(": ", 1)[-1]
        self.query_one("#ring", RingView).set_data(
            self.scenario.world_size(outcome.params),
            self.actions.values(),
            self._followed(outcome),
            titles,
        )
        rows = [
            MemoryRow(*row) for row in self.scenario.memory_rows(outcome.params, outcome.metrics)
        ]
        words = {
            "measured": t("app.memory_measured", self.language),
            "predicted": t("app.memory_predicted", self.language),
            "note": t("app.memory_note", self.language),
        }
        if not rows:
            words["note"] = t("app.memory_none", self.language)
        self.query_one("#memory", MemoryBars).set_rows(rows, words)

    @staticmethod
    def _followed(outcome: session.Outcome) -> Timeline:
        """The timeline the cursor follows: measured when there is one."""
        return outcome.measured if outcome.measured is not None else outcome.predicted

    def _rebuild_events(self) -> None:
        gantt = self.query_one("#gantt", GanttView)
        times = set()
        for span in gantt.visible_spans():
            times.add(span.start)
            times.add(span.end)
        self.events = sorted(times)

    # -- the cursor ----------------------------------------------------------------------
    def action_step(self, direction: int) -> None:
        gantt = self.query_one("#gantt", GanttView)
        if not self.events:
            return
        if direction > 0:
            i = bisect_right(self.events, gantt.cursor + 1e-12)
            gantt.cursor = self.events[min(i, len(self.events) - 1)]
        else:
            i = bisect_left(self.events, gantt.cursor - 1e-12) - 1
            gantt.cursor = self.events[max(i, 0)]
        gantt.show_cursor()
        self._update_narrative()

    def action_jump(self, where: int) -> None:
        gantt = self.query_one("#gantt", GanttView)
        gantt.home()
        gantt.cursor = gantt.end if where else gantt.start
        self._update_narrative()

    def action_zoom(self, factor: float) -> None:
        self.query_one("#gantt", GanttView).zoom(factor)

    def action_pan(self, fraction: float) -> None:
        self.query_one("#gantt", GanttView).pan(fraction)

    def action_view(self) -> None:
        gantt = self.query_one("#gantt", GanttView)
        gantt.mode = MODES[(MODES.index(gantt.mode) + 1) % len(MODES)]
        self.query_one("#gantt-box").border_title = self._gantt_title(self.language)
        self._rebuild_events()

    def action_play(self) -> None:
        self.playing = not self.playing
        if self.playing and self._timer is None:
            self._timer = self.set_interval(1 / PLAY_FPS, self.advance)
        elif not self.playing and self._timer is not None:
            self._timer.stop()
            self._timer = None

    def advance(self, frames: int = 1) -> None:
        """Move the cursor forward as `frames` animation frames would (the clock)."""
        gantt = self.query_one("#gantt", GanttView)
        length = max(gantt.end - gantt.start, 1e-9)
        cursor = gantt.cursor + frames * length / (PLAY_SECONDS * PLAY_FPS)
        if cursor >= gantt.end:
            cursor = gantt.end
            if self.playing:
                self.action_play()
        gantt.cursor = cursor
        gantt.show_cursor()
        self._update_narrative()

    def span_at_cursor(self) -> Span | None:
        """The span under the cursor on the lowest rank that has one (measured first)."""
        gantt = self.query_one("#gantt", GanttView)
        best = None
        for row in gantt.rows:
            for span in row.spans:  # rows are short enough; the Gantt itself bisects
                if span.start <= gantt.cursor < span.end:
                    if best is None or (row.predicted, span.rank) < (best[0], best[1].rank):
                        best = (row.predicted, span)
                    break
        return best[1] if best else None

    def _update_narrative(self) -> None:
        gantt = self.query_one("#gantt", GanttView)
        self.query_one("#ring", RingView).cursor = gantt.cursor
        span = self.span_at_cursor()
        step_index = None
        metric = ""
        if span is not None and span.action_id in self.actions:
            action = self.actions[span.action_id]
            step = self.scenario.step_for_phase(action.phase)
            if step is not None:
                step_index = self.scenario.narrative.index(step)
                metric = self._metric_for(step.metric, span)
        elif self._step is not None and self.outcome is not None:
            step_index = self._step  # between spans: keep the last step
            step = self.scenario.narrative[step_index]
            metric = self._metric_for(step.metric, None)
        self._step = step_index
        text = narrative_text(self.scenario, self.language, step_index, metric)
        self.query_one("#narrative", Static).update(text)
        self.query_one("#narrative", Static).border_title = t("app.narrative", self.language)

    def _metric_for(self, name: str | None, span: Span | None) -> str:
        if not name or self.outcome is None:
            return ""
        metrics = self.outcome.metrics
        group = (
            (span.action_id or "").split("/", 1)[0]
            if span and "/" in (span.action_id or "")
            else None
        )
        if group and isinstance(metrics.get(group), dict):
            metrics = metrics[group]
        if name not in metrics:
            return ""
        return f"{name} = {format_metric(name, metrics[name])}"

    # -- export and help ----------------------------------------------------------------
    def action_export(self) -> None:
        if self.outcome is None:
            self.notify(t("app.nothing_to_export", self.language))
            return
        folder = Path(os.environ.get("PLAYGROUND_EXPORT_DIR") or Path.cwd())
        path = folder / f"playground-{self.scenario.name}-{time.strftime('%Y%m%d-%H%M%S')}.html"
        try:
            write_html(self.outcome, path)
        except OSError as exc:
            self.notify(str(exc), severity="error")
            return
        self.last_export = path
        self.notify(
            t("app.exported", self.language, path=path), title=t("app.export", self.language)
        )

    def action_help(self) -> None:
        from playground.screens.help import HelpScreen

        self.app.push_screen(HelpScreen(self.language))
