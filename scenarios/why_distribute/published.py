"""Published training runs the planner is held to: each one's command, and the step its paper implies.

Lesson 0's check against the world (benchmarks/why_distribute.py --published writes
the table into docs/benchmarks.md; tests/test_planner_published.py holds the planner
to it). Each run is a `predict why-distribute` command with the run's shape,
GPUs, global batch and layout pinned, and the step time its paper implies: the
per-GPU TFLOP/s it reports turned back into seconds with that paper's own FLOPs
count, never another's:

- Megatron-family papers (Narayanan et al. 2021, MT-NLG, BLOOM, OPT) count Eq. 3 of
  Narayanan et al., F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per step: hardware
  FLOPs, with full recomputation (HFU);
- Llama 3 reports MFU, counted as PaLM does: 6·N + 12·l·h·s per token (N without
  the input embedding, attention not halved by the causal mask).

Nothing here is fit to these runs: the efficiency model's one constant
(efficiency.GEMM_PEAK) comes from Narayanan's Table 1, an H100's matmuls are scaled
from it by a published single-GPU measurement (gpus.MAMF_SOURCE), and every other
row is a prediction.

Llama 3's layout is the paper's (§3.3.2, Table 4): interleaved 1F1B with V chunks a
pipeline rank, bubble (PP − 1)/(V·M), the first and the last stage one Transformer
layer fewer, so that the first chunk holds only the embedding and the last only the
output layer. With one layer a chunk, 126 layers + 2 = 128 = 16 stages × 8 chunks:
V = 8 (footprint.chunk_layers). Table 4 agrees: the only change between its two 8K
rows is M, 32 then 16 microbatches a replica, and the MFU falls 43% → 41%; a bubble
of 15/(V·M) explains that drop alone when (1 + 15/(16V)) / (1 + 15/(32V)) = 43/41,
V ≈ 9. Its memory is the paper's too: FSDP "shards optimizer states and gradients, but
... we do not reshard [the model] after forward" (§3.3.2), ZeRO-2 (`zero2`; costs.dp_seconds
reduce-scatters each microbatch's gradients in FP32, as its "Numerical stability" says),
which is what brings the busiest rank (rank 1: 141 one-layer chunk-microbatches in its
interleaved warm-up, 2·(p − r − 1) + (v − 1)·p + 1, Megatron's count) under 80 GiB
without recomputation. Meta's freeing of each stage's input and output tensors takes
nothing off: the memory model never counts a stage's sent output (Megatron frees it
too, deallocate_pipeline_outputs = True in core_transformer_config_from_args, and
DeepSpeed clears it once partitioned), and a stage's input is the first layer's own
kept input in Korthikanti's count.

Imports: the lesson's model shapes only.
"""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.why_distribute.model import PRESETS

NARAYANAN = "Narayanan et al. 2021, Table 1"


def eq3_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021, Eq. 3: FLOPs per step with full recomputation."""
    h = hidden
    return 96 * batch * seq * layers * h * h * (1 + seq / (6 * h) + vocab / (16 * layers * h))


def palm_flops_per_token(params: float, layers: int, hidden: int, seq: int) -> float:
    """PaLM's (Chowdhery et al. 2022, Appendix B) model FLOPs per token: 6N + 12·l·h·s."""
    return 6 * params + 12 * layers * hidden * seq


@dataclass(frozen=True)
class Run:
    name: str
    source: str
    params: dict[str, str]  # the `predict why-distribute -p` params
    hardware: str
    published: str  # the figure as the paper gives it, and what it counts
    step_s: float  # the step that figure implies
    within: float  # the tolerance this run is held to
    miss: str = ""  # why the model cannot reach it, when it does not (the table says so)

    @property
    def command(self) -> str:
        pairs = " ".join(f"-p {k}={v}" for k, v in self.params.items())
        return f"playground predict why-distribute {pairs} --hardware {self.hardware}"


# Narayanan et al. 2021, Table 1: (heads, hidden, layers, t, p, GPUs, batch, TFLOP/s).
TABLE_1 = (
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142),
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    ("1008B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
)


def _narayanan() -> list[Run]:
    out = []
    for name, heads, hidden, layers, t, p, gpus, batch, tflops in TABLE_1:
        d = gpus // (t * p)
        params = dict(
            layers=str(layers), hidden=str(hidden), heads=str(heads), ffn="4h",
            vocab="51200", seq="2048", global_batch=str(batch), gpus=str(gpus),
            gpus_per_node="8", gpu="a100-80gb", layout=f"tp{t},pp{p},dp{d}", recompute="full",
        )  # fmt: skip
        step = eq3_flops(batch, 2048, layers, hidden, 51200) / (gpus * tflops * 1e12)
        out.append(Run(f"Megatron {name}", NARAYANAN, params, "a100-nvlink",
                       f"{tflops} TFLOP/s per GPU (Eq. 3, HFU)", step, 0.10))  # fmt: skip
    return out


