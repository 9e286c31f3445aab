"""Training data of any size: files scanned in blocks (checked, identified, sampled) and read back by shard;
shards encoded into the cache (here or by a background process); batches dealt pool by pool."""

import hashlib
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from mt.config.schema import TokenizerConfig
from mt.data import shards as shards_module
from mt.data.batching import encode_corpus, token_batches
from mt.data.corpus import ParallelCorpus
from mt.data.lines import read_lines
from mt.data.order import DataOrder, ShardPools
from mt.data.shards import EncodedShards
from mt.data.text_files import AlignedTextFiles, scan_file
from mt.data.tokenizer import build_tokenizer
from mt.errors import MTError
from mt.training.budget import Progress

from conftest import make_pairs, train_tiny

AWKWARD = ["ein Haus\r", "", "zwei\u2028Häuser", "   ", "drei\x00Häuser", "ende"]


def write(path, text: str | bytes):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def aligned(tmp_path, src_lines, tgt_lines, **kwargs) -> AlignedTextFiles:
    src = write(tmp_path / "train.de", "".join(line + "\n" for line in src_lines))
    tgt = write(tmp_path / "train.en", "".join(line + "\n" for line in tgt_lines))
    return AlignedTextFiles(src, tgt, "train", **{"sample_size": 1000, **kwargs})


@pytest.mark.parametrize("block_bytes", [7, 64, 1 << 20])
@pytest.mark.parametrize("ending", ["\n", ""])
def test_a_scan_reads_the_lines_read_lines_reads(tmp_path, block_bytes, ending):
    lines = [f"{i} {AWKWARD[i % len(AWKWARD)]}" for i in range(40)]
    path = write(tmp_path / "x.de", "\ufeff" + "\n".join(lines) + ending)
    digest = hashlib.sha256()
    side = scan_file(path, shard_lines=6, sample_size=100, seed=1, digest=digest, block_bytes=block_bytes)
    assert side.lines == 40 and len(side.shard_starts) == 7
    assert [line for shard in range(7) for line in side.read(shard)] == read_lines(path) == lines
    expected = hashlib.sha256(b"\x00side\x00" + "".join(line + "\n" for line in lines).encode())
    assert digest.hexdigest() == expected.hexdigest()


def test_aligned_files_identify_their_text_as_a_loaded_corpus_does(tmp_path):
    pairs = make_pairs(50, seed=3)
    files = aligned(tmp_path, [s for s, _ in pairs], [t for _, t in pairs], shard_lines=8)
    loaded = ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], "train", shard_lines=8)
    assert files.digest() == loaded.digest() and len(files) == 50 and files.shards == loaded.shards == 7
    assert all(files.shard(i) == loaded.shard(i) for i in range(7))
    assert files.in_memory().src == loaded.src
    assert files.tokenizer_sample() == loaded.tokenizer_sample()  # everything fits the sample: the same lines


def test_scan_errors_name_the_file_and_line(tmp_path):
    good = "".join(f"line {i}\n" for i in range(30))
    bad = write(tmp_path / "bad.de", good.encode() + b"caf\xe9\n" + b"more\n")
    with pytest.raises(MTError, match=r"bad\.de:31: invalid UTF-8 \(byte 0xe9\)"):
        scan_file(bad, 8, 10, 1, hashlib.sha256(), block_bytes=16)
    with pytest.raises(MTError, match=r"train\.de has 3 lines but .*train\.en has 2: .*line-aligned"):
        aligned(tmp_path, ["a", "b", "c"], ["a", "b"])
    with pytest.raises(MTError, match=r"train\.de: empty corpus"):
        aligned(tmp_path, [], [])
    with pytest.raises(MTError, match=r"nothing\.de: no such file"):
        AlignedTextFiles(tmp_path / "nothing.de", tmp_path / "train.en", "x", 10)


