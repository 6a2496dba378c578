"""The served MiniGPT's weights: trained once on its Markov chain, then cached on disk.

Part of lesson 7's rank side (torch; rank processes only). A freshly
initialised model's greedy answers are noise, and its logits so flat that two
candidates can tie to the last bits; a few hundred steps of AdamW on the data
every training lesson uses (runtime.engine.models.batch: a seeded Markov chain) give
it peaked, meaningful next-token choices. Rank 0 trains at first use and saves
the weights under the playground's cache directory (runtime.fit.calibration
.cache_dir), named by the model's shape and the recipe; every rank then loads
the same file, so every rank serves the very same weights. The file is
safetensors, as every checkpoint here (runtime.engine.checkpoint): a cache file is
read back, never unpickled, and a file that does not hold exactly this model's
tensors and shapes is refused by load_state_dict.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file

from runtime.engine.models import GPTConfig, MiniGPT, batch
from runtime.fit.calibration import cache_dir

STEPS = 200
BATCH = 16
LR = 3e-3
RECIPE = f"adamw-{STEPS}x{BATCH}-lr{LR:g}"


def weights_file(cfg: GPTConfig) -> Path:
    shape = f"l{cfg.layers}-h{cfg.hidden}-a{cfg.heads}-s{cfg.seq}-v{cfg.vocab}-seed{cfg.seed}"
    return cache_dir() / "inference" / f"minigpt-{shape}-{RECIPE}.safetensors"


def train(cfg: GPTConfig) -> MiniGPT:
    """STEPS steps of AdamW on minibatches of the seeded Markov chain's sequences."""
    model = MiniGPT(cfg)
    inputs, targets = batch(cfg, STEPS * BATCH // 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    generator = torch.Generator().manual_seed(0)
    for _ in range(STEPS):
        rows = torch.randint(0, inputs.shape[0], (BATCH,), generator=generator)
        loss = model(inputs[rows], targets[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model


def trained(cfg: GPTConfig, rank: int) -> MiniGPT:
    """The trained model on every rank: rank 0 trains it if the cache lacks it."""
    path = weights_file(cfg)
    if rank == 0 and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        # contiguous copies: safetensors stores whole tensors, not views of shared ones
        state = {k: v.detach().contiguous().clone() for k, v in train(cfg).state_dict().items()}
        save_file(state, str(partial))
        os.replace(partial, path)  # whole or absent: a concurrent reader never sees half
    if dist.is_initialized():
        dist.barrier()
    model = MiniGPT(cfg)
    model.load_state_dict(load_file(str(path)))
    return model.eval()
