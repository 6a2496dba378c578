"""A lesson's screen, minimal for now: what the lesson is, its knobs, its story, how to run it.

Part of `playground/` in DESIGN.md. It shows what the scenario declares
(scenarios.base.Scenario): title, summary, parameters with their defaults and
help, the narrative steps with their formulas, and the two headless commands
that run it today. The live run beside its prediction (Gantt, ring, metrics)
grows here later, fed by the engines of DESIGN.md's picture.

Imports: textual and scenario definitions only; never a rank module (torch).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from playground.i18n import t
from playground.screens import BilingualBindings, bilingual
from scenarios.base import NarrativeStep, Scenario


def params_table(scenario: Scenario, language: str) -> Content:
    """One aligned line per parameter: name, default, help (and the choices, if any)."""
    rows = [(t("app.param_name", language), t("app.param_default", language), "")]
    rows += [(p.name, str(p.default), p.help[language]) for p in scenario.params]
    name_w = max(len(r[0]) for r in rows) + 3
    default_w = max(len(r[1]) for r in rows) + 3
    lines = [Content.assemble((f"{rows[0][0]:<{name_w}}{rows[0][1]}", "$foreground-muted"))]
    for p, (name, default, help_text) in zip(scenario.params, rows[1:], strict=True):
        choices = f"  ({' | '.join(p.choices)})" if p.choices else ""
        lines.append(
            Content.assemble(
                (f"{name:<{name_w}}", "bold"),
                (f"{default:<{default_w}}", "$text-accent"),
                help_text,
                (choices, "$foreground-muted"),
            )
        )
    return Content("\n").join(lines)


def step_text(number: int, step: NarrativeStep, language: str) -> Content:
    """Title, body and (if the step has one) its formula."""
    parts: list[str | tuple[str, str]] = [
        (f"{number}. {step.title[language]}", "bold"),
        "\n",
        step.body[language],
    ]
    if step.formula:
        parts += ["\n\n", (f"  {step.formula}", "$text-accent")]
    return Content.assemble(*parts)


def headless_text(scenario: Scenario, language: str) -> Content:
    """The two CLI commands that run this lesson without the app, each with what it does."""
    lines = [Content(t("app.lesson_intro", language))]
    for command, what in (("run", "app.cmd_run"), ("predict", "app.cmd_predict")):
        # The explanation under the command, not beside it: 80 columns would wrap it.
        lines.append(Content.styled(f"  playground {command} {scenario.name}", "bold $text-accent"))
        lines.append(Content.styled(f"    {t(what, language)}", "$foreground-muted"))
    return Content("\n").join(lines)


class LessonScreen(BilingualBindings, Screen[None]):
    """One lesson's description; Escape or b goes back to the list."""

    BINDINGS = bilingual("escape,b", "app.pop_screen", "app.back")

    language: reactive[str] = reactive("en")

    def __init__(self, scenario: Scenario) -> None:
        super().__init__()
        self.sub_title = ""  # the header shows the lesson alone (see relabel)
        self.scenario = scenario

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="lesson"):
            yield Static(id="summary")
            yield Static(id="headless")  # first: today, running it is what one does with a lesson
            yield Static(classes="section", id="params-heading")
            yield Static(id="params")
            yield Static(classes="section", id="steps-heading")
            for n in range(len(self.scenario.narrative)):
                yield Static(classes="step", id=f"step-{n}")
        yield Footer()

    def on_mount(self) -> None:
        self.relabel(self.language)

    def watch_language(self, language: str) -> None:
        if self.is_mounted:
            self.relabel(language)

    def relabel(self, language: str) -> None:
        """Every text of the screen in `language`."""
        s = self.scenario
        # The lesson, not the app, in the header: both would not fit in 80 columns.
        self.title = f"{t('app.lesson', language, n=s.lesson)} · {s.title[language]}"
        self.query_one("#summary", Static).update(s.summary[language])
        heading = Content.assemble(
            t("app.parameters", language),
            (f"  ·  {t('app.param_hint', language)}", "not bold $foreground-muted"),
        )
        self.query_one("#params-heading", Static).update(heading)
        self.query_one("#params", Static).update(params_table(s, language))
        self.query_one("#steps-heading", Static).update(t("app.narrative", language))
        for n, step in enumerate(s.narrative):
            self.query_one(f"#step-{n}", Static).update(step_text(n + 1, step, language))
        self.query_one("#headless", Static).update(headless_text(s, language))
