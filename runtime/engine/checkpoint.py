"""Checkpoints that can be trusted: written whole or not at all, checked before loaded.

In docs/design.md's picture this is part of the runtime's engine layer ("checkpoints"),
kept free of torch so that the restart supervisor (runtime.engine.supervise, in the
UI process) can choose which checkpoint to resume from, and the tests can
check the format, without loading torch. Ranks hand tensors over as numpy
arrays (`tensor.numpy()`, a view, bit for bit) and get numpy arrays back.

Layout of one checkpoint, `<root>/step-000010/`:

    model.safetensors            parameters by name (rank 0)
    optimizer.safetensors        Adam moments, DDP (rank 0); or, with ZeRO-1,
    optimizer.rank<R>.safetensors  each rank's shard, offsets in meta.json
    rank<R>.json                 each rank's RNG states (python, numpy, torch) as plain data
    meta.json                    step, epoch, batches consumed, world size, LR schedule,
                                 loss scaler, model config: everything else, as JSON
    manifest.json                SHA-256 and size of every file above; written last

Why this shape:
- safetensors for tensors and JSON for the rest: nothing is ever unpickled, so a
  checkpoint from elsewhere cannot run code (torch.load unpickles by default).
- Every file is written into `.tmp-step-000010/` (a temporary file, fsync, rename),
  then rank 0, after every rank has written its part, writes the manifest and
  renames the directory into place (os.rename of a directory is atomic on POSIX).
  A writer killed half-way leaves a `.tmp-*` directory that is never loaded.
- A checkpoint is loaded only if its manifest lists exactly the files present
  and every hash and size matches: a truncated file, a flipped byte or a missing
  manifest make it invalid, and the restart falls back to the previous one,
  saying why (`newest_valid` returns the reasons; the supervisor marks them).

Pure part plus numpy and safetensors (never torch).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from runtime.engine.files import (
    PRIVATE_DIR,
    PRIVATE_FILE,
    check_regular,
    read_bounded,
    read_text_bounded,
)

FORMAT = "playground-checkpoint/1"
MANIFEST = "manifest.json"
META = "meta.json"
_NAME = re.compile(r"^step-(\d{6,})$")
# meta.json, manifest.json and a rank's RNG states are a few KiB: a bound, not a size.
JSON_MAX_BYTES = 64 * 2**20


def step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step-{step:06d}"


def tmp_dir(root: Path, step: int) -> Path:
    return Path(root) / f".tmp-step-{step:06d}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, on_half_written: Callable[[], None] | None = None) -> None:
    """Write `data` to a temporary sibling, fsync, rename: `path` is whole or absent.

    `on_half_written` runs when half the bytes are on disk: the hook through which
    the `kill:...,during=checkpoint` fault kills the writer mid-write, for real.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial")
    with contextlib.suppress(FileNotFoundError):  # a killed writer's leftover
        os.unlink(tmp)
    # O_EXCL|O_NOFOLLOW, 0600: a file of the run's private folder, never through a link.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as f:
        half = len(data) // 2
        f.write(data[:half])
        if on_half_written is not None:
            f.flush()
            os.fsync(f.fileno())
            on_half_written()
        f.write(data[half:])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_tensors(
    directory: Path,
    name: str,
    tensors: dict[str, np.ndarray],
    on_half_written: Callable[[], None] | None = None,
) -> None:
    data = save_safetensors({k: np.ascontiguousarray(v) for k, v in tensors.items()})
    write_file(Path(directory) / name, data, on_half_written)


def write_json(directory: Path, name: str, obj: Any) -> None:
    write_file(Path(directory) / name, json.dumps(obj, indent=1, sort_keys=True).encode())


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    check_regular(path, follow=False)  # a link or a FIFO planted in a checkpoint: refused
    with open(path, "rb", opener=_no_follow) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


def make_tmp_dir(root: Path, step: int) -> Path:
    """The private (0700) temporary folder every rank writes its part of `step` into."""
    tmp = tmp_dir(root, step)
    tmp.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    return tmp


def commit(root: Path, step: int) -> Path:
    """Rank 0, once every rank has written its files: manifest, then the atomic rename."""
    tmp = tmp_dir(root, step)
    files = sorted(p.name for p in tmp.iterdir() if p.is_file() and not p.name.startswith("."))
    manifest = {
        "format": FORMAT,
        "step": step,
        "files": {
            name: {"sha256": sha256_of(tmp / name), "bytes": (tmp / name).stat().st_size}
            for name in files
        },
    }
    write_json(tmp, MANIFEST, manifest)
    # Private whatever the umask of the ranks that made it (a fork server started
    # before the run may hand them the user's).
    os.chmod(tmp, PRIVATE_DIR)
    _fsync_dir(tmp)
    final = step_dir(root, step)
    os.rename(tmp, final)  # atomic: readers see no directory or the whole one
    _fsync_dir(Path(root))
    return final


