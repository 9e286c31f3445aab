"""A validation or test set taken from the training split, for a corpus that comes with none (one pair of
files, a Hugging Face dataset with a train split only): data.valid_from_train=N holds N random training
pairs out as the validation set, data.test_from_train=N as the test set.

The pairs are drawn with a fixed seed from the training text alone, so every run on the same text and sizes
(any train.seed), `mt-evaluate` and a resumed run hold out the same ones. They, and any training pair equal
to one of them (case, spacing and punctuation aside: mt/data/overlap.py), are then left out of training, as
data.drop_held_out leaves out given valid and test pairs.
"""

from __future__ import annotations

import logging

import numpy as np

from mt.data.corpus import ParallelCorpus
from mt.errors import MTError

log = logging.getLogger(__name__)

SEED = 20170612  # the pairs depend on the text and the sizes only


def drawn_sizes(data_cfg) -> dict[str, int]:
    """The sets drawn from the training split and their pairs, by split name ({} where none is)."""
    sizes = {data_cfg.valid_split: data_cfg.valid_from_train, data_cfg.test_split: data_cfg.test_from_train}
    return {name: pairs for name, pairs in sizes.items() if pairs}


def takes_from_train(data_cfg) -> bool:
    """Whether a held-out set of this config is drawn from the training split."""
    return bool(drawn_sizes(data_cfg))


def drawn_split(data_cfg, split: str | None) -> bool:
    """Whether this split (the config's valid or test split) is drawn from the training split."""
    return split in drawn_sizes(data_cfg)


def draw(train, valid_pairs: int, test_pairs: int) -> tuple[ParallelCorpus | None, ParallelCorpus | None]:
    """(valid, test): valid_pairs and test_pairs random pairs of the training corpus (None where 0), no pair
    in both. One pass over the corpus, a shard at a time."""
    wanted = valid_pairs + test_pairs
    if wanted > len(train) // 2:
        raise MTError(
            f"data.valid_from_train + data.test_from_train = {wanted:,}: more than half of the {len(train):,} "
            f"training pairs ({train.origin})"
        )
    # a prefix of one fixed permutation: the validation pairs do not change with the test set's size
    picks = np.random.default_rng(SEED).permutation(len(train))[:wanted]
    order = np.argsort(picks)  # the picks in line order: each shard takes a run of them
    lines = picks[order]
    src, tgt = [""] * wanted, [""] * wanted
    start = 0
    for index in range(train.shards):
        shard_src, shard_tgt = train.shard(index)
        first, stop = np.searchsorted(lines, [start, start + len(shard_src)])
        for line, place in zip(lines[first:stop].tolist(), order[first:stop].tolist()):
            src[place], tgt[place] = shard_src[line - start], shard_tgt[line - start]
        start += len(shard_src)
    origin = f"{train.origin}, held out of training"
    valid = ParallelCorpus(src[:valid_pairs], tgt[:valid_pairs], origin) if valid_pairs else None
    test = ParallelCorpus(src[valid_pairs:], tgt[valid_pairs:], origin) if test_pairs else None
    return valid, test


def drawn_sets(data_cfg, train) -> tuple[ParallelCorpus | None, ParallelCorpus | None]:
    """(valid, test) as the config draws them from this training corpus (None: read from its own split)."""
    valid, test = draw(train, data_cfg.valid_from_train, data_cfg.test_from_train)
    log.info(
        "held out of training: %s",
        ", ".join(f"{name} {len(c):,} random pairs" for name, c in (("valid", valid), ("test", test)) if c is not None),
    )
    return valid, test
