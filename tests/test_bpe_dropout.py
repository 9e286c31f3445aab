"""BPE-dropout: a BPE tokenizer's subword sampling, held against sentencepiece's own segmentation and against
the paper's definition, and reproducible from (seed, epoch) as unigram sampling is."""

import random
from collections import Counter

import numpy as np
import pytest
from omegaconf import OmegaConf

from mt.config.schema import TokenizerConfig
from mt.data import bpe_dropout
from mt.data.bpe_dropout import BpeMerges, DropoutVariants, split_words
from mt.data.corpus import ParallelCorpus
from mt.data.subword_sampling import SampledPools, SampledSegmentations
from mt.data.tokenizer import build_tokenizer

from conftest import make_pairs


def bpe_corpus_and_tokenizer(tmp_path, byte_fallback=False, n=400):
    pairs = make_pairs(n, seed=3)
    corpus = ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], "memory")
    cfg = TokenizerConfig(type="bpe", vocab_size=400 if byte_fallback else 120, byte_fallback=byte_fallback)
    return corpus, build_tokenizer(OmegaConf.structured(cfg), corpus, tmp_path / "tok")


def rows(ragged) -> list[list[int]]:
    return [ragged[i].tolist() for i in range(len(ragged))]


def pieces(encoded) -> list[tuple]:
    return [tuple(encoded.tgt[i]) for i in range(len(encoded))]


@pytest.mark.parametrize("byte_fallback", [False, True])
def test_without_dropout_every_line_is_segmented_as_the_tokenizer_segments_it(tmp_path, byte_fallback):
    """The merges, their order (ties to the leftmost pair), the words and the piece ids are sentencepiece's:
    with p = 0 the lines come out as the tokenizer encodes them, unknown characters and odd spacing too."""
    corpus, tok = bpe_corpus_and_tokenizer(tmp_path, byte_fallback)
    runs = [c * n for c in sorted(set("".join(corpus.tgt)) - {" "}) for n in (3, 4)]  # ties: "sss" with "ss"
    lines = [*corpus.src, *corpus.tgt, "", "  two   spaces  ", "Ünknöwn 漢字, zz-zz!", " ".join(runs)]
    variants = DropoutVariants.of_lines(tok.src_proto, lines, 0.0, 3, seed=1)
    assert rows(variants.draw(np.random.default_rng(0))) == tok.encode_src(lines)


def test_a_merge_is_dropped_with_probability_p_at_every_step():
    """Provilkov et al. 2020: at each step every applicable merge is dropped with probability p, the best one
    left is applied, and the word stays as it is once all are dropped. For "abcd" with merges ab, then cd, the
    four segmentations come out as often as that makes them; a merge dropped at one step may apply at the next
    (sentencepiece's own sampling drops it for good: "a b cd" would come out p(1 - p) of the time)."""
    merges, p, n = BpeMerges({"ab": 0, "cd": 1}), 0.3, 40_000
    found = Counter(merges.segmentations(("a", "b", "c", "d"), p, n, random.Random(5)))
    expected = {
        ("ab", "cd"): (1 - p) ** 2 + p * (1 - p) ** 2,  # ab then cd, or ab dropped, cd, then ab
        ("ab", "c", "d"): (1 - p) * p,
        ("a", "b", "cd"): p * (1 - p) * p,
        ("a", "b", "c", "d"): p * p,
    }
    assert set(found) == set(expected)
    for segmentation, share in expected.items():
        assert found[segmentation] / n == pytest.approx(share, abs=0.01)
    assert merges.segmentations(("a", "b", "c", "d"), 0.0, 2, random.Random(5)) == [("ab", "cd")] * 2


def test_words_are_cut_where_sentencepiece_starts_one():
    assert split_words(["\u2581", "a", "b", "\u2581c", "d", "<0x41>", "\u2581"]) == [
        ("\u2581", "a", "b"),
        ("\u2581c", "d", "<0x41>"),
        ("\u2581",),
    ]
    assert split_words([]) == [] and split_words(["x\x00y", "\u2581", "z"]) == [("x\x00y",), ("\u2581", "z")]


def test_an_epochs_segmentation_comes_from_seed_and_epoch_whatever_processes_segment_the_words(tmp_path, monkeypatch):
    """A resumed run and a run whose words were segmented by processes see the same pieces (each word's
    segmentations are seeded by the word, not by the task that holds it); another seed, others."""
    corpus, tok = bpe_corpus_and_tokenizer(tmp_path)
    epoch1 = pieces(SampledSegmentations(tok, corpus, alpha=0.1, seed=1).for_epoch(1))
    monkeypatch.setattr(bpe_dropout, "WORDS_PER_TASK", 50)
    for again in (SampledSegmentations(tok, corpus, alpha=0.1, seed=1, workers=w) for w in (1, 2)):
        assert pieces(again.for_epoch(1)) == epoch1
    assert pieces(SampledSegmentations(tok, corpus, alpha=0.1, seed=2).for_epoch(1)) != epoch1


def test_a_corpus_bigger_than_a_pool_gets_each_pools_words_segmented_anew_and_resumes_alike(tmp_path):
    corpus, tok = bpe_corpus_and_tokenizer(tmp_path)
    corpus.shard_lines = 60  # 7 shards: 4 pools of 2 shards
    first, fresh = (SampledPools(tok, corpus, alpha=0.1, seed=1, pool_shards=2) for _ in range(2))
    try:
        pool = first.pool(0, 2)
        assert tok.decode_tgt([list(p) for p in pieces(pool)]) == [corpus.tgt[n - 1] for n in pool.line_numbers]
        assert pieces(first.pool(1, 2)) != pieces(pool)
        assert pieces(fresh.pool(0, 2)) == pieces(pool)
    finally:
        first.close()
        fresh.close()
