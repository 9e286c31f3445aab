"""Encoded corpora, length filtering, and batches built by token count with little padding."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from mt.tokenizer import BOS, EOS, PAD

log = logging.getLogger(__name__)


@dataclass
class EncodedCorpus:
    """Token ids per sentence (without BOS/EOS), and the original line number of each pair."""

    src: list[np.ndarray]
    tgt: list[np.ndarray]
    line_numbers: np.ndarray

    def __len__(self) -> int:
        return len(self.src)

    @property
    def src_lens(self) -> np.ndarray:
        return np.fromiter((len(s) for s in self.src), dtype=np.int64, count=len(self.src))

    @property
    def tgt_lens(self) -> np.ndarray:
        return np.fromiter((len(t) for t in self.tgt), dtype=np.int64, count=len(self.tgt))


@dataclass
class FilterReport:
    kept: int = 0
    empty: int = 0
    too_long: int = 0
    bad_ratio: int = 0

    def __str__(self) -> str:
        total = self.kept + self.empty + self.too_long + self.bad_ratio
        return (
            f"kept {self.kept:,} of {total:,} pairs; dropped {self.empty:,} with an empty side, "
            f"{self.too_long:,} longer than max_len, {self.bad_ratio:,} over the length ratio"
        )


def encode_corpus(tokenizer, corpus, max_len: int = 0, max_ratio: float = 0.0) -> tuple[EncodedCorpus, FilterReport]:
    """Tokenize both sides; drop (and count) empty pairs, over-long pairs and bad length ratios."""
    src_ids = tokenizer.encode_src(corpus.src)
    tgt_ids = tokenizer.encode_tgt(corpus.tgt)
    report = FilterReport()
    kept_src, kept_tgt, lines = [], [], []
    for line, (s, t) in enumerate(zip(src_ids, tgt_ids), start=1):
        if not s or not t:
            report.empty += 1
        elif max_len and (len(s) > max_len or len(t) > max_len):
            report.too_long += 1
        elif max_ratio and max(len(s), len(t)) > max_ratio * min(len(s), len(t)):
            report.bad_ratio += 1
        else:
            kept_src.append(np.asarray(s, dtype=np.int32))
            kept_tgt.append(np.asarray(t, dtype=np.int32))
            lines.append(line)
    report.kept = len(kept_src)
    return EncodedCorpus(kept_src, kept_tgt, np.asarray(lines, dtype=np.int64)), report


def token_batches(src_lens, tgt_lens, max_tokens: int, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Group sentence indices into batches of at most max_tokens padded tokens per side.

    Sentences are sorted by length (random tie-breaking when rng is given), so a batch holds
    sentences of similar length and little padding; the batch order is then shuffled.
    A batch costs n * max(longest source + 1, longest target + 1) (EOS / BOS added).
    """
    src_lens, tgt_lens = np.asarray(src_lens) + 1, np.asarray(tgt_lens) + 1
    noise = rng.random(len(src_lens)) if rng is not None else np.zeros(len(src_lens))
    order = np.lexsort((noise, src_lens, tgt_lens))  # by target length, then source length
    batches, start, longest = [], 0, 0
    for i, idx in enumerate(order):
        longest_if_added = max(longest, src_lens[idx], tgt_lens[idx])
        if i > start and longest_if_added * (i - start + 1) > max_tokens:
            batches.append(order[start:i])
            start, longest_if_added = i, max(src_lens[idx], tgt_lens[idx])
        longest = longest_if_added
    if start < len(order):
        batches.append(order[start:])
    if rng is not None:
        rng.shuffle(batches)
    return batches


@dataclass
class Batch:
    src: torch.Tensor  # (B, S): tokens + EOS, padded
    tgt_in: torch.Tensor  # (B, T): BOS + tokens
    tgt_out: torch.Tensor  # (B, T): tokens + EOS
    num_tgt_tokens: int  # real (non-pad) target tokens, the loss normaliser

    def to(self, device) -> Batch:
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device), self.num_tgt_tokens)

    @property
    def padded_tokens(self) -> int:
        return self.src.numel() + self.tgt_out.numel()

    @property
    def real_tokens(self) -> int:
        return int((self.src != PAD).sum()) + self.num_tgt_tokens


def pad_sequences(seqs: list, prefix: list[int] = (), suffix: list[int] = ()) -> torch.Tensor:
    """Right-pad sequences (with optional fixed prefix/suffix tokens) into one (B, T) tensor."""
    length = max(len(s) for s in seqs) + len(prefix) + len(suffix)
    out = np.full((len(seqs), length), PAD, dtype=np.int64)
    for row, s in enumerate(seqs):
        full = np.concatenate([prefix, s, suffix]).astype(np.int64) if (prefix or suffix) else s
        out[row, : len(full)] = full
    return torch.from_numpy(out)


def collate(corpus: EncodedCorpus, indices) -> Batch:
    src = pad_sequences([corpus.src[i] for i in indices], suffix=[EOS])
    tgts = [corpus.tgt[i] for i in indices]
    tgt_in = pad_sequences(tgts, prefix=[BOS])
    tgt_out = pad_sequences(tgts, suffix=[EOS])
    return Batch(src, tgt_in, tgt_out, int(sum(len(t) + 1 for t in tgts)))
