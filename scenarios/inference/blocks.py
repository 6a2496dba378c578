"""The paged KV cache's bookkeeping: fixed-size blocks, block tables, prefix sharing.

Part of lesson 7's mechanism, pure so that the scheduler plans with it and the
tests check it without torch; the ranks then write their real K and V tensors
into the physical blocks it hands out (scenarios.inference.decode).

PagedAttention (vLLM, Kwon et al. 2023): the KV cache is a pool of blocks of
`block_size` token slots; each sequence has a block table (logical block i ->
physical block), so its cache need not be contiguous and grows one block at a
time. The only waste is the unfilled tail of each sequence's last block (under
4% in the paper), where a contiguous allocation of the maximum length per
request (FasterTransformer, Orca) wasted 60-80%.

Automatic prefix caching (vLLM): a full block of prompt tokens is named by a
hash of every token up to its end (the chain makes a block's name depend on
its whole prefix). A new request whose leading full blocks are already known
shares them (a reference count) and skips computing them. When the last
sequence using a named block finishes, the block is kept, evictable, in LRU
order: a later request with the same prefix still finds it; a block is only
reused for other data when no free block is left. At least the last prompt
token is always computed, since its logits give the first output token.

Admission is conservative: a request is admitted only when the blocks of its
whole context (prompt and outputs) are there, counting the blocks running
sequences will still need (`reserved`), so no running sequence ever waits for
a block (no preemption).

Pure: stdlib only.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache


def blocks_for(positions: int, block_size: int) -> int:
    return -(-positions // block_size)


@lru_cache(maxsize=4096)  # asked again at each admission attempt and by the router
def block_hashes(prompt: tuple[int, ...], block_size: int) -> tuple[int, ...]:
    """The name of each full block of `prompt`: a hash of every token up to its end."""
    out, h = [], 0
    for i in range(len(prompt) // block_size):
        h = hash((h, prompt[i * block_size : (i + 1) * block_size]))
        out.append(h)
    return tuple(out)


@dataclass
class Table:
    """One sequence's block table and how far it is filled."""

    blocks: list[int] = field(default_factory=list)
    filled: int = 0  # positions written
    need: int = 0  # blocks it will hold at its longest
    names: tuple[int, ...] = ()  # its prompt's full blocks' names
    frozen: tuple[int, ...] | None = None  # `blocks` as a tuple, while it has not grown