def test_the_tokenizer_sample_is_a_seeded_uniform_draw_of_each_side(tmp_path):
    lines = [f"line {i}" for i in range(10)]
    path = write(tmp_path / "x.de", "".join(line + "\n" for line in lines))
    counts = Counter()
    for seed in range(1500):
        sample = scan_file(path, 50, 3, seed, hashlib.sha256(), block_bytes=20).sample
        assert len(set(sample)) == 3
        counts.update(sample)
    assert set(counts) == {line.encode() for line in lines}
    assert all(380 <= n <= 520 for n in counts.values()), counts  # 450 expected each
    again = scan_file(path, 50, 3, 7, hashlib.sha256(), block_bytes=20).sample
    assert again == scan_file(path, 50, 3, 7, hashlib.sha256()).sample  # the blocks do not change the draw


def tok_cfg():
    return OmegaConf.structured(TokenizerConfig(vocab_size=100, byte_fallback=False))


@pytest.fixture(scope="module")
def corpus():
    pairs = make_pairs(230, seed=11) + [("", "leer"), ("x " * 40, "y")]  # an empty side; an over-long one
    return ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], "test", shard_lines=40)


@pytest.fixture(scope="module")
def tok(corpus, tmp_path_factory):
    return build_tokenizer(tok_cfg(), corpus, tmp_path_factory.mktemp("tok"))


def concatenated(shards: EncodedShards) -> list:
    parts = [shards.get(i)[0] for i in range(shards.count)]
    return [
        (int(line), part.src[i].tolist(), part.tgt[i].tolist())
        for part in parts
        for i, line in enumerate(part.line_numbers)
    ]


def test_shards_hold_what_encoding_the_whole_corpus_gives(tmp_path, corpus, tok, monkeypatch):
    whole, whole_report = encode_corpus(tok, corpus, 30, 0.0)
    expected = [(int(n), whole.src[i].tolist(), whole.tgt[i].tolist()) for i, n in enumerate(whole.line_numbers)]
    in_memory = EncodedShards(tok, corpus, 30, 0.0, None)
    in_memory.encode_all()
    cached = EncodedShards(tok, corpus, 30, 0.0, str(tmp_path))
    cached.encode_all()
    assert cached.count == 6 and concatenated(in_memory) == concatenated(cached) == expected
    assert in_memory.report() == cached.report() == whole_report
    assert whole_report.empty == 1 and whole_report.too_long == 1

    monkeypatch.setattr(shards_module, "encode_shard", lambda *a: pytest.fail("encoded again"))
    again = EncodedShards(tok, corpus, 30, 0.0, str(tmp_path))
    assert again.complete and isinstance(again.get(3)[0].src.values, np.memmap)
    assert concatenated(again) == expected
    monkeypatch.undo()
    other = EncodedShards(tok, corpus, 31, 0.0, str(tmp_path))  # other filters: other shards
    assert not other.ready(0)


def test_a_background_encoder_stores_every_shard_and_its_end_is_one_line(tmp_path, corpus, tok, monkeypatch):
    shards = EncodedShards(tok, corpus, 30, 0.0, str(tmp_path / "a"))
    shards.start([5, 4, 3, 2, 1, 0])
    try:
        assert concatenated(shards) == concatenated(_encoded_here(tok, corpus))
    finally:
        shards.close()

    monkeypatch.setattr(shards_module, "encode_shard", lambda *a: time.sleep(60))  # what the forked child runs
    slow = EncodedShards(tok, corpus, 30, 0.0, str(tmp_path / "b"))
    slow.start(list(range(6)))
    os.kill(slow._encoder.pid, signal.SIGKILL)
    with pytest.raises(MTError, match=r"^test: the encoder of the training data stopped \(exit code -9\)$"):
        slow.get(5)

    def bad_line(*args):
        raise MTError("train.de:77: something wrong")

    monkeypatch.setattr(shards_module, "encode_shard", bad_line)
    failing = EncodedShards(tok, corpus, 30, 0.0, str(tmp_path / "c"))
    failing.start(list(range(6)))
    with pytest.raises(MTError, match=r"^train\.de:77: something wrong$"):
        failing.get(0)


def _encoded_here(tok, corpus):
    shards = EncodedShards(tok, corpus, 30, 0.0, None)
    shards.encode_all()
    return shards


