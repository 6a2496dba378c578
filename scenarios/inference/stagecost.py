"""One stage's seconds for one iteration, as one call: the step model's sums with every
part that does not depend on the iteration's Work computed once.

scenarios.inference.stepmodel says what an iteration costs (part_seconds,
slice_seconds, tp_comm_seconds); a plan asks it tens of thousands of times (every
iteration of every configuration the search serves), each time with another Work.
StageCost holds, for one kind of stage (its layer count, whether it embeds, whether
it carries the head, the TP degree), the constants of those sums, and evaluates them
in the same order with the same operations, so its seconds are those of stepmodel's
functions to the last bit (tests/test_stage_cost.py checks it).

`StageCost.decode` serves the scheduler's runs of alike decode iterations
(scenarios.inference.serve): the same sequences each writing one more position, so
only the attention's query·key pairs and KV read grow (by one per sequence and
iteration); everything else of the sum is computed once for the run, and each
iteration's seconds are still those of `__call__` to the last bit.

Pure: stdlib only.
"""

from __future__ import annotations

from scenarios.inference.stepmodel import EMBED_SEQ_OPS_CPU, OPS, Device, Shape, Work


class StageCost:
    """Seconds of one stage for a Work: compute (slice_seconds) plus TP's collectives
    (tp_comm_seconds), as Clock.stage adds them."""

    __slots__ = ("_c", "_link")

    def __init__(
        self, shape: Shape, device: Device, layers: int, *, embed: bool, head: bool, tp: int
    ) -> None:
        wb = shape.dtype_bytes
        attn_weights = shape.attn_params / tp
        mlp_weights = shape.mlp_params / tp
        head_weights = shape.hidden * shape.vocab / tp
        self._c = (
            shape, device, layers, embed, head, tp, wb,
            2 * attn_weights, 4 * (shape.q_dim / tp), attn_weights * wb,
            2 * shape.kv_heads_per_rank(tp) * shape.head_dim * wb,
            2 * mlp_weights, mlp_weights * wb,
            2 * head_weights, head_weights * wb,
        )  # fmt: skip
        alpha, beta = device.link(tp)
        self._link = (tp - 1, alpha, beta, beta + device.gamma)

    def __call__(self, work: Work) -> float:
        (shape, device, layers, embed, head, tp, wb, attn_2w, attn_4q, attn_wb, kv_width,
         mlp_2w, mlp_wb, head_2w, head_wb) = self._c  # fmt: skip
        flops_per_s, bytes_per_s, launch_s = device.flops_per_s, device.bytes_per_s, device.launch_s
        tokens = work.tokens
        # part_seconds("attn") + part_seconds("mlp"), per layer
        attn = (
            max(
                (attn_2w * tokens + attn_4q * work.attn) / flops_per_s,
                (attn_wb + kv_width * (work.kv + tokens)) / bytes_per_s,
            )
            + (OPS["attn"] + device.seq_ops * work.seqs) * launch_s
        )
        mlp = max((mlp_2w * tokens) / flops_per_s, mlp_wb / bytes_per_s) + OPS["mlp"] * launch_s
        total = layers * (attn + mlp)
        if embed:
            ops = OPS["embed"] + (EMBED_SEQ_OPS_CPU * work.seqs if device.seq_ops else 0)
            total += max(0.0 / flops_per_s, (tokens * shape.hidden * wb) / bytes_per_s) + (
                ops * launch_s
            )
        if head:
            total += max((head_2w * work.outs) / flops_per_s, head_wb / bytes_per_s) + (
                OPS["head"] * launch_s
            )
        if tp <= 1:  # tp_comm_seconds adds 0.0: no collective on one rank
            return total
        # tp_comm_seconds: 2 ring all-reduces of T·h a layer, the head's all-gather
        # (runtime.sim.formulas' ring times, on the TP group's link)
        n1, alpha, beta, bg = self._link
        edge = n1 * alpha
        nbytes = tokens * shape.hidden * shape.dtype_bytes
        all_reduce = (edge + nbytes * n1 / tp * bg) + (edge + nbytes * n1 / tp * beta)
        per_layer = 2 * all_reduce
        if not head:
            return total + (layers * per_layer + 0.0)
        nbytes = work.outs * shape.vocab * shape.dtype_bytes
        return total + (layers * per_layer + (edge + nbytes * n1 / tp * beta))

    def decode(self, work: Work, step: int) -> DecodeRun:
        """The seconds along a run of decode iterations whose first is `work` and whose
        query·key pairs and KV read grow by `step` an iteration."""
        return DecodeRun(self, work, step)