# -- reading ---------------------------------------------------------------------
def validate(path: Path) -> str | None:
    """None if the checkpoint at `path` can be loaded; else the reason it cannot."""
    path = Path(path)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return "no manifest (the write never finished)"
    try:
        manifest = json.loads(read_text_bounded(manifest_path, JSON_MAX_BYTES, follow=False))
        listed: dict[str, dict[str, Any]] = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return "manifest unreadable"
    if manifest.get("format") != FORMAT:
        return f"unknown format {manifest.get('format')!r}"
    present = {p.name for p in path.iterdir() if p.is_file()} - {MANIFEST}
    missing = sorted(set(listed) - present)
    if missing:
        return f"{missing[0]} missing"
    extra = sorted(present - set(listed))
    if extra:
        return f"{extra[0]} not in the manifest"
    for name, entry in sorted(listed.items()):
        try:
            size = check_regular(path / name, follow=False).st_size
            if size != entry.get("bytes"):
                return f"{name} is {size} bytes, the manifest says {entry.get('bytes')} (truncated)"
            if sha256_of(path / name) != entry.get("sha256"):
                return f"{name} fails its SHA-256 (corrupted)"
        except OSError as exc:  # a link or a FIFO in its place, or gone meanwhile
            return f"{name} unreadable ({exc.strerror or exc})"
    if META not in listed:
        return f"{META} missing"
    return None


def committed(root: Path) -> list[tuple[int, Path]]:
    """(step, path) of every renamed-into-place checkpoint, newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        match = _NAME.match(entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found, reverse=True)


def incomplete(root: Path) -> list[Path]:
    """Temporary directories of checkpoints whose writers never finished."""
    root = Path(root)
    return sorted(p for p in root.glob(".tmp-step-*")) if root.is_dir() else []


def newest_valid(root: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest checkpoint that validates, and (path, reason) of the newer ones skipped."""
    skipped: list[tuple[Path, str]] = []
    for _step, path in committed(root):
        reason = validate(path)
        if reason is None:
            return path, skipped
        skipped.append((path, reason))
    return None, skipped


def read_meta(path: Path) -> dict[str, Any]:
    return read_json(path, META)


def read_json(path: Path, name: str) -> Any:
    return json.loads(read_text_bounded(Path(path) / name, JSON_MAX_BYTES, follow=False))


def read_tensors(path: Path, name: str) -> dict[str, np.ndarray]:
    """Tensors of one file, checked against the manifest first (no pickle anywhere)."""
    path = Path(path)
    entry = read_json(path, MANIFEST)["files"].get(name)
    if entry is None or not isinstance(entry.get("bytes"), int):
        raise ValueError(f"{path / name} is not in its manifest; refusing to load it")
    data = read_bounded(path / name, entry["bytes"], follow=False)
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ValueError(f"{path / name} does not match its manifest; refusing to load it")
    return load_safetensors(data)


# -- faults and housekeeping -----------------------------------------------------------
def corrupt(path: Path, seed: int = 0) -> str:
    """Flip a few bytes in the middle of the largest file: what a bad disk or a torn
    copy does. Returns the name of the file it damaged."""
    path = Path(path)
    victim = max(
        (p for p in path.iterdir() if p.is_file() and p.name != MANIFEST),
        key=lambda p: p.stat().st_size,
    )
    data = bytearray(victim.read_bytes())
    rng = random.Random(seed)
    for _ in range(8):
        i = len(data) // 2 + rng.randrange(max(1, len(data) // 4))
        data[i % len(data)] ^= 0xFF
    victim.write_bytes(bytes(data))
    return victim.name


def set_aside(path: Path, why: str) -> Path:
    """Rename an invalid checkpoint out of the way (kept for inspection, never loaded)."""
    path = Path(path)
    target = path.with_name(f"{path.name}.{why}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{why}{n}")
    os.rename(path, target)
    return target


def remove_incomplete(root: Path) -> list[Path]:
    removed = incomplete(root)
    for path in removed:
        with contextlib.suppress(OSError):
            shutil.rmtree(path)
    return removed


# -- RNG states as plain data -----------------------------------------------------------
def python_rng_state(state: tuple) -> dict[str, Any]:
    """random.getstate() as JSON: (version, tuple of 625 ints, gauss_next)."""
    version, internal, gauss = state
    return {"version": version, "internal": list(internal), "gauss_next": gauss}


def python_rng_restore(data: dict[str, Any]) -> tuple:
    return (data["version"], tuple(data["internal"]), data["gauss_next"])


def numpy_rng_state(state: tuple) -> dict[str, Any]:
    """np.random.get_state() (legacy MT19937) as JSON."""
    name, keys, pos, has_gauss, cached = state
    return {
        "name": name,
        "keys": [int(k) for k in keys],
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached),
    }


def numpy_rng_restore(data: dict[str, Any]) -> tuple:
    return (
        data["name"],
        np.array(data["keys"], dtype=np.uint32),
        data["pos"],
        data["has_gauss"],
        data["cached_gaussian"],
    )