def test_one_pool_is_batched_as_the_whole_corpus_always_was(corpus, tok):
    shards = _encoded_here(tok, corpus)
    pools = ShardPools(shards, pool_shards=8, seed=3)
    whole = encode_corpus(tok, corpus, 30, 0.0)[0]
    order = DataOrder(pools, max_tokens=60, seed=3)
    for epoch in (0, 1):
        expected = token_batches(whole.src_lens, whole.tgt_lens, 60, np.random.default_rng([3, epoch]))
        pairs, batches = order.pool_batches(epoch, 0)
        assert [b.tolist() for b in batches] == [b.tolist() for b in expected]
        assert np.array_equal(pairs.src.values, whole.src.values)


def test_pools_take_every_pair_once_an_epoch_and_resume_where_they_stopped(corpus, tok):
    pools = ShardPools(_encoded_here(tok, corpus), pool_shards=2, seed=3)
    assert pools.pool_count == 3 and pools.plan(0) != pools.plan(1)
    order, progress = DataOrder(pools, max_tokens=60, seed=3), Progress()
    length = order.epoch_length(0)
    taken, fractions = [], []
    while progress.epoch == 0 and not order.epoch_finished(progress):
        pairs, indices = order.take(progress, 1)[0]
        taken += pairs.line_numbers[indices].tolist()
        fractions.append(order.epoch_fraction(progress))
    kept = [n for n, _, _ in concatenated(pools.shards)]
    assert sorted(taken) == kept and len(fractions) == length
    assert fractions == sorted(fractions) and fractions[-1] == 1.0

    middle = Progress(epoch=1, batch_in_epoch=length // 2)
    straight = DataOrder(pools, max_tokens=60, seed=3)
    straight.take(Progress(epoch=1), length // 2)
    resumed = DataOrder(pools, max_tokens=60, seed=3)
    after = [(p.line_numbers[i].tolist()) for p, i in straight.take(Progress(**vars(middle)), 5)]
    assert [(p.line_numbers[i].tolist()) for p, i in resumed.take(middle, 5)] == after


def test_a_corpus_filtered_to_nothing_is_one_line(tok):
    nothing = ParallelCorpus(["a b"] * 5, [""] * 5, "empty.txt", shard_lines=2)
    order = DataOrder(ShardPools(_encoded_here(tok, nothing), pool_shards=1, seed=1), max_tokens=60, seed=1)
    with pytest.raises(MTError, match=r"^empty\.txt: no training pairs left after filtering \(kept 0 of 5 pairs"):
        order.take(Progress(), 1)


def test_multi30k_streamed_in_shards_is_multi30k_loaded_and_encoded(tmp_path):
    """The shipped corpus, scanned and encoded in 5 shards, equals it loaded whole and encoded at once:
    the same pairs, ids, filter counts and line numbers, and the same tokenizer trained from either."""
    from mt.data.sources import load_files

    loaded = load_files("data/multi30k", "train", "de", "en")
    scanned = AlignedTextFiles(
        Path("data/multi30k/train.de"), Path("data/multi30k/train.en"), "m", sample_size=100_000, shard_lines=7000
    )
    assert scanned.digest() == loaded.digest() and scanned.tokenizer_sample() == loaded.tokenizer_sample()
    cfg = OmegaConf.structured(TokenizerConfig(vocab_size=1000))
    tok = build_tokenizer(cfg, scanned, tmp_path / "tok")
    assert tok.src_proto == build_tokenizer(cfg, loaded, tmp_path / "tok2").src_proto
    whole, report = encode_corpus(tok, loaded, 40, 1.5)
    shards = EncodedShards(tok, scanned, 40, 1.5, str(tmp_path / "cache"))
    shards.encode_all()
    assert shards.count == 5 and shards.report() == report and report.bad_ratio > 0
    expected = [(int(n), whole.src[i].tolist(), whole.tgt[i].tolist()) for i, n in enumerate(whole.line_numbers)]
    assert concatenated(shards) == expected


def test_a_scan_is_kept_until_its_files_change(tmp_path, monkeypatch):
    from mt.data import text_files

    pairs = make_pairs(30, seed=2)
    first = aligned(tmp_path, [s for s, _ in pairs], [t for _, t in pairs], shard_lines=8, cache_dir=str(tmp_path))
    monkeypatch.setattr(text_files, "scan_file", lambda *a, **k: pytest.fail("scanned again"))
    again = AlignedTextFiles(tmp_path / "train.de", tmp_path / "train.en", "train", 1000, 8, cache_dir=str(tmp_path))
    assert again.digest() == first.digest() and len(again) == 30
    assert [again.shard(i) for i in range(4)] == [first.shard(i) for i in range(4)]
    monkeypatch.undo()
    assert again.tokenizer_sample() == first.tokenizer_sample()  # the sample needs the scan: done now

    changed = tmp_path / "train.en"
    changed.write_text(changed.read_text().replace("dog", "cat"))  # same size, in place: its time tells
    after = AlignedTextFiles(tmp_path / "train.de", changed, "train", 1000, 8, cache_dir=str(tmp_path))
    assert after.digest() != first.digest()


@pytest.mark.parametrize("sampling", [0.0, 0.2])
def test_a_run_over_several_pools_resumes_to_the_losses_of_one_run(tiny_corpus, tmp_path, sampling):
    """600 pairs in shards of 100, pools of 200: stopped mid-pool and resumed, the same updates as one run,
    with the shards encoded in the background (and, with subword sampling, pools sampled as they come)."""
    common = ["train.log_every=1", "train.save_every=5", "train.valid_every=1000", "data.test_split=null"]
    common += ["data.shard_lines=100", "data.pool_pairs=200", "train.max_tokens=300", f"data.cache_dir={tmp_path}"]
    common += [f"train.subword_sampling={sampling}", "train.max_epochs=4"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    first = train_tiny(tiny_corpus, straight, "train.max_steps=60", *common)
    assert "600 lines dealt into 3 pools an epoch" in first.stdout + first.stderr
    train_tiny(tiny_corpus, resumed, "train.max_steps=25", *common)
    train_tiny(tiny_corpus, resumed, "train.max_steps=60", *common)

    def records(run):
        return [json.loads(line) for line in (run / "train.jsonl").read_text().splitlines()]

    assert {r["step"]: r["loss"] for r in records(resumed)} == {r["step"]: r["loss"] for r in records(straight)}
    assert records(straight)[-1]["epoch"] >= 2  # across epochs, whose pools differ


def test_a_corpus_encoded_in_the_background_reports_its_filter_once(tiny_corpus, tmp_path):
    """One pool: the trainer waits for the background encoder to finish, and only the encoder reports."""
    run = tmp_path / "run"
    train_tiny(tiny_corpus, run, "train.max_steps=2", "data.test_split=null", f"data.cache_dir={tmp_path}")
    log = (run / "train.log").read_text()
    assert "shards encoded" in log and log.count("filter: kept") == 1


def test_a_resumed_position_is_found_without_building_the_pools_before_it(corpus, tok, monkeypatch):
    """The epoch's pool sizes travel in Progress (and so in checkpoints): resuming in the last pool builds
    that pool only, and takes the batches one run takes."""
    pools = ShardPools(_encoded_here(tok, corpus), pool_shards=2, seed=3)
    straight, progress = DataOrder(pools, max_tokens=60, seed=3), Progress(epoch=1)
    first_two = straight._count(1, 0) + straight._count(1, 1)
    straight.take(progress, first_two + 2)
    saved = Progress(**vars(progress))
    assert saved.pool_batches[:2] == [straight._count(1, 0), straight._count(1, 1)]
    ahead = [p.line_numbers[i].tolist() for p, i in straight.take(progress, 3)]

    built = []
    real_pool = pools.pool
    monkeypatch.setattr(pools, "pool", lambda epoch, index: built.append(index) or real_pool(epoch, index))
    again = [p.line_numbers[i].tolist() for p, i in DataOrder(pools, max_tokens=60, seed=3).take(saved, 3)]
    assert again == ahead and built == [2]
