"""The parameter form of a lesson, generated from the scenario's declared Params.

A `playground/` widget of DESIGN.md. One line per Param (name, then an input;
a Select for a single choice), validated on every change by the scenario
itself (`Scenario.resolve`, the same code the CLI and torchrun use), and the
error shown on the line under the field it names. The form posts `Changed`
with the resolved values, or with the error, so the screen can refuse to
launch anything while the form is invalid.

Imports: textual and scenario definitions; never torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, Select, Static

from runtime.units import format_bytes, format_seconds
from scenarios.base import Mode, Param, ParamError, Scenario


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def field_of(error: str, names: list[str]) -> str | None:
    """The param an error message is about: messages start with `name=value:`,
    `name:` or name an unknown parameter in quotes."""
    head = error.split(":", 1)[0]
    name = head.split("=", 1)[0].strip()
    if name in names:
        return name
    for candidate in names:
        if f"'{candidate}'" in error:
            return candidate
    return None


class ParamForm(VerticalScroll):
    """Inputs for a scenario's params; validates as the learner types."""

    DEFAULT_CSS = """
    ParamForm { height: auto; max-height: 100%; }
    ParamForm .param { height: 1; }
    ParamForm .param Label { width: 15; color: $text-muted; }
    ParamForm .param Input { border: none; height: 1; padding: 0; width: 1fr; }
    ParamForm .param Select { width: 1fr; height: 1; }
    ParamForm .param SelectCurrent { border: none; height: 1; padding: 0; }
    ParamForm .error { color: $text-error; display: none; height: auto; padding-left: 2; }
    ParamForm .error.shown { display: block; }
    """

    @dataclass
    class Changed(Message):
        values: dict[str, Any] | None
        error: str | None

    def __init__(self, scenario: Scenario, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.scenario = scenario
        self.names = [p.name for p in scenario.params]
        self.values: dict[str, Any] | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        for param in self.scenario.params:
            with Horizontal(classes="param"):
                yield Label(param.name)
                yield self._input(param)
            yield Static(classes="error", id=f"error-{param.name}")
        yield Static(classes="error", id="error-form")

    def _input(self, param: Param):
        if param.kind == "choice":
            return Select(
                [(c, c) for c in param.choices],
                value=str(param.default),
                allow_blank=False,
                id=f"param-{param.name}",
                compact=True,
            )
        return Input(_text(param.default), id=f"param-{param.name}", compact=True)

    def on_mount(self) -> None:
        self.validate_form()

    def raw(self) -> dict[str, str]:
        out = {}
        for param in self.scenario.params:
            widget = self.query_one(f"#param-{param.name}")
            value = widget.value if isinstance(widget, Input | Select) else ""
            out[param.name] = str(value)
        return out

    def set_help(self, language: str) -> None:
        for param in self.scenario.params:
            self.query_one(f"#param-{param.name}").tooltip = param.help[language]

    def validate_form(self, mode: Mode = "predict") -> dict[str, Any] | None:
        """Resolve the form; show the error beside its field. Returns the values or None."""
        for static in self.query(".error"):
            static.remove_class("shown")
            static.update("")
        try:
            self.values = self.scenario.resolve(self.raw(), mode)
            self.error = None
        except ParamError as exc:
            self.values, self.error = None, str(exc)
            name = field_of(self.error, self.names)
            target = self.query_one(f"#error-{name}" if name else "#error-form", Static)
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

    def set_value(self, name: str, value: Any) -> None:
        """Show `value` as the learner would type it (sizes with their unit)."""
        widget = self.query_one(f"#param-{name}")
        kind = next((p.kind for p in self.scenario.params if p.name == name), None)
        if kind == "bytes" and isinstance(value, int):
            value = format_bytes(value).replace(" ", "")
        elif kind == "duration" and isinstance(value, int | float):
            value = "0s" if value == 0 else format_seconds(value).replace(" ", "")
        if isinstance(widget, Select):
            widget.value = str(value)
        elif isinstance(widget, Input):
            widget.value = _text(value)
