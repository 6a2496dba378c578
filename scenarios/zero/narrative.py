"""Lesson 2's narrative, in Spanish and English: one step per stage, then beyond this machine.

Each step is shown while the time cursor is in one of its phases (the
Actions' `phase` is their stage) and quotes a Metric of scenarios.zero.lesson
by name, of the stage under the cursor.

Imports: the lesson contract only.
"""

from __future__ import annotations

from scenarios.base import NarrativeStep

ACCOUNTING_ES = (
    "Entrenar con Adam en precisión mixta guarda, por cada uno de los Ψ parámetros, 2 bytes "
    "del parámetro en fp16, 2 del gradiente en fp16 y K = 12 de estados del optimizador (copia "
    "fp32 del parámetro, momento y varianza): 16Ψ bytes. Un modelo de 7B necesita 112 GB antes "
    "de la primera activación: no cabe en una GPU de 80 GB. En fp32 (la ejecución real de esta "
    "lección en CPU) son 4 + 4 + 8 = 16 bytes por parámetro, sin copia maestra. DDP replica los "
    "16Ψ en cada rango y suma los gradientes con un all-reduce por unidad (sus buckets): en "
    "anillo, cada rango envía 2(n−1)/n·Ψ·4 bytes por paso en fp32. ZeRO reparte los 16Ψ."
)
ACCOUNTING_EN = (
    "Training with Adam in mixed precision keeps, for each of the Ψ parameters, 2 bytes of the "
    "fp16 parameter, 2 of the fp16 gradient and K = 12 of optimizer states (an fp32 copy of the "
    "parameter, momentum and variance): 16Ψ bytes. A 7B model needs 112 GB before its first "
    "activation: it does not fit an 80 GB GPU. In fp32 (this lesson's real CPU run) it is "
    "4 + 4 + 8 = 16 bytes per parameter, without a master copy. DDP replicates all 16Ψ on every "
    "rank and sums the gradients with one all-reduce per unit (its buckets): on a ring each rank "
    "sends 2(n−1)/n·Ψ·4 bytes per step in fp32. ZeRO partitions the 16Ψ."
)


