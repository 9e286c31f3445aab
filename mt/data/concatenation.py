"""Several training corpora trained on as one (data.train_split=[train,synthetic]): the lines of the first,
then of the next, and so on, offered as one corpus offers them, so shards, pools, caches and resume work
unchanged. A shard covers shard_lines lines of the whole and may span two corpora.

A tagged corpus (data.tagged_splits) has TAG before each of its sources: tagged back-translation (Caswell
et al. 2019, "Tagged Back-Translation") tells the model which sources are synthetic, so it learns from them
without learning to write like them; sources to translate carry no tag. Several languages
(mt/data/languages.py) are parts too, each direction's sources tagged with the language to translate into
when there are several. Directions of unequal size can share training more evenly than their pair counts
say (data.direction_temperature): a smaller direction's parts are then read more than once (Repeated)."""

from __future__ import annotations

import hashlib

import numpy as np

from mt.data.corpus import ParallelCorpus, read_shards
from mt.languages import tagged

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


class Repeated:
    """A corpus read round and round to size lines: its lines in order, then again from its first line, and
    so on. What upsampling a part takes (Concatenation reads it as any part); a fraction of a round takes the
    corpus's first lines."""

    def __init__(self, part, size: int):
        if size < len(part):
            raise ValueError(f"Repeated: {size} lines is less than the part's {len(part)}")
        self.part, self.size, self.shard_lines = part, size, part.shard_lines
        self.origin = f"{part.origin} (x{size / len(part):.2f})"
        self._digest = hashlib.sha256(f"repeated {size} ".encode() + part.digest().encode()).hexdigest()

    def __len__(self) -> int:
        return self.size

    def digest(self) -> str:
        return self._digest

    @property
    def shards(self) -> int:
        return -(-self.size // self.shard_lines)

    def shard(self, index: int) -> tuple[list[str], list[str]]:
        """Lines index * shard_lines onwards, line i being the part's line i modulo its length."""
        start, stop, n = index * self.shard_lines, min((index + 1) * self.shard_lines, self.size), len(self.part)
        src, tgt = [], []
        while start < stop:
            begin = start % n
            end = min(n, begin + stop - start)
            s, t = _lines(self.part, begin, end)
            src += s
            tgt += t
            start += end - begin
        return src, tgt

    def tokenizer_sample(self, side: str | None = None) -> list[str]:
        return self.part.tokenizer_sample(side)  # each line once: the tokenizer needs no repeats

    def forget_sample(self) -> None:
        self.part.forget_sample()


def tempered_sizes(lines: dict, temperature: float) -> dict:
    """Lines each group of parts (a direction) is read to, so that its share of training is proportional
    to lines ** (1 / temperature), as in Arivazhagan et al. 2019 ("Massively Multilingual Neural Machine
    Translation in the Wild"): 1 keeps every group's size, larger values even them out, inf makes them
    equal. The largest group keeps its size and the others are read more than once, so no line is left out."""
    largest = max(lines.values())
    return {key: max(n, round(largest * (n / largest) ** (1 / temperature))) for key, n in lines.items()}


def _lines(part, start: int, stop: int) -> tuple[list[str], list[str]]:
    """Lines start..stop of one part, read shard by shard."""
    size = part.shard_lines
    src, tgt = read_shards(part, range(start // size, (stop - 1) // size + 1))
    offset = (start // size) * size
    return src[start - offset : stop - offset], tgt[start - offset : stop - offset]
