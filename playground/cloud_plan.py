"""`playground cloud plan`: a lab folder to run a lesson on rented GPUs with SkyPilot.

Issue 41, item 1. `cloud plan LESSON [-p K=V]… --gpu NAME --count N [--per-node K]
[--spot] [--hours H] [--setup 0.25h] [--budget USD] [--price P] [--out DIR]` checks the
lesson's parameters (as `run` would, with the ranks set to N), prices the experiment
with the budget's estimate (playground.budget: the repository's dated price table,
its age said when it is old, or --price) and, if it fits the budget, writes DIR:

- task.yaml: a SkyPilot task (nodes, accelerators, spot, `autostop` with
  `down: true` as the cloud's own backstop, a setup that installs torch and this
  project pinned, a run that starts `python -m scenarios.torchrun LESSON …` under
  torchrun with its multi-node flags taken from SkyPilot's SKYPILOT_NODE_IPS,
  SKYPILOT_NUM_NODES, SKYPILOT_NODE_RANK and SKYPILOT_NUM_GPUS_PER_NODE);
- estimate.txt: the cost sentence in Spanish and in English;
- README.md: the steps (launch under the guard, results, replay), in both languages;
- plan.json: what `cloud launch` needs (playground.cloud_launch), with the digest of
  task.yaml so that a YAML edited after the plan is refused rather than launched
  under an estimate that no longer describes it.

Over budget: the sentence, exit 3 and nothing written. When the optional `[cloud]`
extra (SkyPilot) is installed, task.yaml is checked by SkyPilot's own schema
(`sky.Task.from_yaml_config`, offline) before anything is written; SkyPilot is
never needed to plan, and its price catalogue (which needs the network) is not used.

Front-end part (playground): no torch.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
from dataclasses import dataclass
from datetime import date
from importlib import metadata
from pathlib import Path

import msgspec

from playground import budget, budget_estimate
from playground.formatting import plain
from playground.i18n import t
from playground.usage import UsageError
from runtime.engine.files import make_private_dir, read_bounded, write_text_atomic
from scenarios.why_distribute.budget import CEILING_USD, Estimate, Verdict, sentence
from scenarios.why_distribute.gpus import GPUS
from scenarios.why_distribute.prices import price_table

FORMAT = 1
PLAN_FILE, TASK_FILE = "plan.json", "task.yaml"
MAX_PLAN_BYTES = 64 * 1024  # plan.json is a few hundred bytes
REMOTE_OUT = "~/playground-run"  # where rank 0 writes the run on the head node
PORT = 29500  # torchrun's rendezvous port on the head node
AUTOSTOP_MINUTES = 5  # idle minutes before the cloud itself tears the cluster down
# The guard's time limit: the planned hours (setup included) and a quarter more.
TIME_SLACK = 1.25
# SkyPilot's accelerator names for the GPUs the course prices.
ACCELERATORS = {"rtx4090": "RTX4090", "a100-80gb": "A100-80GB", "h100-80gb": "H100",
                "h200-141gb": "H200"}  # fmt: skip
PACKAGE = "distributed-ai-playground"
TORCH_PIN = "torch==2.13.0"  # the project's own pin (pyproject.toml)


class Plan(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """plan.json: what the launch guards, read back as untrusted input."""

    format: int
    lesson: str
    params: list[str]
    gpu: str
    count: int
    per_node: int
    spot: bool
    hours: float
    setup_hours: float
    price: float
    price_given: bool  # --price at plan time (else the table's, dated price_date)
    price_date: str
    margin: float
    budget: float
    ceiling: float
    estimate_usd: float
    cluster: str
    time_limit_h: float
    task_sha256: str
    planned: str  # the day of the plan (ISO)


@dataclass(frozen=True)
class Written:
    folder: Path
    plan: Plan
    checked_by: str | None  # "SkyPilot 0.x" when its schema accepted the task


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="the lesson to run (see `playground list`)")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a lesson parameter, as for `run` (repeatable)")  # fmt: skip
    p.add_argument("--gpu", required=True, help=f"one of {', '.join(GPUS)}")
    p.add_argument("--count", type=int, required=True, help="GPUs rented (= ranks)")
    p.add_argument("--per-node", type=int, default=1, help="GPUs a node (default 1)")
    p.add_argument("--spot", action="store_true", help="spot (interruptible) GPUs")
    p.add_argument("--hours", default="1", help="hours the lab runs (default 1)")
    p.add_argument("--setup", default="0.25h", help="billed setup time (default 0.25h)")
    p.add_argument("--price", type=float, default=None, help="your own $ per GPU-hour")
    p.add_argument("--margin", type=float, default=1.0, help="safety margin (1 or more)")
    p.add_argument("--budget", type=float, default=None, help="this lab's $")
    p.add_argument("--ceiling", type=float, default=CEILING_USD, help="the unit's total $")
    p.add_argument("--out", default=None, help="the lab folder (default lab-LESSON-GPUxN)")
    p.add_argument("--lang", choices=("es", "en"), default=None)


def plan(args: argparse.Namespace, language: str) -> int:
    """`cloud plan`: the sentence, then the folder (or exit 3 and nothing written)."""
    args.from_plan, args.allow_stale = None, True  # a plan spends nothing: a warning only
    budget_estimate.check_numbers(args)
    if not 1 <= args.per_node <= 16 or args.count % args.per_node:
        raise UsageError.said("cloud.per_node", "per_node", per_node=args.per_node,
                              count=args.count)  # fmt: skip
    lesson_params = _lesson_params(args)
    estimate = budget_estimate.estimate(args, spending=False)
    verdict = _verdict(args, estimate)
    print(
        budget_estimate.with_note(
            sentence(verdict, language), budget_estimate.stale_note(args, language)
        )
    )
    if not verdict.accepted:
        return budget.REFUSED
    folder = Path(args.out or f"lab-{args.scenario}-{args.gpu}x{args.count}")
    _check_folder(folder)
    written = write(folder, args, lesson_params, estimate, verdict)
    checked = (t("cloud.schema_ok", language, version=written.checked_by)
               if written.checked_by else t("cloud.schema_skipped", language))  # fmt: skip
    print(t("cloud.planned", language, folder=plain(str(folder)), checked=checked))
    return 0


def _verdict(args: argparse.Namespace, estimate: Estimate) -> Verdict:
    """Against this lab's budget, or the whole ceiling (the launch checks the ledger)."""
    return Verdict(estimate, args.budget if args.budget is not None else args.ceiling)


