"""Which batches training takes, in which order.

A corpus that fits one pool (data.pool_pairs) is batched as a whole each epoch. A bigger one is
trained on pool by pool: each epoch deals its shards, shuffled, into pools of pool_pairs pairs drawn
from all over the corpus, batches each pool by length and shuffles its batches - as OpenNMT-py's
buckets and Marian's maxi-batches do, so that training starts after one pool is encoded and memory
never holds more than a pool. Everything is a pure function of (seed, epoch): a resumed run takes
the same batches.
"""

from __future__ import annotations

import numpy as np

from mt.data.batching import EncodedCorpus, Ragged, token_batches
from mt.data.buckets import LengthBuckets
from mt.errors import MTError


def deal(shards: int, pool_shards: int, seed: int, epoch: int) -> list[list[int]]:
    """The shards of each of an epoch's pools: in file order if they make one pool, else shuffled."""
    if shards <= pool_shards:
        return [list(range(shards))]
    order = np.random.default_rng([seed, epoch, 1]).permutation(shards).tolist()
    return [order[i : i + pool_shards] for i in range(0, shards, pool_shards)]


def shard_lines(corpus) -> np.ndarray:
    """The lines of each shard of a corpus (AlignedTextFiles or ParallelCorpus)."""
    return np.minimum(corpus.shard_lines, len(corpus) - np.arange(corpus.shards) * corpus.shard_lines)


