"""`playground budget`: the sentence, the guard's refusals and kill, the append-only ledger,
the price table's age, and bad input (exit 2, one line)."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import date
from pathlib import Path

import pytest
from cli_server import run_cli

from scenarios.why_distribute import ledger
from scenarios.why_distribute.budget import Estimate, EstimateError, Verdict, sentence
from scenarios.why_distribute.prices import MAX_AGE_DAYS, price_table

RTX = ["--gpu", "rtx4090", "--count", "2", "--hours", "3"]


def budget(tmp_path: Path, *args: str, clock: str = "1") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PLAYGROUND_LEDGER": str(tmp_path / "ledger.jsonl"),
        "PLAYGROUND_BUDGET_CLOCK": clock,
        "PLAYGROUND_LANG": "en",
    }
    return run_cli(["budget", *args], env=env, timeout=60)  # its own process (cli_server)


def test_the_courses_sentence():
    out = budget(Path("/nonexistent-dir"), "estimate", *RTX, "--spot", "--price", "0.35")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        "This starts 2× RTX 4090 spot at ~$0.35/h each = $0.70/h, runs ~3 h including setup"
        " = $2.10. Budget: $5.00. Accepted, $2.90 to spare."
    )
    verdict = Verdict(Estimate("RTX 4090", 2, 0.35, True, 3.0), 3.0)
    assert sentence(verdict, "en").endswith("= $2.10. Budget: $3.00. Accepted, $0.90 to spare.")
    assert sentence(verdict, "es").endswith("Presupuesto: $3.00. Aceptado, sobran $0.90.")


def test_setup_and_margin_are_billed():
    est = Estimate("RTX 4090", 2, 0.35, True, 3.0, setup_hours=0.25, margin=1.2)
    assert est.cost == pytest.approx(0.70 * 3.25 * 1.2)
    assert "$2.27 × margin 1.2 = $2.73" in sentence(Verdict(est, 3.0), "en")


def test_guard_refuses_over_budget_with_exit_3_and_records_it(tmp_path):
    out = budget(tmp_path, "guard", "--budget", "1", *RTX, "--price", "0.35", "--", "sleep", "60")
    assert out.returncode == 3
    assert out.stdout.strip().endswith("Budget: $1.00. Refused: $1.10 over.")
    assert len(out.stdout.strip().splitlines()) == 1
    book = ledger.read(tmp_path / "ledger.jsonl")
    assert [(e.status, e.what, e.actual_usd) for e in book.entries] == [
        ("refused", "sleep 60", 0.0)
    ]


def test_guard_kills_at_the_budget_and_the_ledger_has_both_entries(tmp_path):
    budget(tmp_path, "guard", "--budget", "1", *RTX, "--price", "0.35", "--", "sleep", "60")
    # $0.01 an hour, ten billed hours per real second: the $0.02 budget is reached in ~0.2 s
    args = ["--gpu", "rtx4090", "--count", "1", "--hours", "0.001", "--price", "0.01"]
    out = budget(tmp_path, "guard", "--budget", "0.02", *args, "--", "sleep", "60", clock="36000")
    assert out.returncode == 3, out.stderr
    assert "Killed: its spend reached $0.02" in out.stdout
    book = ledger.read(tmp_path / "ledger.jsonl")
    assert [e.status for e in book.entries] == ["refused", "reserved", "killed"] and not book.bad
    assert book.entries[-1].settles == book.entries[1].id and not book.open_reservations
    assert book.spent == pytest.approx(0.02)
    shown = budget(tmp_path, "ledger")
    assert "Spent: $0.02 of a $5.00 ceiling; $4.98 left. Lines not counted: 0." in shown.stdout


def test_the_ceiling_counts_what_the_ledger_says_was_spent(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger.append("earlier run", 4.0, 4.5, "finished", path)
    out = budget(tmp_path, "guard", "--budget", "3", *RTX, "--price", "0.35", "--", "true")
    assert out.returncode == 3  # $2.10 fits $3 but not the $0.50 left of the $5 ceiling
    assert "$0.50 is left" in out.stdout and "Refused: $1.60 over." in out.stdout
    ok = budget(tmp_path, "guard", "--budget", "0.5", "--gpu", "rtx4090", "--count", "1",
                "--hours", "0.01", "--price", "0.35", "--", "true")  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    statuses = [e.status for e in ledger.read(path).entries]
    assert statuses == ["finished", "refused", "reserved", "finished"]


def test_a_hand_edited_or_corrupted_line_is_reported_and_not_counted(tmp_path):
    path = tmp_path / "ledger.jsonl"
    for cost in (1.0, 2.0, 0.5):
        ledger.append("run", cost, cost, "finished", path)
    before = path.read_bytes()
    lines = path.read_text().splitlines()
    edited = json.loads(lines[1])
    edited["actual_usd"] = 0.0  # someone hides $2 of spend
    lines[1] = json.dumps(edited)
    path.write_text("\n".join([*lines, "{not json"]) + "\n")
    book = ledger.read(path)
    assert [b.number for b in book.bad] == [2, 4]
    assert "mac does not match" in book.bad[0].why and book.bad[1].why == "not JSON"
    assert book.spent == 1.5  # the edited line is not silently counted as $0
    out = budget(tmp_path, "ledger")
    assert "ledger line 2: not counted (its mac does not match" in out.stderr
    assert out.returncode == 1  # tampering: `budget ledger` says so in its status
    assert "Lines not counted: 2." in out.stdout
    # appending only ever adds at the end
    path.write_bytes(before)
    ledger.append("next", 0.1, 0.1, "finished", path)
    assert path.read_bytes().startswith(before) and not ledger.read(path).bad


def test_a_removed_line_breaks_the_chain():
    import tempfile

    path = Path(tempfile.mkdtemp()) / "ledger.jsonl"
    for cost in (1.0, 2.0, 0.5):
        ledger.append("run", cost, cost, "finished", path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[2]]) + "\n")
    book = ledger.read(path)
    # line 2's chain link is broken (still counted: its content is authentic); the seal
    # says 3 lines were written and 2 remain
    assert [(b.number, b.key) for b in book.bad] == [(2, "chain"), (3, "truncated")]
    assert book.spent == 1.5


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpu", "rtx4090", "--count", "2", "--hours", "-3", "--price", "0.35"], "--hours"),
        (["--gpu", "rtx5090", "--count", "2", "--hours", "3", "--price", "0.35"], "--gpu"),
        (["--gpu", "rtx4090", "--count", "2", "--hours", "3", "--price", "0"], "--price"),
        (["--gpu", "rtx4090", "--count", "2", "--hours", "3", "--price", "-1"], "--price"),
        (["--gpu", "rtx4090", "--count", "0", "--hours", "3", "--price", "1"], "--count"),
        (
            ["--gpu", "rtx4090", "--count", "2", "--hours", "3", "--price", "1", "--margin", "0.9"],
            "--margin",
        ),  # fmt: skip
        (["--gpu", "rtx4090", "--count", "2", "--hours", "soon", "--price", "1"], "--hours"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    out = budget(tmp_path, "estimate", *args)
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and needle in out.stderr


def test_a_stale_price_table_warns_an_estimate_and_is_refused_by_the_guard(tmp_path):
    table = price_table()
    assert table.source and table.price("rtx4090", True) > 0
    assert not table.stale(table.as_of) and table.stale(
        date.fromordinal(table.as_of.toordinal() + MAX_AGE_DAYS + 1)
    )
    out = budget(tmp_path, "estimate", *RTX, "--spot")
    assert out.returncode == 0 and "$0.22/h each" in out.stdout, out.stderr
    age = f"dated {table.as_of.isoformat()}, {table.age_days(date.today())} days old"
    assert (age in out.stdout) == table.stale(date.today())
    assert "--price" in out.stdout or not table.stale(date.today())
    fresh = budget(tmp_path, "estimate", *RTX, "--price", "0.3")
    assert fresh.returncode == 0 and "days old" not in fresh.stdout
    if table.stale(date.today()):  # spending: a fresh quote, or said out loud
        out = budget(tmp_path, "guard", *RTX, "--budget", "3", "--", "true")
        assert out.returncode == 2 and "stale" in out.stderr and "--allow-stale" in out.stderr
        assert not (tmp_path / "ledger.jsonl").exists()
        out = budget(tmp_path, "guard", *RTX, "--budget", "3", "--allow-stale", "--", "true")
        assert out.returncode == 0 and age in out.stdout, out.stderr


def test_a_budget_above_the_ceiling_is_an_error_naming_both(tmp_path):
    out = budget(tmp_path, "estimate", *RTX, "--budget", "300")
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert "$300.00" in out.stderr and "ceiling of $5.00" in out.stderr
    out = budget(tmp_path, "estimate", *RTX, "--budget", "300", "--ceiling", "400")
    assert out.returncode == 0 and "Budget: $300.00" in out.stdout


def test_the_guard_checks_the_command_exists_before_accepting(tmp_path):
    for missing in ("./train.sh", "no-such-command-41"):
        out = budget(tmp_path, "guard", *RTX, "--price", "0.3", "--budget", "3", "--", missing)
        assert out.returncode == 2 and out.stdout == "", out.stdout
        assert out.stderr.count("\n") == 1 and missing in out.stderr
    (tmp_path / "data.txt").write_text("not a program")
    out = budget(tmp_path, "guard", *RTX, "--price", "0.3", "--budget", "3", "--",
                 str(tmp_path / "data.txt"))  # fmt: skip
    assert out.returncode == 2 and "Accepted" not in out.stdout
    assert not (tmp_path / "ledger.jsonl").exists()  # nothing reserved, nothing recorded


def test_estimate_errors_name_the_field():
    with pytest.raises(EstimateError) as err:
        Estimate("RTX 4090", 2, float("nan"), False, 3.0)
    assert err.value.field == "price"


@pytest.mark.parametrize("gpus", [1, 4])
def test_hours_from_the_planner(tmp_path, gpus):
    # The planner uses the whole cluster it is given (`gpus`): the estimate rents those.
    plan = f"params=400k,gpu=rtx4090,gpus={gpus}"
    out = budget(tmp_path, "estimate", "--from-plan", plan, "--price", "0.35")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"This starts {gpus}× RTX 4090 on-demand at ~$0.35/h")


def test_a_plan_parameter_given_twice_is_refused(tmp_path):
    out = budget(tmp_path, "estimate", "--from-plan", "gpus=8,gpus=4", "--price", "0.35")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "gpus is given more than once" in out.stderr