def _lesson_params(args: argparse.Namespace) -> list[str]:
    """The -p pairs, checked by the lesson as `run` checks them with its ranks = --count
    (a pair given twice, an unknown one, a value out of range: exit 2, one line)."""
    from playground.cli_params import raw_params
    from playground.session import resolve

    args.ranks = None
    raw = raw_params(args)
    lesson, _ = resolve(args.scenario, {}, "run")  # an unknown lesson first
    field = lesson.params.ranks_field
    raw.setdefault(field, str(args.count))
    resolve(args.scenario, raw, "run")
    if raw[field] != str(args.count):
        raise UsageError.said("cloud.ranks_count", field, name=field, value=plain(raw[field]),
                              count=args.count)  # fmt: skip
    return [f"{k}={v}" for k, v in raw.items() if k != field]


def _check_folder(folder: Path) -> None:
    """A new folder, or an empty one: a plan never writes over anything."""
    if os.path.lexists(folder) and (not folder.is_dir() or folder.is_symlink() or
                                    any(folder.iterdir())):  # fmt: skip
        raise UsageError.said("cloud.out_exists", "out", path=plain(str(folder)))


def write(folder: Path, args: argparse.Namespace, params: list[str], estimate: Estimate,
          verdict: Verdict) -> Written:  # fmt: skip
    """The four files, task.yaml checked by SkyPilot first when it is installed."""
    table = price_table()
    cluster = f"pg-{re.sub('[^a-z0-9-]', '-', args.scenario.lower())[:24]}-{secrets.token_hex(3)}"
    yaml_text = task_yaml(args.scenario, params, args.gpu, args.count, args.per_node,
                          args.spot, cluster)  # fmt: skip
    checked_by = validate(yaml_text)
    plan_ = Plan(
        format=FORMAT, lesson=args.scenario, params=params, gpu=args.gpu, count=args.count,
        per_node=args.per_node, spot=args.spot, hours=estimate.hours,
        setup_hours=estimate.setup_hours, price=estimate.price,
        price_given=args.price is not None, price_date=table.as_of.isoformat(),
        margin=estimate.margin, budget=verdict.budget, ceiling=args.ceiling,
        estimate_usd=round(estimate.cost, 6), cluster=cluster,
        time_limit_h=estimate.total_hours * TIME_SLACK,
        task_sha256=hashlib.sha256(yaml_text.encode()).hexdigest(),
        planned=date.today().isoformat(),
    )  # fmt: skip
    make_private_dir(folder, tighten=False)
    sentences = {lang: sentence(verdict, lang) for lang in ("en", "es")}
    estimate_text = "".join(
        f"{budget_estimate.with_note(sentences[lang], budget_estimate.stale_note(args, lang))}\n"
        for lang in ("es", "en")
    )
    write_text_atomic(folder / TASK_FILE, yaml_text)
    write_text_atomic(folder / "estimate.txt", estimate_text)
    write_text_atomic(folder / "README.md", readme(folder, plan_, sentences))
    write_text_atomic(folder / PLAN_FILE, msgspec.json.encode(plan_).decode() + "\n")
    return Written(folder, plan_, checked_by)


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's)."""
    return json.dumps(text)


