"""Subword regularisation: every epoch trains on a freshly sampled segmentation of the training text
instead of the one best, so the model sees each sentence split many ways - a regulariser for small
corpora. Validation, test and translation keep the best segmentation.

For a unigram tokenizer, l-best sampling (Kudo 2018, Sec. 3.3): the `candidates` best segmentations of every
sentence are found once; each epoch draws one per sentence with probability proportional to P(x)^alpha. For
a BPE tokenizer, BPE-dropout with probability alpha (Provilkov et al. 2020; mt/data/bpe_dropout.py).
The draws are ours, from (seed, epoch), not sentencepiece's sampler, whose random generator cannot
be seeded reproducibly across processes: a resumed run and every DDP rank see the same pieces."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np

from mt.data.batching import EncodedCorpus, FilterReport, Ragged, filter_pairs
from mt.data.bpe_dropout import DropoutVariants, is_bpe
from mt.data.order import DealtShards
from mt.data.overlap import held_out_mask
from mt.data.tokenizer import processor_from_proto
from mt.errors import MTError
from mt.host import die_with_parent, start_background_worker

LINES_PER_TASK = 2000  # below this a process does not pay for itself


class SegmentationCandidates:
    """The n best segmentations of each line, flat: candidate rows, their log-probability, and
    which line each belongs to."""

    def __init__(self, rows: Ragged, counts: np.ndarray, piece_logp: np.ndarray, alpha: float):
        self.rows, self.alpha = rows, alpha
        self.line_of = np.repeat(np.arange(len(counts)), counts)
        self.first = np.concatenate([[0], np.cumsum(counts)[:-1]])  # each line's first candidate
        summed = np.concatenate([[0.0], np.cumsum(piece_logp[self.rows.values])])
        self.logp = summed[self.rows.offsets[1:]] - summed[self.rows.offsets[:-1]]

    @classmethod
    def of_lines(cls, proto: bytes, lines: list[str], n: int, alpha: float, pool: ProcessPoolExecutor | None = None):
        """The n best segmentations of every line under the sentencepiece model proto, to be drawn by
        P(x)^alpha; with a pool, found by its processes in parallel (the n-best search is single-threaded
        and holds the GIL: 2.1 s per 29k-line side here)."""
        if pool is None or len(lines) < 2 * LINES_PER_TASK:
            parts = [_nbest_part(proto, lines, n)]
        else:
            chunks = [lines[i : i + LINES_PER_TASK] for i in range(0, len(lines), LINES_PER_TASK)]
            parts = list(pool.map(_nbest_part, [proto] * len(chunks), chunks, [n] * len(chunks)))
        rows = Ragged.concatenate([rows for rows, _ in parts])
        counts = np.concatenate([counts for _, counts in parts])
        processor = processor_from_proto(proto)
        piece_logp = np.array([processor.get_score(i) for i in range(processor.get_piece_size())])
        return cls(rows, counts, piece_logp, alpha)

    def draw(self, rng: np.random.Generator) -> Ragged:
        """One segmentation per line, P(x)^alpha-weighted (the Gumbel-max trick)."""
        noisy = self.alpha * self.logp + rng.gumbel(size=len(self.logp))
        order = np.lexsort((-noisy, self.line_of))  # line by line (as stored), the noisiest first
        winner = np.zeros(len(noisy), dtype=bool)
        winner[order[self.first]] = True
        return self.rows.select(winner)


class SampledSegmentations:
    """The training corpus segmented anew for each epoch. The candidates are found by `workers`
    processes."""

    def __init__(
        self,
        tokenizer,
        corpus,
        alpha: float,
        seed: int,
        max_len: int = 0,
        max_ratio: float = 0.0,
        candidates: int = 16,
        workers: int = 1,
        held_out: frozenset | None = None,
        verdicts: np.ndarray | None = None,
    ):
        self.seed, self.max_len, self.max_ratio = seed, max_len, max_ratio
        self.held_out = held_out_mask(corpus.src, corpus.tgt, held_out)  # the lines to leave out
        self.verdicts = verdicts  # repeats and copies to leave out too (mt/data/duplicates.py)
        with process_pool(workers) as pool:
            src_proto, tgt_proto = tokenizer.src_proto, tokenizer.tgt_proto or tokenizer.src_proto
            self.src = segmentations_of(src_proto, corpus.src, alpha, candidates, seed, pool)
            self.tgt = segmentations_of(tgt_proto, corpus.tgt, alpha, candidates, seed, pool)
        self._epochs: dict[int, Future] = {}  # the epoch in use and the one drawn ahead
        self._drawer: ThreadPoolExecutor | None = None

    def for_epoch(self, epoch: int) -> EncodedCorpus:
        return self.with_report(epoch)[0]

    def with_report(self, epoch: int) -> tuple[EncodedCorpus, FilterReport]:
        """Epoch `epoch`'s pairs, and what the length filters dropped."""
        self.prefetch(epoch)  # already drawn or drawing, unless the run just started or resumed
        result = self._epochs[epoch].result()
        for old in [e for e in self._epochs if e < epoch]:
            del self._epochs[old]
        return result

    def prefetch(self, epoch: int) -> None:
        """Start drawing epoch `epoch` in a thread: on a GPU, the draw (0.3 s for Multi30k) would
        otherwise stall the device at every epoch's start. The result is the same either way."""
        if epoch not in self._epochs:
            self._drawer = self._drawer or ThreadPoolExecutor(1, thread_name_prefix="subword-draw")
            self._epochs[epoch] = self._drawer.submit(self._draw, epoch)

    def _draw(self, epoch: int) -> tuple[EncodedCorpus, FilterReport]:
        rng = np.random.default_rng([self.seed, epoch])
        src, tgt = self.src.draw(rng), self.tgt.draw(rng)
        return filter_pairs(src, tgt, self.max_len, self.max_ratio, self.held_out, self.verdicts)


