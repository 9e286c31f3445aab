"""The training split of a Hugging Face dataset, read from its Arrow table a slice at a time (memory-mapped
where the dataset was saved or cached): what AlignedTextFiles offers for text files."""

from __future__ import annotations

import hashlib

from mt.data.corpus import SHARD_LINES, ParallelCorpus
from mt.data.sources import hub_lines
from mt.data.text_files import Reservoir

SLICE_ROWS = 50_000  # rows read at a time to identify and sample the split


class HubSplit:
    """Length, origin, digest (as ParallelCorpus.digest gives it for the same lines), the tokenizer's sample
    and lines by shard, from one pass over each language's column."""

    def __init__(self, table, src_lang: str, tgt_lang: str, origin: str, sample_size: int, shard_lines=SHARD_LINES):
        self.table, self.langs, self.origin, self.shard_lines = table, (src_lang, tgt_lang), origin, shard_lines
        text = hashlib.sha256()
        self._samples = []
        for seed, lang in enumerate(self.langs, start=1):
            text.update(b"\x00side\x00")
            reservoir = Reservoir(sample_size, seed)
            for start in range(0, len(table), SLICE_ROWS):
                lines = hub_lines(table, start, start + SLICE_ROWS, lang)
                text.update("".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass"))
                reservoir.add(len(lines), lines.__getitem__)
            self._samples.append(reservoir.items)
        self._digest = text.hexdigest()

    def __len__(self) -> int:
        return len(self.table)

    def digest(self) -> str:
        return self._digest

    @property
    def shards(self) -> int:
        return -(-len(self) // self.shard_lines)

    def shard(self, index: int) -> tuple[list[str], list[str]]:
        start = index * self.shard_lines
        return tuple(hub_lines(self.table, start, start + self.shard_lines, lang) for lang in self.langs)

    def tokenizer_sample(self, side: str | None = None) -> list[str]:
        """Every line of both sides (src then tgt, or of one side) while they fit the sample size; else a
        uniform sample of that size from each side."""
        src, tgt = self._samples
        return src + tgt if side is None else {"src": src, "tgt": tgt}[side]

    def forget_sample(self) -> None:
        self._samples = [[], []]

    def in_memory(self) -> ParallelCorpus:
        src, tgt = (hub_lines(self.table, 0, len(self), lang) for lang in self.langs)
        return ParallelCorpus(src, tgt, self.origin, self._digest, self.shard_lines)
