"""The parameter form of a lesson, generated from the lesson's declared Params.

A `playground/` widget of DESIGN.md. One line per knob (name, then an input;
a Select for a single choice), shown as the learner would type it, validated
on every change by the lesson's own Params (`Params.parse`, the same code the
CLI and torchrun use), and the error shown under the field the ParamError
names. The form posts `Changed` with the typed params, or with the error, so
the screen can refuse to launch anything while the form is invalid.

Imports: textual and lesson definitions; never torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, Select, Static

from scenarios.base import Lesson
from scenarios.params import Knob, Mode, ParamError, Params


class ParamForm(VerticalScroll):
    """Inputs for a scenario's params; validates as the learner types."""

    DEFAULT_CSS = """
    ParamForm { height: auto; max-height: 100%; }
    ParamForm .param { height: 1; }
    ParamForm .param Label { width: 16; color: $text-muted; }
    ParamForm .param Input { border: none; height: 1; padding: 0; width: 1fr; }
    ParamForm .param Select { width: 1fr; height: 1; }
    ParamForm .param SelectCurrent { border: none; height: 1; padding: 0; }
    ParamForm .error { color: $text-error; display: none; height: auto; padding-left: 2; }
    ParamForm .error.shown { display: block; }
    """

    @dataclass
    class Changed(Message):
        values: Params | None
        error: str | None

    def __init__(self, lesson: Lesson, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lesson = lesson
        self.knobs = lesson.params.knobs()
        self.values: Params | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        defaults = self.lesson.params().typed()
        for name, knob in self.knobs:
            with Horizontal(classes="param"):
                yield Label(name)
                yield self._input(name, knob, defaults[name])
            yield Static(classes="error", id=f"error-{name}")
        yield Static(classes="error", id="error-form")

    @staticmethod
    def _input(name: str, knob: Knob, typed: str) -> Input | Select:
        if knob.kind == "choice":
            return Select(
                [(c, c) for c in knob.choices],
                value=typed,
                allow_blank=False,
                id=f"param-{name}",
                compact=True,
            )
        return Input(typed, id=f"param-{name}", compact=True)

    def on_mount(self) -> None:
        self.validate_form()

    def raw(self) -> dict[str, str]:
        out = {}
        for name, _ in self.knobs:
            widget = self.query_one(f"#param-{name}")
            value = widget.value if isinstance(widget, Input | Select) else ""
            out[name] = str(value)
        return out

    def set_help(self, language: str) -> None:
        for name, _ in self.knobs:
            self.query_one(f"#param-{name}").tooltip = self.lesson.help(name)[language]

    def validate_form(self, mode: Mode = "predict") -> Params | None:
        """Parse the form; show the error under the field it names. The params, or None."""
        for static in self.query(".error"):
            static.remove_class("shown")
            static.update("")
        try:
            self.values = self.lesson.parse(self.raw(), mode)
            self.error = None
        except ParamError as exc:
            self.values, self.error = None, str(exc)
            names = {name for name, _ in self.knobs}
            target_id = f"#error-{exc.field}" if exc.field in names else "#error-form"
            target = self.query_one(target_id, Static)
            target.update(f"⚠ {self.error}")
            target.add_class("shown")
        self.post_message(self.Changed(self.values, self.error))
        return self.values

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.validate_form()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self.validate_form()

    def set_value(self, name: str, typed: str) -> None:
        """Type `typed` into one field, as the learner would."""
        widget = self.query_one(f"#param-{name}")
        if isinstance(widget, Select | Input):
            widget.value = typed

    def show(self, params: Params) -> None:
        """Fill every field with `params`, as the learner would type them."""
        for name, typed in params.typed().items():
            self.set_value(name, typed)