def task_yaml(lesson: str, params: list[str], gpu: str, count: int, per_node: int,
              spot: bool, cluster: str) -> str:  # fmt: skip
    """SkyPilot's task: `count / per_node` nodes of `per_node` GPUs, torchrun across them."""
    nodes = count // per_node
    source = project_source()
    install = (
        "python -m pip install ." if source else f"python -m pip install {PACKAGE}=={_version()}"
    )
    entry = shlex.join(["-m", "scenarios.torchrun", lesson,
                        *[a for p in params for a in ("-p", p)]])  # fmt: skip
    run = "\n".join((
        "set -e",
        'MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)',
        'python -m torch.distributed.run --nnodes="$SKYPILOT_NUM_NODES" \\',
        '  --node-rank="$SKYPILOT_NODE_RANK" --nproc-per-node="$SKYPILOT_NUM_GPUS_PER_NODE" \\',
        f'  --master-addr="$MASTER_ADDR" --master-port={PORT} \\',
        f"  {entry} --backend nccl --out {REMOTE_OUT}",
    ))  # fmt: skip
    setup = "\n".join(("set -e", f"python -m pip install {shlex.quote(TORCH_PIN)}", install))
    lines = [
        "# Written by `playground cloud plan`: launch it with `playground cloud launch`",
        "# (the budget guard), not with `sky launch` alone.",
        f"name: {_q(cluster)}",
        f"num_nodes: {nodes}",
        "resources:",
        f"  accelerators: {_q(f'{ACCELERATORS[gpu]}:{per_node}')}",
        f"  use_spot: {'true' if spot else 'false'}",
        "  autostop:",
        f"    idle_minutes: {AUTOSTOP_MINUTES}",
        "    down: true",
    ]
    if source:
        lines.append(f"workdir: {_q(str(source))}")
    lines += ["setup: |", *_indent(setup), "run: |", *_indent(run)]
    return "\n".join(lines) + "\n"


def _indent(block: str) -> list[str]:
    return [f"  {line}" for line in block.splitlines()]


