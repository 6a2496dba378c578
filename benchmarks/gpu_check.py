"""The GPU path, checked once on a machine with a CUDA GPU, and its measured profile.

    python benchmarks/gpu_check.py [--out gpu-profile.json]

What a CPU machine cannot check (the course's machines have no GPU):
1. CUDA compute: the MiniGPT's forward and backward on the GPU equal the CPU's
   (loss and every gradient, float32, within 1e-4 relative), and the GPU's compute
   rates (runtime.sim.compute: block forward/backward fitted to overhead + FLOPs/rate,
   Adam per element) are measured the way `playground calibrate` measures a CPU's,
   with CUDA synchronised around each timing.
2. NCCL: one GPU cannot hold two NCCL ranks, so NCCL runs at world size 1, the
   failure-resume lesson (ranks=1 is a valid world there) through the real CLI:
   `playground run failure-resume --ranks 1 --backend nccl`, which exercises
   init_process_group("nccl"), the collectives and CUDA tensors on the rank, and
   must end bitwise equal to its uninterrupted twin.
3. The same lesson on gloo, for the table.

It prints a table and writes the measured profile (a CostModel in JSON, usable as
a starting point for a profile in runtime/sim/profiles.py) to --out. Exit status 0
when every check passes, 1 otherwise; 2 without a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.fit.compute_fit import fit_block  # noqa: E402
from runtime.sim.compute import ComputeRates, block_flops  # noqa: E402

SHAPES = ((64, 2048, 64), (128, 2048, 64), (256, 4096, 64), (512, 4096, 128), (1024, 8192, 128))


def timed(fn, cuda: bool, reps: int = 10) -> float:
    import torch

    fn()
    samples = []
    for _ in range(reps):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def numerics() -> float:
    """Largest relative difference of loss and gradients, GPU against CPU."""
    import torch

    from runtime.engine.models import GPTConfig, MiniGPT, batch

    cfg = GPTConfig(vocab=64, seq=64, hidden=64, heads=4, layers=4)
    inputs, targets = batch(cfg, 8)
    worst = 0.0
    grads = {}
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        model = MiniGPT(cfg).to(device)
        loss = model(inputs.to(device), targets.to(device))
        loss.backward()
        grads[device] = [loss.detach().cpu()] + [
            p.grad.detach().cpu() for p in model.parameters() if p.grad is not None
        ]
    for cpu, gpu in zip(grads["cpu"], grads["cuda"], strict=True):
        scale = cpu.abs().max().item() or 1.0
        worst = max(worst, (cpu - gpu).abs().max().item() / scale)
    return worst


def rates() -> ComputeRates:
    import torch

    from runtime.engine.models import Block, GPTConfig

    forward, backward = [], []
    for hidden, tokens, seq in SHAPES:
        block = Block(GPTConfig(vocab=64, seq=seq, hidden=hidden, heads=8, layers=1)).cuda()
        x = torch.randn(tokens // seq, seq, hidden, device="cuda", requires_grad=True)
        f = timed(lambda block=block, x=x: block(x), cuda=True)
        fb = timed(lambda block=block, x=x: block(x).sum().backward(), cuda=True)
        flops = block_flops(tokens, hidden, seq)
        forward.append((flops, tokens * hidden, f))
        backward.append((2 * flops, tokens * hidden, max(fb - f, 1e-9)))
    param = torch.nn.Parameter(torch.randn(2**24, device="cuda"))
    param.grad = torch.randn_like(param)
    adam = timed(torch.optim.Adam([param]).step, cuda=True) / param.numel()
    (fo, fr, fe), (bo, br, be) = fit_block(forward), fit_block(backward)
    props = torch.cuda.get_device_properties(0)
    return ComputeRates(
        forward_flops_per_s=fr,
        backward_flops_per_s=br,
        forward_overhead_s=fo,
        backward_overhead_s=bo,
        forward_s_per_element=fe,
        backward_s_per_element=be,
        adam_s_per_element=adam,
        memory_bytes=float(props.total_memory),
        source=f"measured by benchmarks/gpu_check.py on {props.name} on {time.strftime('%Y-%m-%d')}",
    )


def lesson(backend: str) -> tuple[int, float, str]:
    """failure-resume on one rank through the CLI: (exit status, seconds, bitwise equal?)."""
    command = [
        sys.executable,
        "-m",
        "playground.cli",
        "run",
        "failure-resume",
        "--ranks",
        "1",
        "-p",
        "microbatches=8",
        "-p",
        "steps=6",
        "-p",
        "checkpoint_every=3",
        "--backend",
        backend,
        "--hardware",
        "cpu-default",
        "--json",
    ]
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    equal = "?"
    if out.returncode == 0:
        metrics = json.loads(out.stdout)["metrics"]
        flag = next(m for m in metrics if m["name"] == "bitwise_equal_to_uninterrupted")
        equal = "yes" if flag.get("value") else "no"
    else:
        print(out.stderr.strip().splitlines()[-1:], file=sys.stderr)
    return out.returncode, seconds, equal


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-profile.json")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU visible to torch here", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(0)
    print(f"GPU: {name} · torch {torch.__version__} · CUDA {torch.version.cuda}")
    worst = numerics()
    measured = rates()
    rows = [("MiniGPT loss+grads, GPU vs CPU (max rel. diff)", f"{worst:.2e}", worst < 1e-4)]
    rows.append(
        (
            "block forward: overhead / rate",
            f"{measured.forward_overhead_s * 1e6:.1f} µs / "
            f"{measured.forward_flops_per_s / 1e12:.1f} TFLOP/s",
            True,
        )
    )
    rows.append(
        (
            "block backward: overhead / rate",
            f"{measured.backward_overhead_s * 1e6:.1f} µs / "
            f"{measured.backward_flops_per_s / 1e12:.1f} TFLOP/s",
            True,
        )
    )
    rows.append(("Adam per element", f"{measured.adam_s_per_element * 1e12:.1f} ps", True))
    for backend in ("nccl", "gloo"):
        status, seconds, equal = lesson(backend)
        rows.append(
            (
                f"failure-resume --ranks 1 --backend {backend}",
                f"exit {status}, {seconds:.1f} s, bitwise {equal}",
                status == 0 and equal == "yes",
            )
        )
    width = max(len(r[0]) for r in rows)
    for what, value, ok in rows:
        print(f"{what:<{width}}  {value:<40} {'ok' if ok else 'FAILED'}")
    profile = {
        "name": f"measured:{name}",
        "alpha": 5e-6,
        "beta": 1 / 300e9,
        "gamma": 3 / 2e12,
        "rates": measured.to_dict(),
        "source": measured.source + " (link figures: a placeholder, one GPU measures none)",
    }
    Path(args.out).write_text(json.dumps(profile, indent=1))
    print(f"wrote {os.path.abspath(args.out)}")
    return 0 if all(ok for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
