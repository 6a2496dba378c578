"""The parameter form of a lesson, generated from the lesson's declared Params.

A `playground/` widget of docs/design.md. One line per knob (name, then an input;
a Select for a single choice), shown as the learner would type it, validated
on every change by the lesson's own Params (`Params.parse`, the same code the
CLI and torchrun use), and the error shown under the field the ParamError
names. The form posts `Changed` with the typed params, or with the error, so
the screen can refuse to launch anything while the form is invalid.

Layout, and why: the names' column is as wide as this lesson's longest name
(a fixed width ran long names into their values: `checkpoint_every5`); a name
that would leave too little room for its value, and a comma list (`stage`:
ddp,zero1,…), take a line of their own with the value under them. A group of
knobs shared by lessons (the MiniGPT's shape) is one collapsible section,
folded until the learner opens it or an error names one of its fields, so the
lesson's own knobs come first and the form fits a small terminal.

Imports: textual and lesson definitions; never torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Collapsible, Input, Label, Select, Static

from playground.i18n import t
from playground.usage import param_error_text
from scenarios.base import Lesson
from scenarios.params import Knob, Mode, ParamError, Params

# The names' column is at most this wide; a longer name gets a line of its own.
MAX_LABEL = 17
# Narrower than this beside the column, a value is cut to nothing (`gpu a ▼`): each name
# then takes only its own width, and the values are no longer aligned.
MIN_VALUE = 12


class ParamForm(VerticalScroll):
    """Inputs for a scenario's params; validates as the learner types."""

    DEFAULT_CSS = """
    ParamForm { height: auto; max-height: 100%; }
    ParamForm .param { height: 1; }
    ParamForm .param.stacked { height: 2; layout: vertical; }
    ParamForm .param.stacked > Input, ParamForm .param.stacked > Select { margin-left: 2; }
    ParamForm .param Label { color: $text-muted; }
    ParamForm .param Input { border: none; height: 1; padding: 0; width: 1fr; }
    ParamForm .param Select { width: 1fr; height: 1; }
    ParamForm .param SelectCurrent { border: none; height: 1; padding: 0; }
    ParamForm Collapsible { border: none; padding: 0; margin: 0; background: transparent; }
    ParamForm Collapsible > Contents { padding: 0; }
    ParamForm CollapsibleTitle { padding: 0; }
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
        self.language = "en"  # of the error lines: the screen's, set with the help
        self._validated: dict[str, str] | None = None  # the fields as last validated

    def compose(self) -> ComposeResult:
        defaults = self.lesson.params().typed()
        groups = self.lesson.params.knob_groups()
        label_width = self.label_width = min(MAX_LABEL, 1 + max(len(n) for n, _ in self.knobs))
        for group, knobs in groups:
            rows = [
                row for name, knob in knobs for row in self._row(name, knob, defaults, label_width)
            ]
            if group is None:
                yield from rows
            else:
                # Folded: the lesson's own knobs come first; an error here unfolds it.
                yield Collapsible(*rows, title=group, collapsed=True, id=f"group-{group}")
        yield Static(classes="error", id="error-form")

    def _row(self, name: str, knob: Knob, defaults: dict[str, str], label_width: int):
        stacked = len(name) >= label_width or knob.kind == "choices"
        label = Label(name, classes="name")
        label.styles.width = "auto" if stacked else label_width
        row = (Vertical if stacked else Horizontal)(
            label, self._input(name, knob, defaults[name]),
            classes="param stacked" if stacked else "param",
        )  # fmt: skip
        return [row]

    def on_resize(self) -> None:
        narrow = self.content_size.width - self.label_width < MIN_VALUE
        for row in self.query(".param").exclude(".stacked"):
            label = row.query_one(".name", Label)
            label.styles.width = len(str(label.content)) + 1 if narrow else self.label_width

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
        self.language = language
        for name, _ in self.knobs:
            self.query_one(f"#param-{name}").tooltip = self.lesson.help(name)[language]
        for group in self.query(Collapsible):
            group.title = t(f"app.group_{(group.id or '').removeprefix('group-')}", language)

    def validate_form(self, mode: Mode = "predict") -> Params | None:
        """Parse the form; show the error under the field it names. The params, or None."""
        # Only the error shown is cleared: updating every field's line restyled and
        # reflowed the whole form at each keystroke, and at each field as the form mounts.
        for static in self.query(".error.shown"):
            static.remove_class("shown")
            static.update("")
        raw = self.raw()
        # What a field's change would validate again (in predict's bounds, as below).
        self._validated = raw if mode == "predict" else None
        try:
            self.values = self.lesson.parse(raw, mode)
            self.error = None
        except ParamError as exc:
            self.values, self.error = None, param_error_text(exc, self.language)
            names = {name for name, _ in self.knobs}
            if exc.field in names:
                target = self._error_line(exc.field)
            else:
                target = self.query_one("#error-form", Static)
            target.update(f"⚠ {self.error}")
            target.add_class("shown")
            for group in target.ancestors:
                if isinstance(group, Collapsible):
                    group.collapsed = False
        self.post_message(self.Changed(self.values, self.error))
        return self.values

    def _error_line(self, name: str) -> Static:
        """The line under field `name`, mounted the first time it has an error to show:
        a hidden line for every field was a seventh of a lesson screen's widgets (each
        styled and laid out as the screen opens), and most are never shown."""
        found = self.query(f"#error-{name}")
        if found:
            return found.first(Static)
        row = self.query_one(f"#param-{name}").parent
        assert isinstance(row, Widget) and isinstance(row.parent, Widget)
        line = Static(classes="error", id=f"error-{name}")
        row.parent.mount(line, after=row)
        return line

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._revalidate()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._revalidate()

    def _revalidate(self) -> None:
        # Each field says it changed as the form mounts, with the values validated then:
        # nothing to parse again (predict's bounds) until one differs.
        if self.raw() != self._validated:
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