class BlockManager:
    """The blocks of one KV pool (one engine: a replica, or all ranks of a TP or PP
    group alike, since they hold the same sequences)."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        # The free blocks in the order they are taken: those never used yet (block
        # `fresh` on, in order), then those given back, oldest first. A pool is as
        # large as the memory holds (thousands of replicas of them in a prediction):
        # only blocks in use ever get an entry.
        self.fresh = 0
        self.returned: deque[int] = deque()
        self.ref: list[int] = []  # per block taken so far
        self.fill: list[int] = []  # token slots written in each block taken so far
        self.name: dict[int, int] = {}  # block -> its hash, for full prompt blocks
        self.by_name: dict[int, int] = {}  # hash -> block (in use or evictable)
        self.evictable: OrderedDict[int, None] = OrderedDict()  # LRU: oldest first
        self.tables: dict[int, Table] = {}
        self.written = 0  # token slots written in blocks in use (kept as they change)
        self.held = 0  # blocks in use (a reference count above 0)

    # -- what fits ---------------------------------------------------------------------
    @property
    def reserved(self) -> int:
        """Blocks the running sequences will still take as they grow."""
        return sum(t.need - len(t.blocks) for t in self.tables.values())

    @property
    def free(self) -> int:
        """Blocks free for new data (evictable ones aside)."""
        return self.num_blocks - self.fresh + len(self.returned)

    @property
    def in_use(self) -> int:
        return self.num_blocks - self.free - len(self.evictable)

    def hits(self, prompt: tuple[int, ...]) -> list[int]:
        """The blocks of `prompt`'s leading full blocks already in the pool, in order,
        leaving at least its last token to compute."""
        usable = (len(prompt) - 1) // self.block_size
        found = []
        for h in block_hashes(prompt, self.block_size)[:usable]:
            block = self.by_name.get(h)
            if block is None:
                break
            found.append(block)
        return found

    def can_admit(self, prompt: tuple[int, ...], positions: int) -> bool:
        """Whether a sequence of `positions` positions starting with `prompt` fits now."""
        shared = self.hits(prompt)
        revived = sum(1 for b in shared if b in self.evictable)
        need = blocks_for(positions, self.block_size) - len(shared)
        available = self.free + len(self.evictable) - revived - self.reserved
        return need <= available

    # -- a sequence's life ---------------------------------------------------------------
    def admit(self, seq: int, prompt: tuple[int, ...], positions: int) -> int:
        """Start sequence `seq`: share its cached leading blocks; returns how many prompt
        tokens it skips (the prefix hit)."""
        table = Table(need=blocks_for(positions, self.block_size))
        table.names = block_hashes(prompt, self.block_size)
        for block in self.hits(prompt):
            self._take(block)
            table.blocks.append(block)
        table.filled = len(table.blocks) * self.block_size
        self.tables[seq] = table
        return table.filled

    def write(self, seq: int, prompt: tuple[int, ...], count: int) -> tuple[int, ...]:
        """Sequence `seq` writes `count` more positions; returns its block table. Prompt
        blocks that become full get their name (prefix caching)."""
        table = self.tables[seq]
        bs = self.block_size
        names = table.names
        blocks = table.blocks
        fill = self.fill
        end = table.filled + count
        while table.filled < end:  # a block at a time: its slots are written in order
            index = table.filled // bs
            if index == len(blocks):
                blocks.append(self._allocate())
                table.frozen = None
            block = blocks[index]
            top = min(bs, end - index * bs)  # its slots written once this is done
            if top > fill[block]:
                self.written += top - fill[block]
                fill[block] = top
            table.filled = index * bs + top
            if top == bs and index < len(names) and block not in self.name:
                self._name(block, names[index])  # it just became full
        if table.frozen is None or len(table.frozen) != len(blocks):
            table.frozen = tuple(blocks)  # kept: most iterations add no block
        return table.frozen

    def decode(self, seqs: Sequence[int], count: int) -> None:
        """`count` decode iterations of `seqs` at once: each writes one more position an
        iteration, as `write(seq, prompt, 1)` for each in turn would, blocks taken in the
        same order (by iteration, then by sequence). A decode position lies past every
        full prompt block (`names`), in the sequence's own block: it names nothing, and
        each adds one written slot."""
        bs = self.block_size
        tables = [self.tables[seq] for seq in seqs]
        grow = sorted(
            (j, i)
            for i, table in enumerate(tables)
            for j in range(-table.filled % bs, count, bs)  # positions that open a block
        )
        for _, i in grow:
            tables[i].blocks.append(self._allocate())
        fill = self.fill
        for table in tables:
            end = table.filled + count
            for index in range(table.filled // bs, blocks_for(end, bs)):
                fill[table.blocks[index]] = min(bs, end - index * bs)
            table.filled = end
            if table.frozen is None or len(table.frozen) != len(table.blocks):
                table.frozen = tuple(table.blocks)
        self.written += count * len(tables)

    def finish(self, seq: int) -> None:
        """Sequence `seq` is done: its blocks go back (named ones stay, evictable)."""
        for block in self.tables.pop(seq).blocks:
            self.ref[block] -= 1
            if self.ref[block] == 0:
                self.held -= 1
                self.written -= self.fill[block]
                if block in self.name:
                    self.evictable[block] = None
                else:
                    self.fill[block] = 0
                    self.returned.append(block)

    # -- occupancy ---------------------------------------------------------------------------
    def used_slots(self) -> tuple[int, int]:
        """(token slots written, token slots allocated) in blocks in use: a shared block
        counts once."""
        return self.written, self.held * self.block_size

    # -- internals --------------------------------------------------------------------------
    def _take(self, block: int) -> None:
        if self.ref[block] == 0:
            self.evictable.pop(block, None)
            self.held += 1
            self.written += self.fill[block]
        self.ref[block] += 1

    def _allocate(self) -> int:
        if self.fresh < self.num_blocks:
            block = self.fresh
            self.fresh += 1
            self.ref.append(0)
            self.fill.append(0)
        elif self.returned:
            block = self.returned.popleft()
        else:
            block, _ = self.evictable.popitem(last=False)  # the least recently released
            del self.by_name[self.name.pop(block)]
            self.fill[block] = 0
        self.ref[block] = 1
        self.held += 1
        return block

    def _name(self, block: int, h: int) -> None:
        if h in self.by_name:
            return  # another block already holds this content (computed concurrently)
        self.name[block] = h
        self.by_name[h] = block