class SampledPools(DealtShards):
    """Subword sampling for a corpus bigger than one pool (data.pool_pairs): each pool's segmentations are
    sampled when the pool comes up - its lines' n best found then, by `workers` processes, while the pool
    before it trains - and one drawn per line from (seed, epoch, pool). Memory holds a pool's candidates,
    never the corpus's; a resumed run draws the same pieces."""

    def __init__(
        self,
        tokenizer,
        corpus,
        alpha: float,
        seed: int,
        pool_shards: int,
        max_len: int = 0,
        max_ratio: float = 0.0,
        candidates: int = 16,
        workers: int = 1,
        held_out: frozenset | None = None,
        verdicts: np.ndarray | None = None,
    ):
        super().__init__(corpus, pool_shards, seed)
        self.alpha, self.max_len, self.max_ratio, self.candidates = alpha, max_len, max_ratio, candidates
        self.held_out, self.verdicts = held_out, verdicts
        self.protos = tokenizer.src_proto, tokenizer.tgt_proto or tokenizer.src_proto
        self._pool_context = process_pool(max(1, workers), background=True)  # never in the trainer's process
        self._workers = self._pool_context.__enter__()
        self._ahead = ThreadPoolExecutor(1)  # samples the next pool while this one trains
        self._next: tuple[tuple[int, int], Future] | None = None
        self._last: tuple[tuple[int, int], tuple[EncodedCorpus, FilterReport]] | None = None

    def empty_error(self) -> MTError:
        return MTError(f"{self.corpus.origin}: no training pairs left after filtering")

    def pool(self, epoch: int, index: int) -> EncodedCorpus:
        return self.with_report(epoch, index)[0]

    def with_report(self, epoch: int, index: int) -> tuple[EncodedCorpus, FilterReport]:
        """The pool's pairs, sampled (or taken from the work ahead), and what the filters dropped; the
        pool after it is started."""
        if self._last is not None and self._last[0] == (epoch, index):
            return self._last[1]
        if self._next is not None and self._next[0] == (epoch, index):
            result = self._next[1].result()
        else:
            result = self._sample(epoch, index)
        self._last = ((epoch, index), result)
        after = (epoch, index + 1) if index + 1 < self.pool_count else (epoch + 1, 0)
        self._next = (after, self._ahead.submit(self._sample, *after))
        return result

    def _sample(self, epoch: int, index: int) -> tuple[EncodedCorpus, FilterReport]:
        src, tgt, numbers = [], [], []
        for shard in self.plan(epoch)[index]:
            s, t = self.corpus.shard(shard)
            src += s
            tgt += t
            numbers.append(shard * self.corpus.shard_lines + np.arange(1, len(s) + 1))
        rng = np.random.default_rng([self.seed, epoch, index])
        seed = f"{self.seed}:{epoch}:{index}"  # BPE-dropout: each pool's words segmented anew
        drawn = [
            segmentations_of(proto, lines, self.alpha, self.candidates, seed, self._workers).draw(rng)
            for proto, lines in zip(self.protos, (src, tgt))
        ]
        numbers = np.concatenate(numbers)
        verdicts = None if self.verdicts is None else self.verdicts[numbers - 1]
        held = held_out_mask(src, tgt, self.held_out)
        encoded, report = filter_pairs(*drawn, self.max_len, self.max_ratio, held, verdicts)
        encoded.line_numbers = numbers[encoded.line_numbers - 1]
        return encoded, report

    def close(self) -> None:
        self._ahead.shutdown(wait=True, cancel_futures=True)
        self._pool_context.__exit__(None, None, None)


def _nbest_part(proto: bytes, lines: list[str], n: int) -> tuple[Ragged, np.ndarray]:
    """The n best segmentations of lines as flat rows, and how many each line has (in this process
    or a pool's: the model travels as its serialized bytes)."""
    processor = processor_from_proto(proto)
    nbest = [cands or [[]] for cands in processor.nbest_encode(lines, nbest_size=n)]  # "" has one: empty
    counts = np.fromiter((len(cands) for cands in nbest), dtype=np.int64, count=len(nbest))
    return Ragged.from_lists([c for cands in nbest for c in cands]), counts


@contextlib.contextmanager
def process_pool(workers: int, background: bool = False):
    """A pool of `workers` forked processes that die with this one, or None where one would not help
    (one worker, unless it is to work in the background) or cannot be had that way (not Linux). Forked, as
    a DataLoader's workers are: they only run sentencepiece. Background workers run below the trainer's
    priority, as the encoder of the training data does."""
    if workers < 2 - background or sys.platform != "linux":
        yield None
        return
    ctx = multiprocessing.get_context("fork")
    start = start_background_worker if background else die_with_parent
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=start, initargs=(os.getpid(),)) as pool:
        yield pool


def segmentations_of(proto: bytes, lines: list[str], alpha: float, candidates: int, seed, pool=None):
    """What samples a segmentation of lines (its draw(rng)): for a unigram model, their `candidates` best
    segmentations drawn by P(x)^alpha; for a BPE one, BPE-dropout at probability alpha (each word's
    `candidates` variants drawn from seed)."""
    if is_bpe(proto):
        return DropoutVariants.of_lines(proto, lines, alpha, candidates, seed, pool)
    return SegmentationCandidates.of_lines(proto, lines, candidates, alpha, pool)
