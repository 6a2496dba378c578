"""What a rank sets up before it runs a lesson's code: its backend, its device, the
lesson's entry function, and its result as plain data.

Part of the real engine: runtime.engine.worker and runtime.engine.torchrun_rank (the
two ways a rank starts) call these. Imports torch, only inside rank processes.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable
from typing import Any

import torch


def resolve_backend(requested: str) -> str:
    if requested == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if requested == "nccl" and not torch.cuda.is_available():
        raise RuntimeError(
            "backend nccl needs CUDA, and torch sees no GPU here; use --backend gloo"
        )
    return requested


def rank_device(backend: str) -> torch.device:
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def load_entry(entry: str) -> Callable[[Any], Any]:
    """The rank entry a lesson chose ("package.module:function")."""
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


def plain(result: Any) -> dict[str, Any]:
    """A lesson's result record (a dataclass) as JSON-able data; jobs may return dicts."""
    if result is None:
        return {}
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return dataclasses.asdict(result)
    return dict(result)