NARRATIVE = (
    NarrativeStep(
        "accounting",
        {"es": "La cuenta: 2 + 2 + K", "en": "The accounting: 2 + 2 + K"},
        {"es": ACCOUNTING_ES, "en": ACCOUNTING_EN},
        formula="DDP: (2 + 2 + K)Ψ per device, K = 12",
        metric="per_device_total_bytes",
        phases=("ddp",),
    ),
    NarrativeStep(
        "zero1",
        {"es": "ZeRO-1: repartir el optimizador", "en": "ZeRO-1: shard the optimizer"},
        {
            "es": "Cada rango actualiza solo su trozo 1/N_d de los parámetros, así que solo necesita "
            "los estados de Adam de ese trozo: KΨ/N_d. Los gradientes se reducen con un "
            "reduce-scatter (cada rango recibe la suma de su trozo) y, tras el paso, un all-gather "
            "devuelve a todos los parámetros nuevos. Reduce-scatter + all-gather es exactamente un "
            "all-reduce: la misma comunicación que DDP, 2(n−1)/n·Ψ·4 bytes por rango en fp32.",
            "en": "Each rank updates only its 1/N_d chunk of the parameters, so it only needs "
            "Adam's states for that chunk: KΨ/N_d. Gradients are reduced with a reduce-scatter "
            "(each rank gets the sum of its chunk) and after the step an all-gather gives every "
            "rank the new parameters. Reduce-scatter + all-gather is exactly an all-reduce: the "
            "same communication as DDP, 2(n−1)/n·Ψ·4 bytes per rank in fp32.",
        },
        formula="2Ψ + 2Ψ + KΨ/N_d ;  sent = 2(n−1)/n·Ψ·4 B",
        metric="peak_bytes",
        phases=("zero1",),
    ),
    NarrativeStep(
        "zero2",
        {"es": "ZeRO-2: repartir los gradientes", "en": "ZeRO-2: shard the gradients"},
        {
            "es": "Si cada rango solo actualiza su trozo, solo necesita el gradiente de su trozo. "
            "En cuanto el backward produce los gradientes de una unidad, un reduce-scatter los "
            "reparte y el búfer completo se libera: queda (2 + K)Ψ/N_d más un búfer de una unidad "
            "(la barra 'buffers'). La comunicación no cambia: 2(n−1)/n·Ψ·4 bytes.",
            "en": "If each rank only updates its chunk, it only needs its chunk's gradient. As "
            "soon as backward has produced a unit's gradients a reduce-scatter distributes them "
            "and the whole buffer is freed: (2 + K)Ψ/N_d remains, plus a one-unit bucket (the "
            "'buffers' bar). Communication does not change: 2(n−1)/n·Ψ·4 bytes.",
        },
        formula="2Ψ + (2 + K)Ψ/N_d ;  sent = 2(n−1)/n·Ψ·4 B",
        metric="peak_bytes",
        phases=("zero2",),
    ),
    NarrativeStep(
        "zero3",
        {
            "es": "ZeRO-3: repartir los parámetros, 1,5× de comunicación",
            "en": "ZeRO-3: shard the parameters, 1.5× the communication",
        },
        {
            "es": "Cada rango guarda solo 1/N_d de los parámetros. Antes del forward de una unidad "
            "un all-gather la reconstruye y después se libera; el backward la necesita otra vez, así "
            "que se vuelve a reunir. Son dos all-gather de Ψ y un reduce-scatter de Ψ: 3Ψ elementos "
            "en vez de 2Ψ, 3(n−1)/n·Ψ·4 bytes por rango en fp32, 1,5× los de DDP. A cambio la memoria "
            "de estados es (2 + 2 + K)Ψ/N_d, más una o dos unidades completas en vuelo.",
            "en": "Each rank keeps only 1/N_d of the parameters. Before a unit's forward an "
            "all-gather rebuilds it and afterwards it is freed; backward needs it again, so it is "
            "gathered again. That is two all-gathers of Ψ and one reduce-scatter of Ψ: 3Ψ elements "
            "instead of 2Ψ, 3(n−1)/n·Ψ·4 bytes per rank in fp32, 1.5× DDP's. In exchange the states "
            "take (2 + 2 + K)Ψ/N_d, plus one or two whole units in flight.",
        },
        formula="(2 + 2 + K)Ψ/N_d ;  sent = 3(n−1)/n·Ψ·4 B",
        metric="comm_bytes_per_rank",
        phases=("zero3",),
    ),
    NarrativeStep(
        "fsdp",
        {"es": "FSDP es ZeRO-3", "en": "FSDP is ZeRO-3"},
        {
            "es": "FSDP de PyTorch con reshard_after_forward=True es ZeRO-3: mismos tres colectivos, "
            "misma memoria. FSDP2 (fully_shard) reparte cada parámetro por la dimensión 0 con "
            "torch.chunk (10 filas en 4 rangos → 3,3,3,1), no un búfer plano, así que el redondeo "
            "por rango difiere del de ZeRO a mano. Aquí corre de verdad con gloo en CPU (torch 2.13) "
            "sobre las mismas unidades; sus colectivos son los de torch, contados por un all-gather "
            "y un reduce-scatter propios que llaman a los de torch (como los bytes que enviaría un "
            "anillo con los búferes que FSDP2 les pasa; gloo elige su propio algoritmo por dentro). Con reshard_after_forward=False "
            "no vuelve a reunir en el backward: es ZeRO-2 con parámetros repartidos entre pasos.",
            "en": "PyTorch's FSDP with reshard_after_forward=True is ZeRO-3: the same three "
            "collectives, the same memory. FSDP2 (fully_shard) shards each parameter on dim 0 "
            "with torch.chunk (10 rows on 4 ranks → 3,3,3,1), not one flat buffer, so its per-rank "
            "rounding differs from hand-made ZeRO's. Here it really runs on gloo on CPU (torch "
            "2.13) over the same units; its collectives are torch's, counted by a custom all-gather "
            "and reduce-scatter that call torch's own (as the bytes a ring sends for the buffers "
            "FSDP2 passes them; gloo picks its own algorithm inside). With reshard_after_forward=False it does "
            "not gather again in backward: ZeRO-2 with parameters sharded between steps.",
        },
        formula="FSDP(reshard_after_forward) = ZeRO-3",
        metric="param_diff_vs_ddp",
        phases=("fsdp2",),
    ),
    NarrativeStep(
        "beyond",
        {"es": "Más allá de esta máquina", "en": "Beyond this machine"},
        {
            "es": "Las mismas fórmulas valen para cualquier Ψ y N_d: `playground predict zero -p "
            "params=7B -p dp=64 -p precision=mixed -p gpu_memory=80GB` dice cuántos bytes necesita "
            "cada GPU en cada etapa y cuáles caben. 7B en DDP: 112 GB; con ZeRO-3 en 64 GPUs: 1,75 GB "
            "de estados. Las activaciones no se reparten con ZeRO: dependen del lote y la secuencia.",
            "en": "The same formulas hold for any Ψ and N_d: `playground predict zero -p params=7B "
            "-p dp=64 -p precision=mixed -p gpu_memory=80GB` tells the bytes each GPU needs in each "
            "stage and which fit. 7B under DDP: 112 GB; under ZeRO-3 on 64 GPUs: 1.75 GB of states. "
            "Activations are not sharded by ZeRO: they depend on the batch and the sequence.",
        },
        formula="fits ⇔ states + activations ≤ GPU memory",
        metric="fits_gpu_memory",
        phases=("beyond",),
    ),
)
