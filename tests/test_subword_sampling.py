"""Subword regularisation: each epoch a sampled segmentation, reproducible from (seed, epoch)."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from omegaconf import OmegaConf

from mt.config.schema import TokenizerConfig
from mt.data import subword_sampling
from mt.data.batching import encode_corpus
from mt.data.corpus import ParallelCorpus
from mt.data.order import DataOrder
from mt.data.subword_sampling import SampledPools, SampledSegmentations
from mt.data.tokenizer import build_tokenizer
from mt.training.budget import Progress

from conftest import make_pairs


def corpus_and_tokenizer(tmp_path, n=400, kind="unigram"):
    pairs = make_pairs(n, seed=3)
    corpus = ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], "memory")
    cfg = OmegaConf.structured(TokenizerConfig(type=kind, vocab_size=120, byte_fallback=False))
    return corpus, build_tokenizer(cfg, corpus, tmp_path / "tok")


def pieces(encoded):
    return [tuple(encoded.tgt[i]) for i in range(len(encoded))]


@pytest.mark.parametrize(("kind", "alpha"), [("unigram", 0.2), ("bpe", 0.1)])  # BPE: BPE-dropout's p
def test_each_epoch_samples_another_segmentation_of_the_same_text(tmp_path, kind, alpha):
    corpus, tok = corpus_and_tokenizer(tmp_path, kind=kind)
    best = encode_corpus(tok, corpus)[0]
    sampled = SampledSegmentations(tok, corpus, alpha=alpha, seed=1)
    epoch0, epoch1 = sampled.for_epoch(0), sampled.for_epoch(1)
    assert pieces(epoch0) != pieces(best) and pieces(epoch0) != pieces(epoch1)
    assert epoch0.tgt_lens.sum() > best.tgt_lens.sum()  # the best segmentation is the shortest
    # Only the split differs: the pieces spell the original sentences.
    assert tok.decode_tgt([list(p) for p in pieces(epoch1)]) == corpus.tgt
    assert [tok.src.decode(list(epoch1.src[i])) for i in range(len(epoch1))] == corpus.src


def test_a_high_alpha_draws_the_best_segmentation(tmp_path):
    corpus, tok = corpus_and_tokenizer(tmp_path)
    sharp = SampledSegmentations(tok, corpus, alpha=100.0, seed=1)  # P(x)^100: the most likely one wins
    assert pieces(sharp.for_epoch(0)) == pieces(encode_corpus(tok, corpus)[0])


def test_candidates_found_by_processes_are_those_found_by_one(tmp_path, monkeypatch):
    corpus, tok = corpus_and_tokenizer(tmp_path)
    monkeypatch.setattr(subword_sampling, "LINES_PER_TASK", 64)  # 400 lines: 7 tasks, the last one short
    alone, pooled = (SampledSegmentations(tok, corpus, alpha=0.2, seed=1, workers=w) for w in (1, 2))
    for a, b in [(alone.src, pooled.src), (alone.tgt, pooled.tgt)]:
        assert np.array_equal(a.rows.values, b.rows.values) and np.array_equal(a.rows.offsets, b.rows.offsets)
        assert np.array_equal(a.line_of, b.line_of) and np.allclose(a.logp, b.logp)
    assert pieces(alone.for_epoch(3)) == pieces(pooled.for_epoch(3))


@pytest.mark.skipif(sys.platform != "linux", reason="the pool forks only on Linux")
def test_the_pools_processes_die_with_the_run(tmp_path):
    """A run killed while the candidates are being found leaves no worker behind."""
    script = (
        "import time; from mt.data.subword_sampling import process_pool\n"
        "with process_pool(2) as pool:\n"
        "    busy = [pool.submit(time.sleep, 60) for _ in range(2)]\n"
        "    time.sleep(1); print(*pool._processes, flush=True); time.sleep(60)\n"
    )
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    workers = [int(pid) for pid in run.stdout.readline().split()]
    assert len(workers) == 2 and all(alive(pid) for pid in workers)
    run.kill()  # SIGKILL: nothing in the run can clean up
    run.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in workers if alive(pid)]
    for pid in left:  # a failing run should not leave them behind either
        os.kill(pid, signal.SIGKILL)
    assert not left


def alive(pid: int) -> bool:
    """Whether process pid runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_an_epochs_segmentation_depends_on_seed_and_epoch_only(tmp_path):
    corpus, tok = corpus_and_tokenizer(tmp_path)
    straight = SampledSegmentations(tok, corpus, alpha=0.2, seed=1)
    in_order = [pieces(straight.for_epoch(e)) for e in range(3)]
    resumed = SampledSegmentations(tok, corpus, alpha=0.2, seed=1)  # a run resumed in epoch 2
    assert pieces(resumed.for_epoch(2)) == in_order[2]
    assert pieces(SampledSegmentations(tok, corpus, alpha=0.2, seed=2).for_epoch(2)) != in_order[2]
    ahead = SampledSegmentations(tok, corpus, alpha=0.2, seed=1)
    ahead.prefetch(1)  # drawn in a thread while epoch 0 trains: the same pieces
    assert [pieces(ahead.for_epoch(e)) for e in range(3)] == in_order
    assert set(ahead._epochs) == {2}  # epochs behind are let go


