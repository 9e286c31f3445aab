"""A parallel corpus held in memory, and the interface every training corpus offers: its length, origin,
digest, the tokenizer's sample and its lines by shard (text_files.py, tsv_files.py and hub_split.py stream
the same from disk)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# Training pairs are encoded, cached and batched in shards of this many lines (data.shard_lines): memory for
# preparation is bounded by a shard, and training starts once the first pool of shards is encoded.
SHARD_LINES = 50_000


@dataclass
class ParallelCorpus:
    src: list[str]
    tgt: list[str]
    origin: str  # where it came from, for messages
    _digest: str | None = field(default=None, repr=False, compare=False)
    shard_lines: int = field(default=SHARD_LINES, repr=False, compare=False)
    # several directions' pairs one after another (joined): each direction's (start, stop) lines
    sections: dict[str, tuple[int, int]] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.src)

    @property
    def shards(self) -> int:
        return -(-len(self) // self.shard_lines)

    def shard(self, index: int) -> tuple[list[str], list[str]]:
        """Shard index's lines of both sides (lines index * shard_lines onwards), as AlignedTextFiles gives them."""
        start = index * self.shard_lines
        return self.src[start : start + self.shard_lines], self.tgt[start : start + self.shard_lines]

    def tokenizer_sample(self, side: str | None = None) -> list[str]:
        """The lines a tokenizer is trained on: both sides (src then tgt) or one; sentencepiece samples them."""
        return self.src + self.tgt if side is None else getattr(self, side)

    def forget_sample(self) -> None:
        """Nothing to let go: the sample is the corpus."""

    def in_memory(self) -> ParallelCorpus:
        return self

    def digest(self) -> str:
        """Identifies the text: what cached tokenizers and encodings were made from (computed once)."""
        if self._digest is None:
            h = hashlib.sha256()
            for side in (self.src, self.tgt):
                h.update(b"\x00side\x00")
                for line in side:
                    h.update(line.encode("utf-8", "surrogatepass") + b"\n")
            self._digest = h.hexdigest()
        return self._digest


def read_shards(corpus, shards) -> tuple[list[str], list[str]]:
    """The lines of both sides of these shards of a corpus, in order."""
    src, tgt = [], []
    for index in shards:
        s, t = corpus.shard(index)
        src += s
        tgt += t
    return src, tgt
