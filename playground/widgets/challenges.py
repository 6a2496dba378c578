"""How a lesson's goal and challenges read on screen: the opening overview, one challenge.

A `playground/` widget module of docs/design.md (issue 40, items 1 and 2): pure
formatting of scenarios.goals' declarations and the learner's progress
(playground.progress) into Textual Content. The narrative panel shows `goal_content`
when a lesson opens and after each outcome (what you will be able to explain, then each
challenge met or not, with the last comparison: your answer, the model's, the
measurement); the challenges screen (playground.screens.challenges) shows
`challenge_content` for the one selected.

Imports: textual's Content, the i18n catalogs and the goal types; never torch.
"""

from __future__ import annotations

from textual.content import Content

from playground.challenges import Verdict, comparison
from playground.i18n import t
from playground.progress import ChallengeState, LessonProgress
from scenarios.goals import Challenge, Goal

MET, NOT_MET, OPEN = "✓", "✗", "·"


def mark(state: ChallengeState, verdict: Verdict | None) -> tuple[str, str]:
    """The sign before a challenge and its style: met, answered wrong last time, open."""
    if state.met:
        return MET, "bold $text-success"
    if verdict is not None and verdict.met is False and verdict.yours is not None:
        return NOT_MET, "bold $text-error"
    return OPEN, "$foreground-muted"


def goal_content(
    goal: Goal,
    progress: LessonProgress,
    language: str,
    verdicts: list[Verdict] | None = None,
) -> Content:
    """The lesson's goal: its outcomes, its challenges with their state, and the keys."""
    by_id = {v.challenge.id: v for v in verdicts or []}
    met = sum(progress.state(c.id).met for c in goal.challenges)
    lines: list[Content] = [Content.styled(t("app.goal_title", language), "bold")]
    lines += [Content(f"• {outcome[language]}") for outcome in goal.outcomes]
    head = t("app.challenges_head", language, met=met, total=len(goal.challenges))
    lines.append(Content.styled(head, "bold"))
    for n, challenge in enumerate(goal.challenges, 1):
        state = progress.state(challenge.id)
        verdict = by_id.get(challenge.id)
        sign, style = mark(state, verdict)
        lines.append(Content.assemble((f"{sign} {n}. ", style), challenge.text[language]))
        if verdict is not None and verdict.yours is not None:
            key = "app.challenge_right" if verdict.met else "app.challenge_wrong"
            said = f"   {t(key, language)}: {comparison(verdict, language)}"
            lines.append(Content.styled(said, "$text-success" if verdict.met else "$text-error"))
        elif state.pending and state.answer is not None:
            said = f"   {t('app.challenge_pending', language, answer=state.answer)}"
            lines.append(Content.styled(said, "$text-warning"))
    lines.append(Content.styled(t("app.goal_keys", language), "$foreground-muted"))
    return Content("\n").join(lines)


def challenge_content(
    number: int, challenge: Challenge, state: ChallengeState, language: str
) -> Content:
    """One challenge in full: its text, its hint, whether it asks first, its state."""
    sign, style = mark(state, None)
    lines: list[Content] = [
        Content.assemble((f"{sign} {number}. ", style), (challenge.text[language], "bold")),
        Content.styled(
            f"{t('app.challenge_hint', language)}: {challenge.hint[language]}", "italic"
        ),
    ]
    by = "app.challenge_by_run" if challenge.by == "run" else "app.challenge_by_predict"
    lines.append(Content.styled(t(by, language), "$foreground-muted"))
    if challenge.ask is not None:
        lines.append(Content(challenge.ask.prompt[language]))
        if state.pending and state.answer is not None:
            lines.append(
                Content.styled(
                    t("app.challenge_pending", language, answer=state.answer), "$text-warning"
                )
            )
        elif state.yours is not None:
            lines.append(Content(comparison(state, language)))
    if state.met:
        lines.append(Content.styled(t("app.challenge_met", language), "$text-success"))
    return Content("\n").join(lines)
