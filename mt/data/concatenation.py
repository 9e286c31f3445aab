"""Several training corpora trained on as one (data.train_split=[train,synthetic]): the lines of the first,
then of the next, and so on, offered as one corpus offers them, so shards, pools, caches and resume work
unchanged. A shard covers shard_lines lines of the whole and may span two corpora.

A tagged corpus (data.tagged_splits) has TAG before each of its sources: tagged back-translation (Caswell
et al. 2019, "Tagged Back-Translation") tells the model which sources are synthetic, so it learns from them
without learning to write like them; sources to translate carry no tag. Several languages
(mt/data/languages.py) are parts too, each direction's sources tagged with the language to translate into
when there are several."""

from __future__ import annotations

import hashlib

import numpy as np

from mt.data.languages import tagged
from mt.data.sources import ParallelCorpus, read_shards

TAG = "<bt>"  # one sentencepiece piece: the tokenizer of a run with tagged corpora is trained with it as a symbol


class Concatenation:
    """Corpora (ParallelCorpus, AlignedTextFiles or HubSplit, each already checked) read one after another,
    each part's sources with tags[i] before them: "" none, else tags separated by spaces ("<2fr> <bt>")."""

    def __init__(self, parts: list, sample_size: int, tags: list[str] | None = None, seed: int = 1):
        self.parts, self.sample_size, self.seed = parts, sample_size, seed
        self.tags = tags or [""] * len(parts)
        self.shard_lines = parts[0].shard_lines
        self.origin = " + ".join(
            f"{part.origin}{f' (tagged {tag})' if tag else ''}" for part, tag in zip(parts, self.tags)
        )
        self.ends = np.cumsum([len(part) for part in parts])  # each part's end, in lines of the whole
        text = hashlib.sha256(b"concatenation")
        for part, tag in zip(parts, self.tags):
            text.update(part.digest().encode() + tag.encode())
        self._digest = text.hexdigest()

    @property
    def source_symbols(self) -> list[str]:
        """Pieces the source tokenizer must hold whole: every tag, in the order first met."""
        return list(dict.fromkeys(symbol for tag in self.tags for symbol in tag.split()))

    def __len__(self) -> int:
        return int(self.ends[-1])

    def digest(self) -> str:
        return self._digest

    @property
    def shards(self) -> int:
        return -(-len(self) // self.shard_lines)

    def shard(self, index: int) -> tuple[list[str], list[str]]:
        """Lines index * shard_lines onwards of the whole, taken from every part they span."""
        start, stop = index * self.shard_lines, min((index + 1) * self.shard_lines, len(self))
        src, tgt = [], []
        for part, end, tag in zip(self.parts, self.ends.tolist(), self.tags):
            begin = end - len(part)
            if begin < stop and start < end:
                s, t = _lines(part, max(start, begin) - begin, min(stop, end) - begin)
                src += tagged(s, tag)
                tgt += t
        return src, tgt

    def tokenizer_sample(self, side: str | None = None) -> list[str]:
        """Every line while the parts fit the sample size together; else each part's share of it, in
        proportion to its length, drawn from its own uniform sample."""
        sides = ["src", "tgt"] if side is None else [side]
        return [line for s in sides for line in self._side_sample(s)]

    def _side_sample(self, side: str) -> list[str]:
        rng = np.random.default_rng(self.seed)
        lines = []
        for part in self.parts:
            sample = part.tokenizer_sample(side)
            if len(self) > self.sample_size:
                share = round(self.sample_size * len(part) / len(self))
                sample = [sample[i] for i in sorted(rng.choice(len(sample), min(share, len(sample)), replace=False))]
            lines += sample
        return lines

    def forget_sample(self) -> None:
        for part in self.parts:
            part.forget_sample()

    def in_memory(self) -> ParallelCorpus:
        src, tgt = read_shards(self, range(self.shards))
        return ParallelCorpus(src, tgt, self.origin, self._digest, self.shard_lines)


def _lines(part, start: int, stop: int) -> tuple[list[str], list[str]]:
    """Lines start..stop of one part, read shard by shard."""
    size = part.shard_lines
    src, tgt = read_shards(part, range(start // size, (stop - 1) // size + 1))
    offset = (start // size) * size
    return src[start - offset : stop - offset], tgt[start - offset : stop - offset]
