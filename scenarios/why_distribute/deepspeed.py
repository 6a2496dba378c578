"""How DeepSpeed's pipeline engine runs one step: its TrainSchedule with blocking sends.

Part of lesson 0's cost model (scenarios.why_distribute.costs times a layout whose
`engine` is `deepspeed` with it, instead of Megatron's 1F1B closed form). MT-NLG
530B was trained this way (Smith et al. 2022: DeepSpeed's pipeline with Megatron's
tensor parallelism). What the engine does, from its source (microsoft/DeepSpeed,
deepspeed/runtime/pipe/schedule.py and engine.py, p2p.py):

- `TrainSchedule.steps()`: 2·(m + p − 1) steps; at each step a stage runs one
  forward or one backward, by the parity of the step and of its stage id, and the
  step's sends and receives first: a forward step sends the previous backward's
  gradient upstream and receives this forward's activation; a backward step receives
  its gradient from downstream and sends the previous forward's activation on;
- `p2p.send`/`p2p.recv` are blocking (`async_op=True` is refused by an assert): a
  send waits for its receive on the neighbour's stream, so each stage starts a step
  only when the neighbours it exchanges with have finished theirs;
- `pipe_partitioned` and `grad_partitioned` (on by default with tensor parallelism):
  the activation and its gradient are sent as 1/t slices and all-gathered over the
  TP group after each receive;
- `ReduceTiedGrads` at the end: the tied embedding's gradient all-reduced between
  the first and the last stage, before the data-parallel reduce.

`makespan` plays that schedule, each stage's instructions in order on one stream,
every send meeting its receive (both start when both sides reach it).

Imports: nothing of the project's (pure arithmetic over the stages' costs).
"""

from __future__ import annotations

from collections.abc import Sequence

# Instruction kinds. A send on stage s meets the receive of the same tensor on its
# neighbour: an activation goes s -> s + 1, a gradient s -> s - 1.
FORWARD, BACKWARD = "F", "B"
SEND_ACT, RECV_ACT, SEND_GRAD, RECV_GRAD = "send_act", "recv_act", "send_grad", "recv_grad"
_MEETS = {SEND_ACT: (RECV_ACT, 1), RECV_ACT: (SEND_ACT, -1),
          SEND_GRAD: (RECV_GRAD, -1), RECV_GRAD: (SEND_GRAD, 1)}  # fmt: skip


def _micro_batch(step: int, stage: int, stages: int) -> tuple[int, bool]:
    """TrainSchedule._step_to_micro_batch: (microbatch, is_forward) of `stage` at `step`."""
    even_step, even_stage = step % 2 == 0, stage % 2 == 0
    if even_step and even_stage:
        return step // 2 - stage // 2, True
    if not even_step and not even_stage:
        return (step - 1) // 2 - stage // 2, True
    if even_step:  # odd stage
        return step // 2 - stages + (stage + 1) // 2, False
    return (step - 1) // 2 - stages + 1 + stage // 2, False


def instructions(stage: int, stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """The instructions `stage` runs, in order (TrainSchedule.steps(), less the data
    loading and the step's closing reduce and optimizer step): (kind, microbatch)."""
    out: list[tuple[str, int]] = []
    prev = -1

    def valid(mb: int) -> bool:
        return 0 <= mb < micro_batches

    for step in range(2 * (micro_batches + stages - 1)):
        mb, forward = _micro_batch(step, stage, stages)
        if forward:
            if valid(prev) and stage > 0:
                out.append((SEND_GRAD, prev))
            if valid(mb) and stage > 0:
                out.append((RECV_ACT, mb))
        else:
            if valid(mb) and stage < stages - 1:
                out.append((RECV_GRAD, mb))
            if valid(prev) and stage < stages - 1:
                out.append((SEND_ACT, prev))
        if valid(mb):
            out.append((FORWARD if forward else BACKWARD, mb))
        prev = mb
    return out


def makespan(
    stages: Sequence[tuple[float, float]], micro_batches: int, transfer: Sequence[float]
) -> float:
    """Seconds from the first forward to the last backward: `stages` is each stage's
    (F, B) per microbatch, `transfer[s]` the seconds one tensor takes over the boundary
    between stage s and s + 1 (the send and the receiver's TP all-gather)."""
    p = len(stages)
    program = [instructions(s, p, micro_batches) for s in range(p)]
    at = [0] * p  # each stage's next instruction
    clock = [0.0] * p
    left = sum(len(ops) for ops in program)
    while left:
        moved = False
        for s in range(p):
            ops = program[s]
            while at[s] < len(ops):
                kind, mb = ops[at[s]]
                if kind in (FORWARD, BACKWARD):
                    clock[s] += stages[s][0 if kind == FORWARD else 1]
                    at[s] += 1
                    left -= 1
                    moved = True
                    continue
                meets, step = _MEETS[kind]
                q = s + step
                if at[q] >= len(program[q]) or program[q][at[q]] != (meets, mb):
                    break  # the neighbour has not reached this exchange yet
                end = max(clock[s], clock[q]) + transfer[min(s, q)]
                clock[s] = clock[q] = end
                at[s] += 1
                at[q] += 1
                left -= 2
                moved = True
        if not moved:
            raise RuntimeError("DeepSpeed schedule deadlocked")  # a bug in the replay
    return max(clock)
