"""The CLI explains itself: each lesson's parameters in `--help` and `list LESSON`,
`--version`, and bash completion driven through the real completion function."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from playground.cli import main
from scenarios.registry import NAMES, get_lesson

BIN = Path(sys.executable).parent


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["predict", "run", "show"])
@pytest.mark.parametrize("name", NAMES)
def test_help_after_a_lesson_lists_every_parameter_with_its_default(
    capsys: pytest.CaptureFixture[str], command: str, name: str
) -> None:
    out = _help(capsys, command, name, "--help")
    lesson = get_lesson(name)
    defaults = lesson.params().typed()
    assert f"parameters of {name}" in out
    for field, _ in lesson.params.knobs():
        line = next((ln for ln in out.splitlines() if ln.startswith(f"  {field} ")), None)
        assert line is not None, f"{name}: {field} not in --help"
        assert f"default: {defaults[field]}" in line


def test_help_shows_bounds_and_what_predict_allows_beyond_them(capsys, monkeypatch) -> None:
    out = _help(capsys, "predict", "pipeline", "--help")
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["stages"])
    assert "an integer from 2 to 8" in lines[at + 1]
    assert "predict allows: an integer from 2 to 64" in lines[at + 2]
    for name in ("schedule", "microbatches", "chunks"):
        assert any(ln.split()[:1] == [name] for ln in lines)
    monkeypatch.setenv("PLAYGROUND_LANG", "es")
    out = _help(capsys, "predict", "pipeline", "--help")
    assert "parámetros de pipeline" in out and "predict admite: un entero de 2 a 64" in out


def test_help_without_a_lesson_says_how_to_see_parameters(capsys) -> None:
    out = _help(capsys, "predict", "--help")
    assert "name a scenario before --help" in out


def test_list_lesson_as_data_matches_the_declaration(capsys) -> None:
    assert main(["list", "zero", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    params = get_lesson("zero").params
    knobs = dict(params.knobs())
    groups = [name for _, group in params.knob_groups() for name, _ in group]
    assert [row["name"] for row in doc["params"]] == groups and set(groups) == set(knobs)
    stage = doc["params"][0]
    assert stage["choices"] == list(knobs["stage"].choices)
    assert main(["list", "nope"]) == 2


def test_version_exits_zero_and_names_torch(capsys) -> None:
    out = _help(capsys, "--version")
    assert out.startswith("playground ") and "torch 2." in out and "CUDA" in out


def test_help_imports_no_torch() -> None:
    code = (
        "import sys\nfrom playground.cli import main\n"
        "try:\n    main(['predict', 'pipeline', '--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported by --help'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.skipif(not (BIN / "playground").exists(), reason="playground is not installed")
def test_bash_completes_lessons_parameters_and_choices() -> None:
    script = """
source <(playground completion bash)
fn=$(complete -p playground | sed -E 's/.*-F ([^ ]+).*/\\1/')
try() {
  COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$COMP_LINE"
  [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMPREPLY=()
  $fn playground "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"
  echo "${COMPREPLY[*]}"
}
try "playground run pi"
try "playground predict pipeline -p sch"
try "playground predict pipeline -p schedule="
"""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    lesson, param, choices = [line.split() for line in done.stdout.splitlines()]
    assert lesson == ["pipeline"]
    assert param == ["schedule="]
    assert choices == ["gpipe", "1f1b", "interleaved", "zb-h1"]


def test_one_parser_per_command_and_language(capsys, monkeypatch) -> None:
    """A process that runs many commands parses each with the parser built for its
    command and the learner's language (in-process, as these tests call `main`); a
    change of language gets that language's parser; a TAB's completion, which rewrites
    the parser it answers with, always gets a new one."""
    from playground.cli_parser import build_parser
    from playground.i18n import t

    monkeypatch.setenv("PLAYGROUND_LANG", "en")
    english = build_parser("predict")
    assert build_parser("predict") is english and build_parser("run") is not english
    monkeypatch.setenv("PLAYGROUND_LANG", "es")
    spanish = build_parser("predict")
    assert spanish is not english
    assert (english.description, spanish.description) == (
        t("cli.description", "en"), t("cli.description", "es"))  # fmt: skip
    opening = " ".join(t("cli.description", "es").split()[:3])  # help wraps the rest
    assert opening in _help(capsys, "--help")  # `main` parses with the Spanish one
    monkeypatch.setenv("_ARGCOMPLETE", "1")
    assert build_parser("predict") is not build_parser("predict")
