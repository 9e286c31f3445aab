"""BPE-dropout (Provilkov et al. 2020): subword sampling for a BPE tokenizer.

BPE segments a word by applying its merges, the highest-ranked applicable one first, until none applies.
BPE-dropout drops each applicable merge with probability p at every step (the best remaining one is
applied; when all are dropped, the word stays as it is), so a word comes out split in varied ways, and the
model learns how words are made of their parts. With p = 0 it is the tokenizer's own segmentation.

Merges never join two words (no piece holds a space inside), so sampling is per word: each distinct word of
the text gets `count` segmentations drawn once, and every epoch each occurrence of a word takes one of its
word's at random. They come from (seed, the word) alone: the same whatever processes found them.
"""

from __future__ import annotations

import random
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import numpy as np

from mt.data.batching import Ragged
from mt.data.tokenizer import processor_from_proto

WORDS_PER_TASK = 4000  # distinct words a process segments per task


class BpeMerges:
    """A sentencepiece BPE model's merges: the rank of every piece two adjacent symbols may merge into."""

    def __init__(self, rank: dict[str, float]):
        self.rank = rank  # piece -> when BPE merges it: the lower, the earlier

    @classmethod
    def from_proto(cls, proto: bytes) -> BpeMerges:
        """The merges of a sentencepiece model, which scores a BPE piece by its merge's order (0, -1, -2, ...)."""
        from sentencepiece import sentencepiece_model_pb2 as model_pb2

        normal = model_pb2.ModelProto.SentencePiece.NORMAL
        return cls({p.piece: -p.score for p in model_pb2.ModelProto.FromString(proto).pieces if p.type == normal})

    def segmentations(
        self, word: tuple[str, ...], dropout: float, count: int, draws: random.Random
    ) -> list[tuple[str, ...]]:
        """count segmentations of word's symbols, merged as BPE merges them, each applicable merge dropped
        with probability dropout at every step; ties go to the leftmost pair, as in sentencepiece. The merges
        applicable in each state met are found once for all count."""
        # Each state met: where its merges apply, best first, and the state each leads to (made when first taken).
        met: dict[tuple[str, ...], tuple[list[int], list]] = {}
        found = []
        for _ in range(count):
            state = word
            while True:
                if state not in met:
                    order = self._applicable(state)
                    met[state] = (order, [None] * len(order))
                order, leads_to = met[state]
                # The first merge that survives its draw: the same as dropping each, then taking the best.
                j = next((j for j in range(len(order)) if not dropout or draws.random() >= dropout), None)
                if j is None:
                    break  # every merge dropped (or none applies): the word stays as it is
                at = order[j]
                if leads_to[j] is None:
                    leads_to[j] = state[:at] + (state[at] + state[at + 1],) + state[at + 2 :]
                state = leads_to[j]
            found.append(state)
        return found

    def _applicable(self, state: tuple[str, ...]) -> list[int]:
        """Where in state a merge applies, the best merge first (ties: the leftmost first)."""
        get = self.rank.get
        ranked = [(rank, i) for i, (a, b) in enumerate(zip(state, state[1:])) if (rank := get(a + b)) is not None]
        ranked.sort()
        return [i for _, i in ranked]


class DropoutVariants:
    """Every occurrence of every word of some lines, and `count` BPE-dropout segmentations (piece ids) of
    each distinct word: draw() segments the lines anew from them."""

    def __init__(self, variants: Ragged, count: int, words: np.ndarray, words_per_line: np.ndarray):
        self.variants, self.count = variants, count  # row w * count + k: word w's k-th segmentation
        self.words = words  # each occurrence's word, line after line
        self.line_offsets = np.concatenate([[0], np.cumsum(words_per_line)])

    @classmethod
    def of_lines(
        cls, proto: bytes, lines: list[str], dropout: float, count: int, seed, pool: ProcessPoolExecutor | None = None
    ) -> DropoutVariants:
        """The words of lines (as the tokenizer splits text into symbols before merging) and `count`
        segmentations of each, dropping merges with probability dropout; with a pool, by its processes."""
        processor = processor_from_proto(proto)
        # Every merge dropped: the symbols BPE starts from (characters, byte pieces, user-defined symbols).
        symbols = processor.encode(lines, out_type=str, enable_sampling=True, alpha=1.0)
        index: dict[tuple[str, ...], int] = {}
        occurrences, words_per_line = [], np.zeros(len(lines), dtype=np.int64)
        for line, pieces in enumerate(symbols):
            words = split_words(pieces)
            words_per_line[line] = len(words)
            occurrences += [index.setdefault(word, len(index)) for word in words]
        distinct = list(index)
        tasks = [distinct[i : i + WORDS_PER_TASK] for i in range(0, len(distinct), WORDS_PER_TASK)]
        segment = partial(_segment_words, proto=proto, dropout=dropout, count=count, seed=seed)
        parts = (pool.map if pool else map)(segment, tasks)
        variants = Ragged.concatenate([Ragged.from_lists(part) for part in parts])
        return cls(variants, count, np.array(occurrences, dtype=np.int64), words_per_line)

    def draw(self, rng: np.random.Generator) -> Ragged:
        """Each line with every word in one of its segmentations, chosen at random."""
        rows = self.words * self.count + rng.integers(self.count, size=len(self.words))
        lengths = self.variants.lengths[rows]
        ends = np.cumsum(lengths)
        # The pieces of every chosen row, one after the other: position i of the output, in row r's span,
        # takes piece offsets[r] + (i - where r's span starts).
        starts = self.variants.offsets[rows] - (ends - lengths)
        take = np.repeat(starts, lengths) + np.arange(ends[-1] if len(ends) else 0)
        offsets = np.concatenate([[0], ends])[self.line_offsets]
        return Ragged(self.variants.values[take], offsets)


def split_words(symbols: list[str]) -> list[tuple[str, ...]]:
    """The symbols of a line, cut before each that starts a word (sentencepiece's "\u2581")."""
    joined = "\x00".join(symbols)
    if not symbols or joined.count("\x00") != len(symbols) - 1:  # a symbol holds the separator: one by one
        return _split_words_one_by_one(symbols)
    first, *rest = joined.split("\x00\u2581")
    return [tuple(first.split("\x00")), *(tuple(("\u2581" + word).split("\x00")) for word in rest)]


def _split_words_one_by_one(symbols: list[str]) -> list[tuple[str, ...]]:
    words, word = [], []
    for symbol in symbols:
        if symbol.startswith("\u2581") and word:
            words.append(tuple(word))
            word = []
        word.append(symbol)
    if word:
        words.append(tuple(word))
    return words


def _segment_words(words: list[tuple[str, ...]], proto: bytes, dropout: float, count: int, seed) -> list[list[int]]:
    """count segmentations (piece ids) of each word, in this process or a pool's; each word's draws are seeded
    by (seed, the word), so they do not depend on which task holds it."""
    merges, processor = BpeMerges.from_proto(proto), processor_from_proto(proto)
    ids = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
    found = []
    for word in words:
        for pieces in merges.segmentations(word, dropout, count, random.Random(f"{seed}:{' '.join(word)}")):
            found.append([ids.get(piece, processor.unk_id()) for piece in pieces])
    return found


def is_bpe(proto: bytes) -> bool:
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    return model_pb2.ModelProto.FromString(proto).trainer_spec.model_type == model_pb2.TrainerSpec.BPE