class DecodeRun:
    """One stage's seconds along a run of decode iterations: called with j, the j-th
    iteration's, the sums of StageCost.__call__ in its order (the same float), with
    what does not grow computed once; `walk` chains them from a start."""

    __slots__ = ("_c",)

    def __init__(self, cost: StageCost, work: Work, step: int) -> None:
        (shape, device, layers, embed, head, tp, wb, attn_2w, attn_4q, attn_wb, kv_width,
         mlp_2w, mlp_wb, head_2w, head_wb) = cost._c  # fmt: skip
        flops_per_s, bytes_per_s, launch_s = device.flops_per_s, device.bytes_per_s, device.launch_s
        tokens = work.tokens
        attn_ops = (OPS["attn"] + device.seq_ops * work.seqs) * launch_s
        mlp = max((mlp_2w * tokens) / flops_per_s, mlp_wb / bytes_per_s) + OPS["mlp"] * launch_s
        edge = []  # what __call__ adds after layers * (attn + mlp), in its order
        if embed:
            ops = OPS["embed"] + (EMBED_SEQ_OPS_CPU * work.seqs if device.seq_ops else 0)
            edge.append(
                max(0.0 / flops_per_s, (tokens * shape.hidden * wb) / bytes_per_s)
                + (ops * launch_s)
            )
        if head:
            edge.append(
                max((head_2w * work.outs) / flops_per_s, head_wb / bytes_per_s)
                + (OPS["head"] * launch_s)
            )
        comm = None
        if tp > 1:
            n1, alpha, beta, bg = cost._link
            link_edge = n1 * alpha
            nbytes = tokens * shape.hidden * shape.dtype_bytes
            per_layer = 2 * (
                (link_edge + nbytes * n1 / tp * bg) + (link_edge + nbytes * n1 / tp * beta)
            )
            if head:
                nbytes = work.outs * shape.vocab * shape.dtype_bytes
                comm = layers * per_layer + (link_edge + nbytes * n1 / tp * beta)
            else:
                comm = layers * per_layer + 0.0
        first, second = (edge + [None, None])[:2]
        self._c = (
            step, work.attn, work.kv, tokens, attn_2w * tokens, attn_4q, attn_wb, kv_width,
            flops_per_s, bytes_per_s, attn_ops, mlp, layers, first, second, comm,
        )  # fmt: skip

    def __call__(self, j: int) -> float:
        (step, attn0, kv0, tokens, flops_fixed, attn_4q, attn_wb, kv_width, flops_per_s,
         bytes_per_s, attn_ops, mlp, layers, first, second, comm) = self._c  # fmt: skip
        grown = j * step
        attn = (
            max(
                (flops_fixed + attn_4q * (attn0 + grown)) / flops_per_s,
                (attn_wb + kv_width * ((kv0 + grown) + tokens)) / bytes_per_s,
            )
            + attn_ops
        )
        total = layers * (attn + mlp)
        if first is not None:
            total += first
            if second is not None:
                total += second
        return total if comm is None else total + comm

    def walk(self, t: float, count: int, until: float) -> list[float]:
        """From `t`, each iteration starting when the one before ends, at most `count`
        of them and none starting at `until` or later: their (start, end), flattened
        (the same floats as adding each iteration's seconds in turn)."""
        (step, attn0, kv0, tokens, flops_fixed, attn_4q, attn_wb, kv_width, flops_per_s,
         bytes_per_s, attn_ops, mlp, layers, first, second, comm) = self._c  # fmt: skip
        bounds: list[float] = []
        j = 0
        while j < count and t < until:
            grown = j * step
            compute = (flops_fixed + attn_4q * (attn0 + grown)) / flops_per_s
            memory = (attn_wb + kv_width * ((kv0 + grown) + tokens)) / bytes_per_s
            total = layers * (((memory if memory > compute else compute) + attn_ops) + mlp)
            if first is not None:
                total += first
                if second is not None:
                    total += second
            end = t + (total if comm is None else total + comm)
            bounds += (t, end)
            t = end
            j += 1
        return bounds
