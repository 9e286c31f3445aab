"""Subword regularisation (Kudo 2018): every epoch trains on a freshly sampled segmentation of the
training text instead of the one best, so the model sees each sentence split many ways - a
regulariser for small corpora. Validation, test and translation keep the best segmentation.

l-best sampling (Kudo 2018, Sec. 3.3): the `candidates` best segmentations of every sentence are
found once; each epoch draws one per sentence with probability proportional to P(x)^alpha.
The draw is ours, from (seed, epoch), not sentencepiece's sampler, whose random generator cannot
be seeded reproducibly across processes: a resumed run and every DDP rank see the same pieces."""

from __future__ import annotations

import numpy as np

from mt.batching import EncodedCorpus, FilterReport, Ragged, filter_pairs
from mt.errors import MTError


class SegmentationCandidates:
    """The n best segmentations of each line, flat: candidate rows, their log-probability, and
    which line each belongs to."""

    def __init__(self, processor, lines: list[str], n: int):
        nbest = processor.nbest_encode(lines, nbest_size=n)
        nbest = [cands or [[]] for cands in nbest]  # an empty line has one, empty, segmentation
        self.rows = Ragged.from_lists([c for cands in nbest for c in cands])
        counts = np.fromiter((len(cands) for cands in nbest), dtype=np.int64, count=len(nbest))
        self.line_of = np.repeat(np.arange(len(nbest)), counts)
        self.first = np.concatenate([[0], np.cumsum(counts)[:-1]])  # each line's first candidate
        piece_logp = np.array([processor.get_score(i) for i in range(processor.get_piece_size())])
        summed = np.concatenate([[0.0], np.cumsum(piece_logp[self.rows.values])])
        self.logp = summed[self.rows.offsets[1:]] - summed[self.rows.offsets[:-1]]

    def draw(self, alpha: float, rng: np.random.Generator) -> Ragged:
        """One segmentation per line, P(x)^alpha-weighted (the Gumbel-max trick)."""
        noisy = alpha * self.logp + rng.gumbel(size=len(self.logp))
        order = np.lexsort((-noisy, self.line_of))  # line by line (as stored), the noisiest first
        winner = np.zeros(len(noisy), dtype=bool)
        winner[order[self.first]] = True
        return self.rows.select(winner)


class SampledSegmentations:
    """The training corpus segmented anew for each epoch."""

    def __init__(
        self,
        tokenizer,
        corpus,
        alpha: float,
        seed: int,
        max_len: int = 0,
        max_ratio: float = 0.0,
        candidates: int = 16,
    ):
        if not _is_unigram(tokenizer):
            raise MTError("train.subword_sampling needs a unigram tokenizer (tokenizer.type=unigram)")
        self.alpha, self.seed, self.max_len, self.max_ratio = alpha, seed, max_len, max_ratio
        self.src = SegmentationCandidates(tokenizer.src, corpus.src, candidates)
        self.tgt = SegmentationCandidates(tokenizer.tgt, corpus.tgt, candidates)
        self._cached: tuple[int, EncodedCorpus, FilterReport] | None = None

    def for_epoch(self, epoch: int) -> EncodedCorpus:
        return self.with_report(epoch)[0]

    def with_report(self, epoch: int) -> tuple[EncodedCorpus, FilterReport]:
        """Epoch `epoch`'s pairs, and what the length filters dropped."""
        if self._cached is None or self._cached[0] != epoch:
            rng = np.random.default_rng([self.seed, epoch])
            src, tgt = self.src.draw(self.alpha, rng), self.tgt.draw(self.alpha, rng)
            self._cached = (epoch, *filter_pairs(src, tgt, self.max_len, self.max_ratio))
        return self._cached[1], self._cached[2]


def _is_unigram(tokenizer) -> bool:
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    return all(
        model_pb2.ModelProto.FromString(proto).trainer_spec.model_type == model_pb2.TrainerSpec.UNIGRAM
        for proto in (tokenizer.src_proto, tokenizer.tgt_proto or tokenizer.src_proto)
    )