class DealtShards:
    """A corpus's shards dealt into pools for each epoch: what every source of pools shares."""

    def __init__(self, corpus, pool_shards: int, seed: int):
        self.corpus, self.pool_shards, self.seed = corpus, max(1, pool_shards), seed
        self.lines = shard_lines(corpus)
        self._plan: tuple[int, list[list[int]]] = (-1, [])

    @property
    def pool_count(self) -> int:
        return -(-self.corpus.shards // self.pool_shards)

    def plan(self, epoch: int) -> list[list[int]]:
        """deal's pools for the epoch, kept: the budget asks for them every update."""
        if self._plan[0] != epoch:
            self._plan = (epoch, deal(self.corpus.shards, self.pool_shards, self.seed, epoch))
        return self._plan[1]

    def share(self, epoch: int, index: int) -> float:
        """The pool's share of the epoch's lines (before filtering)."""
        return float(sum(self.lines[s] for s in self.plan(epoch)[index]) / self.lines.sum())


class ShardPools(DealtShards):
    """The encoded shards (EncodedShards) of a corpus, dealt into pools for each epoch."""

    def __init__(self, shards, pool_shards: int, seed: int):
        super().__init__(shards.corpus, pool_shards, seed)
        self.shards = shards

    def pool(self, epoch: int, index: int) -> EncodedCorpus:
        parts = [self.shards.get(s)[0] for s in self.plan(epoch)[index]]
        if len(parts) == 1:
            return parts[0]
        return EncodedCorpus(
            Ragged.concatenate([p.src for p in parts]),
            Ragged.concatenate([p.tgt for p in parts]),
            np.concatenate([p.line_numbers for p in parts]),
        )

    def empty_error(self) -> MTError:
        return MTError(f"{self.corpus.origin}: no training pairs left after filtering ({self.shards.report()})")

    def close(self) -> None:
        self.shards.close()


class WholeCorpus:
    """An EncodedCorpus, or SampledSegmentations (segmented anew each epoch), as an epoch of one pool."""

    pool_count = 1

    def __init__(self, source):
        self.source = source

    def pool(self, epoch: int, index: int) -> EncodedCorpus:
        return self.source.for_epoch(epoch)

    def prefetch(self, epoch: int, index: int) -> None:
        """Start preparing that pool ahead of its turn, where the source can (a sampled segmentation)."""
        if hasattr(self.source, "prefetch"):
            self.source.prefetch(epoch)

    def share(self, epoch: int, index: int) -> float:
        return 1.0

    def empty_error(self) -> MTError:
        return MTError("no training pairs left after filtering")


class DataOrder:
    """The batches of each epoch, pool after pool; a position is (progress.epoch, progress.batch_in_epoch)."""

    def __init__(self, source, max_tokens: int, seed: int, bucketed: bool = False):
        self.pools = source if hasattr(source, "plan") else WholeCorpus(source)  # pools, or one corpus
        self.max_tokens, self.seed = max_tokens, seed
        self.bucketed = bucketed  # batches in a few fixed shapes (LengthBuckets), for CUDA graphs
        self._buckets: LengthBuckets | None = None
        self._current: tuple[int, int, EncodedCorpus, list[np.ndarray]] | None = None
        self._counts: tuple[int, list[int]] = (-1, [])  # batches in each pool of an epoch, found so far

    def pool_batches(self, epoch: int, index: int) -> tuple[EncodedCorpus, list[np.ndarray]]:
        """A pool's pairs and its batches (index arrays into those pairs), shuffled."""
        if self._current is None or self._current[:2] != (epoch, index):
            corpus = self.pools.pool(epoch, index)
            if self.pools.pool_count == 1 and hasattr(self.pools, "prefetch"):
                self.pools.prefetch(epoch + 1, 0)  # the next epoch's pairs, drawn while this one trains
            seed = [self.seed, epoch] if self.pools.pool_count == 1 else [self.seed, epoch, index]
            rng = np.random.default_rng(seed)
            if self.bucketed:
                batches = self.buckets.batches(corpus.src_lens, corpus.tgt_lens, rng)
            else:
                batches = token_batches(corpus.src_lens, corpus.tgt_lens, self.max_tokens, rng)
            self._current = (epoch, index, corpus, batches)
        return self._current[2], self._current[3]

    @property
    def buckets(self) -> LengthBuckets:
        """The batch shapes of a bucketed order: fitted to the first epoch's first pool, whatever epoch
        the run starts (or resumes) in, so a resumed run batches as the uninterrupted one did."""
        if self._buckets is None:
            first = self.pools.pool(0, 0)
            self._buckets = LengthBuckets.fit(first.src_lens, first.tgt_lens, self.max_tokens)
        return self._buckets

    def _count(self, epoch: int, index: int) -> int:
        if self._counts[0] != epoch:
            self._counts = (epoch, [])
        counts = self._counts[1]
        while len(counts) <= index:
            counts.append(len(self.pool_batches(epoch, len(counts))[1]))
        return counts[index]

    def locate(self, epoch: int, batch: int) -> tuple[int, int]:
        """(pool, batch within it) of the epoch's batch number `batch`; (pool_count, 0) past its end."""
        for index in range(self.pools.pool_count):
            n = self._count(epoch, index)
            if batch < n:
                return index, batch
            batch -= n
        return self.pools.pool_count, 0

    def epoch_length(self, epoch: int) -> int:
        return sum(self._count(epoch, i) for i in range(self.pools.pool_count))

    def where(self, progress) -> tuple[int, int]:
        """locate for progress's position. The batch counts of the epoch's pools found so far travel in
        progress.pool_batches (saved in checkpoints): a resumed run finds its place without building the
        pools before it again (for sampled pools, a sampling each)."""
        known = progress.pool_batches
        if self._counts[0] != progress.epoch or len(self._counts[1]) < len(known):
            self._counts = (progress.epoch, list(known))
        place = self.locate(progress.epoch, progress.batch_in_epoch)
        progress.pool_batches = list(self._counts[1])
        return place

    def epoch_finished(self, progress) -> bool:
        return self.where(progress)[0] == self.pools.pool_count

    def epoch_fraction(self, progress) -> float:
        """How much of the current epoch is done, by its lines (exact at every pool's edge)."""
        index, offset = self.where(progress)
        done = sum(self.pools.share(progress.epoch, i) for i in range(index))
        if index == self.pools.pool_count:
            return 1.0
        return done + self.pools.share(progress.epoch, index) * (offset / self._count(progress.epoch, index))

    def take(self, progress, count: int) -> list[tuple[EncodedCorpus, np.ndarray]]:
        """The next `count` batches (one update's worth) as (pairs, indices), advancing
        progress.epoch / batch_in_epoch."""
        out = []
        while len(out) < count:
            index, offset = self.where(progress)
            if index == self.pools.pool_count:
                if progress.batch_in_epoch == 0:
                    raise self.pools.empty_error()
                progress.epoch += 1
                progress.batch_in_epoch = 0
                progress.pool_batches = []
                continue
            corpus, batches = self.pool_batches(progress.epoch, index)
            out.append((corpus, batches[offset]))
            progress.batch_in_epoch += 1
        return out