def test_data_order_takes_each_batch_from_its_epochs_segmentation(tmp_path):
    corpus, tok = corpus_and_tokenizer(tmp_path)
    sampled = SampledSegmentations(tok, corpus, alpha=0.2, seed=1)
    order, progress = DataOrder(sampled, max_tokens=400, seed=1), Progress()
    first_epoch = order.epoch_length(0)
    taken = order.take(progress, first_epoch + 1)  # the last batch comes from epoch 1
    assert progress.epoch == 1
    assert all(pairs is taken[0][0] for pairs, _ in taken[:-1]) and taken[-1][0] is not taken[0][0]
    assert sorted(np.concatenate([idx for _, idx in taken[:-1]]).tolist()) == list(range(len(corpus)))


def test_data_order_over_sampled_segmentations_resumes_across_epochs(tmp_path):
    """Stopped in epoch 1 and resumed from its Progress (as a checkpoint holds it), with a fresh instance:
    the same batches, of the same pieces, as one run (the trainer's side of resume: test_pipeline)."""
    corpus, tok = corpus_and_tokenizer(tmp_path)
    straight, progress = DataOrder(SampledSegmentations(tok, corpus, alpha=0.2, seed=1), 400, seed=1), Progress()
    stop = straight.epoch_length(0) + 2
    straight.take(progress, stop)
    saved = Progress(**vars(progress))
    assert saved.epoch == 1
    ahead = [pieces_of(pairs, idx) for pairs, idx in straight.take(progress, straight.epoch_length(1))]
    again = DataOrder(SampledSegmentations(tok, corpus, alpha=0.2, seed=1), 400, seed=1)
    resumed = [pieces_of(pairs, idx) for pairs, idx in again.take(saved, straight.epoch_length(1))]
    assert resumed == ahead and progress.epoch == saved.epoch == 2  # into epoch 2: another segmentation


def pieces_of(pairs, idx) -> list:
    return [(pairs.src[i].tolist(), pairs.tgt[i].tolist()) for i in idx.tolist()]


def sampled_pools(tok, corpus, seed=1, workers=1, alpha=0.2):
    return SampledPools(tok, corpus, alpha=alpha, seed=seed, pool_shards=2, workers=workers)


def test_a_corpus_bigger_than_a_pool_is_sampled_pool_by_pool_and_resumes_alike(tmp_path, monkeypatch):
    """Each pool's segmentation is drawn when it comes up: every line once an epoch, spelled as in the text,
    the same from a fresh instance (a resumed run), with processes or without, and another next epoch."""
    corpus, tok = corpus_and_tokenizer(tmp_path)
    corpus.shard_lines = 60  # 7 shards: 4 pools of 2 shards
    pools = sampled_pools(tok, corpus)
    try:
        assert pools.pool_count == 4
        lines, texts = [], []
        for index in range(4):
            pool = pools.pool(0, index)
            lines += pool.line_numbers.tolist()
            texts += tok.decode_tgt([list(pool.tgt[i]) for i in range(len(pool))])
        assert sorted(lines) == list(range(1, 401))
        assert texts == [corpus.tgt[n - 1] for n in lines]
        epoch0 = pieces(pools.pool(0, 2))
        assert pieces(pools.pool(1, 2)) != epoch0
    finally:
        pools.close()
    monkeypatch.setattr(subword_sampling, "LINES_PER_TASK", 32)  # the pools' 120 lines in 4 tasks
    fresh = sampled_pools(tok, corpus, workers=2)
    try:
        assert pieces(fresh.pool(0, 2)) == epoch0
    finally:
        fresh.close()
    sharp = sampled_pools(tok, corpus, alpha=100.0)
    try:
        best = encode_corpus(tok, corpus)[0]
        pool = sharp.pool(0, 1)
        assert pieces(pool) == [tuple(best.tgt[n - 1]) for n in pool.line_numbers]
    finally:
        sharp.close()


def batch_pieces(taken) -> list:
    return [[pairs.tgt[int(k)].tolist() for k in indices] for pairs, indices in taken]


def test_data_order_over_sampled_pools_resumes_mid_epoch(tmp_path):
    corpus, tok = corpus_and_tokenizer(tmp_path)
    corpus.shard_lines = 60
    straight, resumed = sampled_pools(tok, corpus), sampled_pools(tok, corpus)
    try:
        order = DataOrder(straight, max_tokens=300, seed=1)
        length = order.epoch_length(1)
        order.take(Progress(epoch=1), length // 2)
        ahead = order.take(Progress(epoch=1, batch_in_epoch=length // 2), 6)
        again = DataOrder(resumed, max_tokens=300, seed=1).take(Progress(epoch=1, batch_in_epoch=length // 2), 6)
        assert batch_pieces(ahead) == batch_pieces(again) and len(ahead) == 6
    finally:
        straight.close()
        resumed.close()