def project_source() -> Path | None:
    """This project's checkout (its pyproject.toml beside the packages), synced to the
    nodes as SkyPilot's workdir and installed from there: the very code planned with.
    None when installed from a wheel (then the same version is installed from PyPI)."""
    root = Path(__file__).resolve().parent.parent
    try:
        text = read_bounded(root / "pyproject.toml", 256 * 1024).decode("utf-8", "replace")
    except OSError:
        return None
    return root if f'name = "{PACKAGE}"' in text else None


def _version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "0.1.0"


def validate(yaml_text: str) -> str | None:
    """SkyPilot's own check of the task (offline): its version when it accepts it, None
    when SkyPilot is not installed; UsageError-free: a refusal is this module's bug,
    raised as CloudSchemaError with SkyPilot's message."""
    try:
        import sky  # the optional [cloud] extra
        import yaml
    except ImportError:
        return None
    config = yaml.safe_load(yaml_text)
    try:
        sky.Task.from_yaml_config(config)
    except Exception as exc:  # SkyPilot's own error types change between its versions
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CloudSchemaError(said) from None
    return f"SkyPilot {getattr(sky, '__version__', '?')}"


class CloudSchemaError(RuntimeError):
    """SkyPilot refused the task this module wrote."""


def readme(folder: Path, plan_: Plan, sentences: dict[str, str]) -> str:
    """The steps, in English and in Spanish."""
    values = dict(folder=shlex.quote(str(folder)), cluster=plan_.cluster, lesson=plan_.lesson,
                  limit=f"{plan_.time_limit_h:.3g}", autostop=AUTOSTOP_MINUTES)  # fmt: skip
    parts = []
    for lang in ("en", "es"):
        parts.append(t("cloud.readme", lang, sentence=sentences[lang], **values))
    return "\n\n---\n\n".join(parts) + "\n"


def read_plan(folder: Path) -> Plan:
    """plan.json of a lab folder, checked (bounded read, strict schema); UsageError."""
    path = folder / PLAN_FILE
    try:
        data = read_bounded(path, MAX_PLAN_BYTES)
        plan_ = msgspec.json.decode(data, type=Plan)
    except OSError as exc:
        raise UsageError.said("cloud.no_plan", "labdir", path=plain(str(path)),
                              reason=plain(exc.strerror or str(exc))) from None  # fmt: skip
    except msgspec.ValidationError as exc:
        raise UsageError.said("cloud.bad_plan", "labdir", path=plain(str(path)),
                              reason=plain(str(exc))[:200]) from None  # fmt: skip
    except msgspec.DecodeError:
        raise UsageError.said("cloud.bad_plan", "labdir", path=plain(str(path)),
                              reason="not JSON") from None  # fmt: skip
    if (
        plan_.format != FORMAT
        or plan_.gpu not in GPUS
        or not re.fullmatch(r"pg-[a-z0-9-]{1,40}", plan_.cluster)
    ):
        raise UsageError.said("cloud.bad_plan", "labdir", path=plain(str(path)),
                              reason="format, gpu or cluster name")  # fmt: skip
    return plan_


def check_task(folder: Path, plan_: Plan) -> Path:
    """task.yaml as planned (its digest): an edited task is not what was estimated."""
    path = folder / TASK_FILE
    try:
        data = read_bounded(path, MAX_PLAN_BYTES)
    except OSError as exc:
        raise UsageError.said("cloud.no_plan", "labdir", path=plain(str(path)),
                              reason=plain(exc.strerror or str(exc))) from None  # fmt: skip
    if hashlib.sha256(data).hexdigest() != plan_.task_sha256:
        raise UsageError.said("cloud.task_edited", "labdir", path=plain(str(path)))
    return path


def sky_command() -> str:
    """The `sky` on PATH (SkyPilot's command), or exit 2 saying how to get it."""
    found = shutil.which("sky")
    if found is None:
        raise UsageError.said("cloud.no_sky", "sky")
    return found
