"""The failure-resume lesson's calibration probes: what writing a checkpoint costs here.

Rank side of scenarios.failure_resume.rates.PROBES (runtime.fit.calibration_probes):
the calibrate job's ranks call `disk` and `checkpoint_seconds` (rank, world_size) after
the generic timings; scenarios.failure_resume.rates.fit turns rank 0's samples into
ResumeRates (`checkpoint_s`, `disk_bytes_per_s`). Wall seconds (a checkpoint waits on the
disk, not a core) of checkpoints written by runtime.engine.checkpoint's own protocol, as
lesson 3 writes one, every rank at once: rank 0's model, optimizer and metadata
files and each rank's own, each written to a temporary file, fsync'ed and renamed;
a barrier; rank 0's commit (the manifest with each file's SHA-256, the directory's
fsync, its atomic rename, the parent's fsync); a barrier. One of next to no bytes
gives the fixed cost; one of CHECKPOINT_BYTES more, the bandwidth its bytes see. One large
fsync'ed write (rank 0 alone) is the bandwidth's fallback.

Engine part: imports torch, only inside rank processes.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

from runtime.engine import checkpoint as ckpt
from runtime.engine.rundirs import runs_root
from scenarios.failure_resume.rates import CHECKPOINT_BYTES, CHECKPOINT_REPS, DISK_BYTES

# The longest folder path rank 0 can hand the others (bytes).
_PATH_BYTES = 4096


def disk(rank: int, world_size: int) -> float | None:
    """Bytes per second of a checkpoint-like write: write, fsync, close, rename (rank 0
    alone; None on the others)."""
    if rank != 0:
        return None
    data = os.urandom(DISK_BYTES)
    with tempfile.TemporaryDirectory(dir=runs_root()) as folder:
        samples = []
        for n in range(3):
            path = os.path.join(folder, f"probe{n}")
            start = time.perf_counter()
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(path, path + ".done")
            samples.append(time.perf_counter() - start)
    return DISK_BYTES / statistics.median(samples)


def checkpoint_seconds(rank: int, world_size: int) -> list[float] | None:
    """Rank 0's median wall seconds of two checkpoints written by every rank at once as
    lesson 3 writes one: one of next to no bytes, and one whose model and optimizer files
    hold CHECKPOINT_BYTES (a third and two thirds: weights, then Adam's two moments,
    serialized as safetensors), each rank's RNG states as JSON, timed by turns (None on
    the other ranks). Their difference is the bandwidth a checkpoint's bytes see: small
    files fsync'ed one by one go several times slower than one large write."""
    folder = _shared_folder(rank)
    small = b"{}" + b" " * 510  # the metadata's JSON
    state = json.dumps({"rng": list(range(4500))}).encode()  # a rank's RNG states' JSON
    weights = np.ones(CHECKPOINT_BYTES // 12, dtype=np.float32)  # a third of the bytes
    tensors = {  # each file at next to no bytes, and at its part of CHECKPOINT_BYTES
        "model.safetensors": ({"w": weights[:1]}, {"w": weights}),
        "optimizer.safetensors": (
            {"m": weights[:1], "v": weights[:1]},
            {"m": weights, "v": weights},
        ),
    }
    samples: tuple[list[float], list[float]] = ([], [])
    try:
        for step in range(2 * CHECKPOINT_REPS + 2):
            large = step % 2  # by turns: a slow spell catches both alike
            dist.barrier()
            start = time.perf_counter()
            tmp = ckpt.make_tmp_dir(folder, step)
            if rank == 0:
                for name, pair in tensors.items():
                    ckpt.write_tensors(tmp, name, pair[large])
                ckpt.write_file(tmp / ckpt.META, small)
            ckpt.write_file(tmp / f"rank{rank}.json", state)
            dist.barrier()  # every rank's files are on disk
            if rank == 0:
                ckpt.commit(folder, step)
            dist.barrier()  # the checkpoint is in place
            if step >= 2:  # the first two create the folders: a warm-up
                samples[large].append(time.perf_counter() - start)
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(folder, ignore_errors=True)
    return [statistics.median(times) for times in samples] if rank == 0 else None


def _shared_folder(rank: int) -> str:
    """A private folder rank 0 makes under the runs root, its path sent to every rank
    as bytes (a tensor broadcast: nothing pickled)."""
    buffer = torch.zeros(_PATH_BYTES, dtype=torch.uint8)
    if rank == 0:
        path = tempfile.mkdtemp(dir=runs_root(), prefix="calibrate-checkpoint-").encode()
        if len(path) > _PATH_BYTES:
            raise ValueError(f"runs folder path longer than {_PATH_BYTES} bytes: {path!r}")
        buffer[: len(path)] = torch.frombuffer(bytearray(path), dtype=torch.uint8)
    dist.broadcast(buffer, src=0)
    return bytes(buffer[buffer != 0].tolist()).decode()
