"""The teacher's part of each lesson's page: outcomes, timings, challenges with answers, discussion.

Part of playground.docs_gen (issue 40, item 8). Everything here is read off the lesson's
own declaration (`GOAL` in scenarios/<lesson>/challenges.py: scenarios.goals), so the
page cannot drift from what the app checks: tests/test_generated_docs.py regenerates
it and fails on any difference.

Imports: scenarios.goals (no torch).
"""

from __future__ import annotations

from scenarios.goals import Goal

WORDS = {
    "en": {
        "goal": "Goal",
        "outcomes": "At the end of the lesson a learner can:",
        "timings": "Timings",
        "timings_head": "| part | minutes |",
        "total": "total",
        "challenges": "Challenges",
        "challenges_intro": "In the app, `g` lists them; an answer is given before the run "
        "and shown after it beside the model's prediction and the measurement. "
        "`playground progress` lists what each learner met.",
        "hint": "Hint",
        "met_by": "Met by",
        "run": "a real run whose metrics satisfy it",
        "predict": "a prediction (the lesson is arithmetic here) that satisfies it",
        "asks": "Asks first",
        "choices": "one of {choices}",
        "number": "a number, right within {tolerance}",
        "answer": "Answer",
        "why": "Why",
        "minutes": "{minutes} min",
        "time": "Time",
        "discuss": "What to discuss",
    },
    "es": {
        "goal": "Objetivo",
        "outcomes": "Al final de la lección, quien aprende sabe:",
        "timings": "Tiempos",
        "timings_head": "| parte | minutos |",
        "total": "total",
        "challenges": "Retos",
        "challenges_intro": "En la aplicación, `g` los lista; la respuesta se da antes de "
        "ejecutar y se muestra después junto a la predicción del modelo y la medida. "
        "`playground progress` lista lo que cada cual cumplió.",
        "hint": "Pista",
        "met_by": "Se cumple con",
        "run": "una ejecución real cuyas métricas lo satisfagan",
        "predict": "una predicción (aquí la lección es aritmética) que lo satisfaga",
        "asks": "Pregunta antes",
        "choices": "una de {choices}",
        "number": "un número, correcto con un margen de {tolerance}",
        "answer": "Respuesta",
        "why": "Por qué",
        "minutes": "{minutes} min",
        "time": "Tiempo",
        "discuss": "Para discutir",
    },
}


def _tolerance(relative: float, absolute: float) -> str:
    parts = []
    if relative > 0:
        parts.append(f"{relative:.0%}")
    if absolute > 0:
        parts.append(f"±{absolute:g}")
    return " / ".join(parts) or "0"


def goal_section(goal: Goal, language: str) -> list[str]:
    """Markdown lines: the goal, the timings, the challenges with their answers and why,
    and what to discuss."""
    words = WORDS[language]
    lines = ["", f"## {words['goal']}", "", words["outcomes"], ""]
    lines += [f"- {outcome[language]}" for outcome in goal.outcomes]
    lines += ["", f"### {words['timings']}", "", words["timings_head"], "|---|---|"]
    total = 0
    for part, minutes in goal.timings:
        lines.append(f"| {part[language]} | {minutes} |")
        total += minutes
    lines.append(f"| **{words['total']}** | **{total}** |")
    lines += ["", f"### {words['challenges']}", "", words["challenges_intro"]]
    for n, challenge in enumerate(goal.challenges, 1):
        lines += ["", f"#### {n}. {challenge.text[language]}", ""]
        lines.append(f"- **{words['hint']}:** {challenge.hint[language]}")
        lines.append(f"- **{words['met_by']}:** {words[challenge.by]}.")
        ask = challenge.ask
        if ask is not None:
            kind = (
                words["choices"].format(choices=", ".join(f"`{c}`" for c in ask.choices))
                if ask.choices
                else words["number"].format(tolerance=_tolerance(ask.tolerance, ask.absolute))
            )
            lines.append(f"- **{words['asks']}:** {ask.prompt[language]} ({kind})")
        lines.append(f"- **{words['answer']}:** {challenge.answer[language]}")
        lines.append(f"- **{words['why']}:** {challenge.why[language]}")
        lines.append(f"- **{words['time']}:** {words['minutes'].format(minutes=challenge.minutes)}")
    if goal.discuss:
        lines += ["", f"### {words['discuss']}", ""]
        lines += [f"- {item[language]}" for item in goal.discuss]
    return lines
