"""`playground progress [--reset LESSON] [--json]`: the learner's challenges, lesson by lesson.

Part of the CLI (playground.cli runs it, playground.cli_parser declares it through
`add_parser`). It lists, for each lesson of the unit, how many of its challenges
(scenarios/<lesson>/challenges.py) are met and each one's state and last answer, read
from the state directory (playground.progress: bounded, schema-checked reads; a file
that does not pass is named with how to reset it, never trusted); `--reset LESSON`
forgets one lesson. A lesson name that is not one is bad input: one line, status 2.

Imports: the progress store, the lessons' declarations (no torch).
"""

from __future__ import annotations

import argparse
import json

from playground import progress as store
from playground.challenges import goal_of
from playground.formatting import plain
from playground.i18n import default_language, t
from playground.usage import UsageError
from scenarios.registry import NAMES, get_lesson


def add_parser(sub: argparse._SubParsersAction) -> None:
    language = default_language()
    p = sub.add_parser("progress", help=t("cli.progress_help", language))
    p.add_argument(
        "--reset", metavar="LESSON", default=None, help=t("cli.progress_reset_help", language)
    )
    p.add_argument("--json", action="store_true", help="the progress as one JSON document")


def _unknown(name: str) -> UsageError:
    shown = plain(name)[:60]
    allowed = ", ".join(NAMES)
    return UsageError(
        f"no lesson named {shown}: use one of {allowed}",
        es=f"no hay ninguna lección llamada {shown}: use una de {allowed}",
    )


def cmd_progress(args: argparse.Namespace) -> int:
    language = default_language()
    if args.reset is not None:
        if args.reset not in NAMES:
            raise _unknown(args.reset)
        key = "cli.progress_reset_done" if store.reset(args.reset) else "cli.progress_reset_none"
        print(t(key, language, lesson=args.reset))
        return 0
    doc: list[dict] = []
    for name in NAMES:
        lesson = get_lesson(name)
        goal = goal_of(lesson)
        if goal is None:
            continue
        entry: dict = {"lesson": name, "number": lesson.number}
        try:
            kept = store.load(name)
        except store.ProgressError as exc:
            entry["error"] = exc.text(language)
            doc.append(entry)
            continue
        rows = []
        for challenge in goal.challenges:
            state = kept.state(challenge.id)
            rows.append(
                {
                    "id": challenge.id,
                    "text": challenge.text[language],
                    "met": state.met,
                    "answer": state.answer,
                    "pending": state.pending,
                    "yours": state.yours,
                    "model": state.model,
                    "measured": state.measured,
                }
            )
        entry["met"] = sum(r["met"] for r in rows)
        entry["challenges"] = rows
        doc.append(entry)
    if args.json:
        print(
            json.dumps(
                {"folder": str(store.folder()), "lessons": doc}, indent=2, ensure_ascii=False
            )
        )
        return 0
    for entry in doc:
        values = {"n": entry["number"], "lesson": entry["lesson"]}
        if "error" in entry:
            print(plain(t("cli.progress_unreadable", language, **values, error=entry["error"])))
            continue
        total = len(entry["challenges"])
        print(t("cli.progress_lesson", language, **values, met=entry["met"], total=total))
        for n, row in enumerate(entry["challenges"], 1):
            sign = "✓" if row["met"] else "·"
            said = f"  {sign} {n}. {row['text']}"
            if row["yours"] is not None:
                said += f"  [{t('app.challenge_yours', language)} {row['yours']}"
                for key in ("model", "measured"):
                    if row[key] is not None:
                        said += f" · {t('app.challenge_' + key, language)} {row[key]}"
                said += "]"
            elif row["pending"] and row["answer"] is not None:
                said += f"  [{t('app.challenge_pending', language, answer=row['answer'])}]"
            print(plain(said))
    print(t("cli.progress_where", language, folder=plain(str(store.folder()))))
    return 0