def _others() -> list[Run]:
    llama = PRESETS["llama3-405b"].model
    llama_n = llama.shape_parameters - llama.vocab * llama.hidden  # less the input embedding
    llama_step = 16 * 2**20 * palm_flops_per_token(llama_n, 126, 16_384, 8192) / (8192 * 430e12)
    return [
        Run(
            "Llama 3 405B, 8K context, 8,192 H100",
            "Llama Team, Meta 2024, The Llama 3 Herd of Models, Table 4",
            dict(
                preset="llama3-405b",
                attention="flash",
                global_batch="2048",
                gpus="8192",
                gpu="h100-80gb",
                layout="tp8,pp16,dp64,v8,zero2",
                recompute="none",
            ),
            "h100-nvlink",
            "430 TFLOP/s per GPU, 43% MFU (6N + 12·l·h·s)",
            llama_step,
            0.15,
        ),
        Run(
            "Llama 3 405B, 8K context, 16,384 H100",
            "Llama Team, Meta 2024, The Llama 3 Herd of Models, Table 4",
            dict(
                preset="llama3-405b",
                attention="flash",
                global_batch="2048",
                gpus="16384",
                gpu="h100-80gb",
                layout="tp8,pp16,dp128,v8,zero2",
                recompute="none",
            ),
            "h100-nvlink",
            "400 TFLOP/s per GPU, 41% MFU (6N + 12·l·h·s)",
            llama_step * 8192 / 16384 * 430 / 400,
            0.15,
        ),
        Run(
            "BLOOM 176B, 384 A100",
            "BigScience 2022, BLOOM: A 176B-Parameter Open-Access Multilingual Language Model",
            dict(
                preset="bloom-176b",
                global_batch="2048",
                gpus="384",
                gpu="a100-80gb",
                layout="tp4,pp12,dp8,zero1,mbs2",
                recompute="full",
            ),
            "a100-nvlink",
            "156 TFLOP/s per GPU, its fastest configuration (Eq. 3, HFU)",
            eq3_flops(2048, 2048, 70, 14336, 250880) / (384 * 156e12),
            0.15,
        ),
        *_mt_nlg(),
        Run(
            "OPT-175B, 992 A100",
            "Zhang et al. 2022, OPT: Open Pre-trained Transformer Language Models",
            dict(
                preset="opt-175b",
                global_batch="992",
                gpus="992",
                gpu="a100-80gb",
                layout="tp8,dp124,zero3,mbs8",
                recompute="full",
            ),
            "a100-nvlink",
            "up to 147 TFLOP/s per GPU (Eq. 3, HFU: metaseq's own count)",
            eq3_flops(992, 2048, 96, 12288, 50272) / (992 * 147e12),
            0.15,
            "the count is settled by metaseq (projects/OPT/chronicles/final_update.md: "
            "'~4.30E+23 FLOPs … ~33 days … on 1024 80GB A100s', which is Eq. 3 over 300B "
            "tokens, recomputation included, and 147 TFLOP/s a GPU), and so is the layout "
            "(metaseq/launcher/opt_baselines.py, opt_job_constants.py: TP 8, FSDP with "
            "--no-reshard-after-forward, --checkpoint-activations, 8 sequences a GPU, "
            "--update-freq 1); its FSDP gathers and reduce-scatters are hidden under the "
            "compute here (without them the step is the same), so what the model misses is "
            "per-FLOP speed of the run's own kernels (Megatron 2.4's, through fairscale's "
            "FSDP), neither its count nor its communication",
        ),
    ]


# Smith et al. 2022, §2.4: batch 1920 on 280, 350 and 420 DGX A100 nodes (TP 8, PP 35,
# DP 8, 10, 12): (nodes, seconds per iteration, TFLOP/s per GPU).
MT_NLG = ((280, 60.1, 126), (350, 50.2, 121), (420, 44.4, 113))


def _mt_nlg() -> list[Run]:
    """MT-NLG 530B at its three cluster sizes: the paper gives the iteration time itself.
    DeepSpeed's pipeline engine (`deepspeed` in the layout: its TrainSchedule replayed,
    blocking sends of 1/t slices, the tied embedding's all-reduce) is in the step."""
    out = []
    for nodes, seconds, tflops in MT_NLG:
        gpus = 8 * nodes
        params = dict(preset="mt-nlg-530b", global_batch="1920", gpus=str(gpus),
                      gpu="a100-80gb", layout=f"tp8,pp35,dp{nodes // 35},deepspeed",
                      recompute="full")  # fmt: skip
        flops = eq3_flops(1920, 2048, 105, 20480, 51200) / (gpus * seconds * 1e12)
        counted = (
            f"counted alike (Eq. 3 over {gpus:,} GPUs × {seconds} s = {flops:.0f} TFLOP/s, HFU)"
        )
        miss = counted + (
            ", so the gap is the run's, not the count's; DeepSpeed's engine as its source "
            "runs it (TrainSchedule, blocking p2p of 1/t slices, pipe_partitioned) is "
            "modelled and adds under a second; across the three sizes the error moves by a "
            "few points only (the trend holds), so what is missing scales with the FLOPs: "
            "the same shape reached 163 TFLOP/s under Megatron (Table 1's 529.6B row)"
            if not out
            else "; the rest as the 2,240-GPU row"
        )
        out.append(Run(f"MT-NLG 530B, {gpus:,} A100", "Smith et al. 2022, Using DeepSpeed "
                       "and Megatron to Train Megatron-Turing NLG 530B, §2.4", params,
                       "a100-nvlink", f"{seconds} s per iteration on {nodes} DGX A100 "
                       f"({tflops} TFLOP/s per GPU)", seconds, 0.15, miss))  # fmt: skip
    return out


RUNS: list[Run] = _narayanan() + _others()
