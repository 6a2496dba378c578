"""The training mechanism of lesson 3: data-parallel MiniGPT whose bits do not depend
on the number of ranks, and its exact, resumable state.

One training step (the Actions of scenarios.failure_resume.program.build_for):

- data: an epoch is a permutation of a fixed MiniGPT Markov dataset drawn with
  numpy's global RNG; each step takes the next `batch` sequences; python's
  `random` picks how much token noise this step gets and torch's RNG where
  (every rank draws the mask of the whole batch and keeps its rows, so the RNG
  streams are the same on every rank, whatever their number);
- fwd+bwd: the batch is cut into `microbatches` fixed leaves; this rank owns a
  contiguous block of them, computes each leaf's gradient alone and sums them
  pairwise (its subtree of the fixed gradient tree);
- gather grads: all-gather of the subtree sums (plus the loss), then the same
  pairwise sum over ranks on every rank: the tree is the same for 4 or 2 ranks;
- adam: elementwise Adam written with single-rounding ops only, so a slice
  (ZeRO-1's shard) gives the same bits as the whole; with ZeRO-1 an all-gather
  of the updated shards follows.

`save` and `load` write and read everything that decides the future
(docs/references.md, "Fault tolerance"): parameters, Adam's moments and step, the LR
schedule's position, the RNG states (python, numpy, torch) and the data
position (epoch, batches consumed, the shuffled order), through
runtime.engine.checkpoint (safetensors and JSON, never pickle). A checkpoint loads on
any number of ranks: ZeRO-1's shards are re-cut.

Engine part: imports torch (rank processes only; the UI never imports this).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from runtime.engine import checkpoint as ckpt
from runtime.engine.models import GPTConfig, MiniGPT, markov_tokens
from runtime.sim.formulas import even_split
from scenarios.failure_resume.params import ResumeParams

BETA1, BETA2, EPS = 0.9, 0.95, 1e-8
BASE_LR = 3e-3
TOKEN_NOISE = 0.1  # at most this share of input tokens replaced per step
DATASET_BATCHES = 4  # the dataset holds this many global batches: an epoch every 4 steps


def lr_at(step: int, total: int) -> float:
    """Linear warm-up over the first tenth, then cosine decay to a tenth of the base."""
    warmup = max(1, total // 10)
    if step <= warmup:
        return BASE_LR * step / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return BASE_LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def tree_sum(parts: list[torch.Tensor]) -> torch.Tensor:
    """Pairwise sum of a power-of-two list: ((a+b)+(c+d))... the same tree for any split."""
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] for i in range(0, len(parts), 2)]
    return parts[0]


class Trainer:
    """All the state of one rank's training, and the step, split into its Actions."""

    def __init__(
        self,
        params: ResumeParams,
        world: int,
        rank: int,
        device: torch.device | None = None,
    ):
        self.params = params
        # Compute stays on the CPU (one thread: reproducible bits); only the collectives'
        # buffers go to the backend's device (NCCL needs CUDA tensors; the copy is exact).
        self.device = device or torch.device("cpu")
        self.world, self.rank = world, rank
        self.cfg = GPTConfig.from_shape(params.model, seed=params.seed)
        self.model = MiniGPT(self.cfg)
        self.named = list(self.model.named_parameters())
        self.tensors = [p for _, p in self.named]
        # One flat vector holds every parameter (the modules see views of it), so the
        # optimizer and ZeRO-1's shards are slices.
        self.flat = torch.cat([p.detach().reshape(-1) for p in self.tensors])
        offset = 0
        for p in self.tensors:
            p.data = self.flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        self.numel = offset
        self.zero1 = params.sharding == "zero1"
        sizes = even_split(self.numel, world) if self.zero1 else [self.numel] * world
        self.shard_sizes = sizes
        self.lo = sum(sizes[:rank]) if self.zero1 else 0
        self.hi = self.lo + sizes[rank]
        self.exp_avg = torch.zeros(self.hi - self.lo)
        self.exp_avg_sq = torch.zeros(self.hi - self.lo)
        self.step = 0
        self.grad = torch.zeros(self.numel)
        self.leaves = params.microbatches
        self.batch = params.batch
        self.dataset = markov_tokens(self.cfg, self.batch * DATASET_BATCHES, seed=params.seed + 1)
        self.epoch = 0
        self.cursor = 0  # batches consumed in this epoch
        self.order: list[int] = []
        self.losses: dict[int, float] = {}
        self._send: torch.Tensor | None = None

    # -- randomness and data --------------------------------------------------------
    def seed_everything(self) -> None:
        seed = self.params.seed
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The global batch of this step, with this step's token noise."""
        if self.cursor == 0:
            self.order = np.random.permutation(len(self.dataset)).tolist()
        rows = self.order[self.cursor * self.batch : (self.cursor + 1) * self.batch]
        self.cursor += 1
        if self.cursor == DATASET_BATCHES:
            self.epoch, self.cursor = self.epoch + 1, 0
        tokens = self.dataset[rows]
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        rate = random.uniform(0.0, TOKEN_NOISE)
        mask = torch.rand(inputs.shape) < rate
        return inputs.masked_fill(mask, 0), targets

    # -- the step, one method per Action ----------------------------------------------
    def forward_backward(self) -> None:
        inputs, targets = self.next_batch()
        per = self.batch // self.leaves
        own = self.leaves // self.world
        parts = []
        for leaf in range(self.rank * own, (self.rank + 1) * own):
            rows = slice(leaf * per, (leaf + 1) * per)
            loss = self.model(inputs[rows], targets[rows])
            grads = torch.autograd.grad(loss, self.tensors)
            parts.append(torch.cat([g.reshape(-1) for g in grads] + [loss.detach().reshape(1)]))
        self._send = tree_sum(parts)

    def gather_grads(self) -> None:
        assert self._send is not None
        send = self._send.to(self.device)
        gathered = [torch.empty_like(send) for _ in range(self.world)]
        dist.all_gather(gathered, send)
        total = tree_sum([part.cpu() for part in gathered])
        self.grad = total[:-1] / self.leaves
        self.losses[self.step + 1] = float(total[-1] / self.leaves)
        self._send = None

    def adam(self) -> None:
        """Adam on this rank's slice, one rounding per op (no fused multiply-add), so
        the bits do not depend on where the slice starts."""
        self.step += 1
        t = self.step
        lr = lr_at(t, self.params.steps)
        g = self.grad[self.lo : self.hi]
        self.exp_avg = self.exp_avg * BETA1 + g * (1 - BETA1)
        self.exp_avg_sq = self.exp_avg_sq * BETA2 + (g * g) * (1 - BETA2)
        denom = (self.exp_avg_sq / (1 - BETA2**t)).sqrt() + EPS
        update = (self.exp_avg / denom) * (lr / (1 - BETA1**t))
        self.flat[self.lo : self.hi] -= update

    def gather_params(self) -> None:
        size = max(self.shard_sizes)
        mine = torch.zeros(size)
        mine[: self.hi - self.lo] = self.flat[self.lo : self.hi]
        gathered = [torch.empty(size, device=self.device) for _ in range(self.world)]
        dist.all_gather(gathered, mine.to(self.device))
        start = 0
        for part, count in zip(gathered, self.shard_sizes, strict=True):
            self.flat[start : start + count] = part[:count].cpu()
            start += count

    def train_step(self) -> None:
        self.forward_backward()
        self.gather_grads()
        self.adam()
        if self.zero1:
            self.gather_params()

    # -- checkpoints --------------------------------------------------------------------
    def rng_state(self) -> dict[str, Any]:
        return {
            "python": ckpt.python_rng_state(random.getstate()),
            "numpy": ckpt.numpy_rng_state(np.random.get_state()),
            "torch": {"encoding": "hex", "bytes": bytes(torch.get_rng_state().tolist()).hex()},
        }

    def restore_rng(self, state: dict[str, Any]) -> None:
        random.setstate(ckpt.python_rng_restore(state["python"]))
        np.random.set_state(ckpt.numpy_rng_restore(state["numpy"]))
        raw = bytes.fromhex(state["torch"]["bytes"])
        torch.set_rng_state(torch.tensor(list(raw), dtype=torch.uint8))

    def meta(self) -> dict[str, Any]:
        return {
            "format": ckpt.FORMAT,
            "step": self.step,
            "epoch": self.epoch,
            "batches_consumed_in_epoch": self.cursor,
            "samples_consumed": self.step * self.batch,
            "epoch_order": self.order,
            "world_size": self.world,
            "sharding": "zero1" if self.zero1 else "ddp",
            "optimizer_shards": [
                [sum(self.shard_sizes[:r]), sum(self.shard_sizes[: r + 1])]
                for r in range(self.world)
            ]
            if self.zero1
            else None,
            "optimizer": {"kind": "adam", "betas": [BETA1, BETA2], "eps": EPS, "step": self.step},
            "lr_scheduler": {
                "kind": "warmup-cosine",
                "base_lr": BASE_LR,
                "total_steps": self.params.steps,
                "last_step": self.step,
                "last_lr": lr_at(max(1, self.step), self.params.steps),
            },
            "loss_scaler": None,  # fp32 training: nothing to scale
            "model": self.cfg.to_dict(),
            "seed": self.params.seed,
        }

    def save(self, root: Path, on_half_written: Callable[[], None] | None = None) -> None:
        """Every rank writes its part into the temporary directory; rank 0 commits."""
        tmp = ckpt.make_tmp_dir(root, self.step)  # private (0700) from the start
        optim = {"exp_avg": self.exp_avg.numpy(), "exp_avg_sq": self.exp_avg_sq.numpy()}
        if self.zero1:
            ckpt.write_tensors(
                tmp, f"optimizer.rank{self.rank}.safetensors", optim, on_half_written
            )
            on_half_written = None
        if self.rank == 0:
            model = {name: p.detach().numpy() for name, p in self.named}
            ckpt.write_tensors(tmp, "model.safetensors", model, on_half_written)
            on_half_written = None
            if not self.zero1:
                ckpt.write_tensors(tmp, "optimizer.safetensors", optim)
            ckpt.write_json(tmp, ckpt.META, self.meta())
        state = json.dumps(self.rng_state()).encode()
        ckpt.write_file(tmp / f"rank{self.rank}.json", state, on_half_written)
        dist.barrier()  # every rank's files are on disk
        if self.rank == 0:
            ckpt.commit(root, self.step)
        dist.barrier()  # nobody runs ahead of a checkpoint that is not in place yet

    def load(self, path: Path) -> None:
        """Resume from `path`, on any number of ranks (ZeRO-1 shards are re-cut)."""
        meta = ckpt.read_meta(path)
        if meta["model"] != self.cfg.to_dict():
            raise ValueError(f"{path} holds a different model: {meta['model']}")
        model = ckpt.read_tensors(path, "model.safetensors")
        with torch.no_grad():
            for name, p in self.named:
                p.copy_(torch.from_numpy(model[name].copy()))
        if meta["sharding"] == "zero1":
            shards = [
                ckpt.read_tensors(path, f"optimizer.rank{r}.safetensors")
                for r in range(meta["world_size"])
            ]
            full = {k: np.concatenate([s[k] for s in shards]) for k in ("exp_avg", "exp_avg_sq")}
        else:
            full = ckpt.read_tensors(path, "optimizer.safetensors")
        self.exp_avg = torch.from_numpy(full["exp_avg"][self.lo : self.hi].copy())
        self.exp_avg_sq = torch.from_numpy(full["exp_avg_sq"][self.lo : self.hi].copy())
        self.step = meta["step"]
        self.epoch = meta["epoch"]
        self.cursor = meta["batches_consumed_in_epoch"]
        self.order = list(meta["epoch_order"])
        # Every rank's RNG streams are identical here, so a new rank count reads rank 0's
        # when its own file does not exist.
        own = path / f"rank{self.rank}.json"
        self.restore_rng(json.loads((own if own.exists() else path / "rank0.json").read_text()))
