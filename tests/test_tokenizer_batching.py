"""Tokenizer training, reuse and round trip; length filtering; token-budget batches."""

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from mt.config.schema import Config, TokenizerConfig
from mt.data import tokenizer as tokenizer_module
from mt.data.batching import (
    EncodedCorpus,
    Ragged,
    collate,
    encode_corpus,
    length_order,
    pad_sequences,
    token_batches,
)
from mt.data.corpus import ParallelCorpus
from mt.data.tokenizer import BOS, EOS, PAD, Tokenizer, build_tokenizer, fingerprint, tokenizer_settings
from mt.errors import MTError

from conftest import make_pairs


def tok_cfg(**overrides):
    return OmegaConf.structured(TokenizerConfig(**{"vocab_size": 100, "byte_fallback": False, **overrides}))


@pytest.fixture(scope="module")
def corpus():
    pairs = make_pairs(300, seed=5)
    return ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], "test")


@pytest.mark.parametrize("kind", ["unigram", "bpe"])
def test_round_trip_and_special_ids(tmp_path, corpus, kind):
    tok = build_tokenizer(tok_cfg(type=kind), corpus, tmp_path)
    sentences = ["ein hund läuft schnell", "a small cat sleeps here"]
    for sentence, ids in zip(sentences, tok.encode_src(sentences)):
        assert PAD not in ids and BOS not in ids and EOS not in ids
        assert tok.decode_tgt([ids])[0] == sentence
    assert tok.decode_tgt(tok.encode_tgt(["a dog runs"]))[0] == "a dog runs"
    assert tok.joint and tok.src_vocab_size == tok.tgt_vocab_size
    assert tok.tgt.id_to_piece(PAD) == "<pad>" and tok.tgt.id_to_piece(EOS) == "</s>"


@pytest.mark.parametrize(
    "joint, sides, said",
    [(True, ([""], [" "]), "blank.txt: every"), (False, (["a dog"], ["  "]), r"blank.txt \(target\): every")],
)
def test_a_corpus_of_empty_lines_is_one_line_naming_it(tmp_path, joint, sides, said):
    with pytest.raises(MTError, match=f"^{said} line is empty, no text to train a tokenizer on$"):
        build_tokenizer(tok_cfg(joint=joint), ParallelCorpus(*sides, "blank.txt"), tmp_path)


def test_byte_fallback_round_trips_unseen_characters(tmp_path, corpus):
    unseen = "Fremdwörter: Zürich 42! 東京 🙂"
    with_bytes = build_tokenizer(tok_cfg(vocab_size=400, byte_fallback=True), corpus, tmp_path / "b")
    assert with_bytes.decode_tgt(with_bytes.encode_src([unseen]))[0] == unseen
    # Byte pieces can spell a line break or a tab; a translation stays one line, one field.
    dog, cat = (with_bytes.encode_tgt([w])[0] for w in ("dog", "cat"))
    for byte in ("0x0A", "0x0D", "0x09", "0x0B", "0x1C"):
        spelled = with_bytes.tgt.piece_to_id(f"<{byte}>")
        assert with_bytes.tgt.decode([dog + [spelled] + cat]) == ["dog" + chr(int(byte, 16)) + " cat"]
        assert with_bytes.decode_tgt([dog + [spelled] + cat, [spelled] + dog]) == ["dog cat", "dog"]
    without = build_tokenizer(tok_cfg(), corpus, tmp_path / "u")
    assert "⁇" in without.decode_tgt(without.encode_src([unseen]))[0]


def test_text_is_normalized_as_its_target_language_is_written(tmp_path, corpus):
    run = OmegaConf.structured(Config)
    run.data.tgt_lang = "en"
    assert tokenizer_settings(run).normalization == "nmt_nfkc"  # sentencepiece's own default
    for targets in ("zh", "zh-Hant", ["en", "ja"]):
        run.data.tgt_lang = targets
        assert tokenizer_settings(run).normalization == "identity"
    run.tokenizer.normalization = "nfkc"  # a choice is kept
    assert tokenizer_settings(run).normalization == "nfkc" and run.tokenizer.normalization == "nfkc"
    chinese = ["狗，猫！", "男孩跑……", "（大）树？"] * 20
    text = ParallelCorpus(corpus.src[:60], chinese, "zh")
    as_written = build_tokenizer(tok_cfg(vocab_size=120, normalization="identity"), text, tmp_path / "i")
    assert as_written.decode_tgt(as_written.encode_tgt(chinese[:3])) == chinese[:3]
    nfkc = build_tokenizer(tok_cfg(vocab_size=120), text, tmp_path / "n")  # what NFKC does to Chinese text
    assert nfkc.decode_tgt(nfkc.encode_tgt(chinese[:3])) == ["狗,猫!", "男孩跑......", "(大)树?"]


def test_character_coverage_defaults_to_sentencepieces_advice_where_a_language_is_chinese_or_japanese():
    run = OmegaConf.structured(Config)
    run.data.src_lang, run.data.tgt_lang = "de", "en"
    assert run.tokenizer.character_coverage is None and tokenizer_settings(run).character_coverage == 1.0
    for src, tgt in (("zh", "en"), ("en", "ja"), ("de", "zh-Hant"), (["de", "jpn"], "en")):
        run.data.src_lang, run.data.tgt_lang = src, tgt
        assert tokenizer_settings(run).character_coverage == 0.9995, (src, tgt)
    run.data.src_lang, run.data.tgt_lang = "ko", "en"  # Hangul: a small alphabet's syllables
    assert tokenizer_settings(run).character_coverage == 1.0
    run.data.src_lang, run.tokenizer.character_coverage = "zh", 0.98  # a choice is kept
    assert tokenizer_settings(run).character_coverage == 0.98


def test_a_run_is_compared_with_its_checkpoint_by_the_tokenizer_settings_it_was_trained_with(tmp_path, monkeypatch):
    """A run whose checkpoint was written while character_coverage defaulted to 1.0 for every language resumes
    under the null default; a Chinese one, whose default is now 0.9995, is told which setting differs."""
    from mt.config.schema import to_dict
    from mt.data import prepare

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.pt").touch()
    for src, refused in (("de", False), ("zh", True)):
        run = OmegaConf.structured(Config)
        run.data.src_lang, run.data.tgt_lang = src, "en"
        saved = to_dict(run)
        saved["tokenizer"]["character_coverage"] = 1.0  # as written before the default was null
        saved["tokenizer"].pop("normalization")  # and before that setting was there
        monkeypatch.setattr(prepare, "load_checkpoint", lambda path, mmap, saved=saved: {"config": saved})
        if refused:
            with pytest.raises(MTError, match=r"differs in tokenizer\.character_coverage\)"):
                prepare.refuse_another_run(run, tmp_path)
            run.tokenizer.character_coverage = 1.0  # as the run was trained: it resumes
        prepare.refuse_another_run(run, tmp_path)


def test_the_fingerprint_of_the_default_normalization_is_the_one_runs_had_before_the_setting(corpus):
    """A run trained before tokenizer.normalization existed resumes: its tokenizer's fingerprint is unchanged."""
    before = dict(tok_cfg())
    before.pop("normalization")
    was = hashlib.sha256((json.dumps(before, sort_keys=True) + corpus.digest()).encode()).hexdigest()
    assert fingerprint(tok_cfg(), corpus) == fingerprint(tok_cfg(normalization="nmt_nfkc"), corpus) == was
    assert fingerprint(tok_cfg(normalization="identity"), corpus) != was


def test_reused_when_data_and_settings_match(tmp_path, corpus, monkeypatch):
    first = build_tokenizer(tok_cfg(), corpus, tmp_path)
    calls = []
    real_train = tokenizer_module.train_sentencepiece
    monkeypatch.setattr(tokenizer_module, "train_sentencepiece", lambda *a, **k: calls.append(1) or real_train(*a, **k))
    again = build_tokenizer(tok_cfg(), corpus, tmp_path)
    assert calls == [] and again.state_dict() == first.state_dict()
    build_tokenizer(tok_cfg(vocab_size=90), corpus, tmp_path)  # settings changed: retrain
    assert calls == [1]
    changed = ParallelCorpus(corpus.src, corpus.tgt[:-1] + ["changed"], "t")
    build_tokenizer(tok_cfg(vocab_size=90), changed, tmp_path)  # data changed: retrain
    assert calls == [1, 1]


def test_a_new_run_directory_takes_the_tokenizer_from_the_cache(tmp_path, corpus, monkeypatch):
    """A second run on the same corpus and settings, in another run directory, trains no tokenizer."""
    cache = str(tmp_path / "cache")
    first = build_tokenizer(tok_cfg(), corpus, tmp_path / "run1" / "tokenizer", cache)
    calls = []
    real_train = tokenizer_module.train_sentencepiece
    monkeypatch.setattr(tokenizer_module, "train_sentencepiece", lambda *a, **k: calls.append(1) or real_train(*a, **k))
    second = build_tokenizer(tok_cfg(), corpus, tmp_path / "run2" / "tokenizer", cache)
    assert calls == [] and second.state_dict() == first.state_dict()
    assert (tmp_path / "run2" / "tokenizer" / "meta.json").read_text() == (
        tmp_path / "run1" / "tokenizer" / "meta.json"
    ).read_text()
    build_tokenizer(tok_cfg(vocab_size=90), corpus, tmp_path / "run3" / "tokenizer", cache)  # other settings: a miss
    changed = ParallelCorpus(corpus.src, corpus.tgt[:-1] + ["changed"], "t")
    build_tokenizer(tok_cfg(), changed, tmp_path / "run4" / "tokenizer", cache)  # other text: a miss
    assert calls == [1, 1]
    entries = sorted((tmp_path / "cache" / "tokenizers").iterdir())
    assert len(entries) == 3 and not any(e.name.startswith(".tmp") for e in entries)
    damaged = tmp_path / "cache" / "tokenizers" / fingerprint(tok_cfg(), corpus)[:24]
    (damaged / "meta.json").write_text("{broken")  # a damaged entry is trained anew (once), not read
    for run in ("run5", "run6", "run7"):
        again = build_tokenizer(tok_cfg(), corpus, tmp_path / run / "tokenizer", cache)
        assert again.state_dict() == first.state_dict()
    assert len(calls) == 3


def test_two_runs_that_train_the_same_tokenizer_at_once_both_leave_it_cached_without_a_warning(
    tmp_path, corpus, monkeypatch, caplog
):
    """Runs side by side (a sweep's, --jobs) miss the cache together and store the same tokenizer twice."""
    cache = str(tmp_path / "cache")
    build_tokenizer(tok_cfg(), corpus, tmp_path / "run1" / "tokenizer", cache)
    entry = tmp_path / "cache" / "tokenizers" / fingerprint(tok_cfg(), corpus)[:24]
    stored = entry.with_name("stored")
    shutil.copytree(entry, stored)
    shutil.rmtree(entry)  # a miss for the second run too
    real_replace = os.replace

    def the_other_run_first(src, dst):
        if Path(dst) == entry:
            shutil.copytree(stored, entry)  # the other run stored it between this one's check and its rename
        return real_replace(src, dst)

    monkeypatch.setattr(tokenizer_module.os, "replace", the_other_run_first)
    with caplog.at_level(logging.WARNING):
        build_tokenizer(tok_cfg(), corpus, tmp_path / "run2" / "tokenizer", cache)
    assert "not cached" not in caplog.text
    assert sorted(p.name for p in entry.parent.iterdir()) == sorted([entry.name, "stored"])  # no .tmp- left


def test_separate_vocabularies(tmp_path, corpus):
    tok = build_tokenizer(tok_cfg(joint=False), corpus, tmp_path)
    assert not tok.joint
    assert (tmp_path / "spm.src.model").exists() and not (tmp_path / "spm.model").exists()
    restored = Tokenizer.from_state_dict(tok.state_dict())
    assert restored.encode_src(["ein hund"]) == tok.encode_src(["ein hund"])
    assert Tokenizer.load(tmp_path).encode_tgt(["a dog"]) == tok.encode_tgt(["a dog"])


@pytest.mark.parametrize("joint", [True, False])
def test_a_few_lines_and_many_give_what_sentencepiece_gives_and_pieces_come_from_each_sides_vocabulary(
    tmp_path, corpus, joint
):
    """Lines are encoded and decoded one by one below BATCH_CALL_PAYS and in one call from there, and
    pieces are looked up in a table per side: all as the processors themselves give them."""
    tok = build_tokenizer(tok_cfg(joint=joint), corpus, tmp_path)
    for count in (1, 3, tokenizer_module.BATCH_CALL_PAYS + 5):
        src_lines, tgt_lines = corpus.src[:count], corpus.tgt[:count]
        assert tok.encode_src(src_lines) == tok.src.encode(src_lines)
        assert tok.encode_src_truncated(src_lines, 4)[0] == [ids[:4] for ids in tok.src.encode(src_lines)]
        tgt_ids = tok.encode_tgt(tgt_lines)
        assert tgt_ids == tok.tgt.encode(tgt_lines)
        assert tok.decode_tgt(tgt_ids) == tok.tgt.decode(tgt_ids) == tgt_lines
    everything = list(range(max(tok.src_vocab_size, tok.tgt_vocab_size)))
    assert tok.src_pieces(everything[: tok.src_vocab_size]) == [
        tok.src.id_to_piece(i) for i in everything[: tok.src_vocab_size]
    ]
    assert tok.tgt_pieces(everything[: tok.tgt_vocab_size]) == [
        tok.tgt.id_to_piece(i) for i in everything[: tok.tgt_vocab_size]
    ]
    if not joint:  # each side its own table
        assert tok.src_pieces(everything[4:90]) != tok.tgt_pieces(everything[4:90])


def test_filtering_is_counted(tmp_path, corpus):
    tok = build_tokenizer(tok_cfg(), corpus, tmp_path)
    odd = ParallelCorpus(
        ["ein hund", "", "ein " * 40, "ein", "mann"],
        ["a dog", "a", "a " * 40, "", "man " * 9],
        "test",
    )
    encoded, report = encode_corpus(tok, odd, max_len=20, max_ratio=3.0)
    assert (report.kept, report.empty, report.too_long, report.bad_ratio) == (1, 2, 1, 1)
    assert encoded.line_numbers.tolist() == [1]
    assert "dropped 2 with an empty side" in str(report)


def test_token_batches_respect_budget_and_cover_everything():
    rng = np.random.default_rng(0)
    src_lens, tgt_lens = rng.integers(1, 60, 2000), rng.integers(1, 60, 2000)
    batches = token_batches(src_lens, tgt_lens, 1000, np.random.default_rng(1))
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(2000))
    for b in batches:
        assert len(b) * max((src_lens[b] + 1).max(), (tgt_lens[b] + 1).max()) <= 1000
    # deterministic for a seed, different for another
    again = token_batches(src_lens, tgt_lens, 1000, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))
    other = token_batches(src_lens, tgt_lens, 1000, np.random.default_rng(2))
    assert not all(np.array_equal(a, b) for a, b in zip(batches, other))


def test_token_batches_pad_little_on_both_sides():
    """Source and target lengths of translations go together: a batch is tight on both sides
    (sorting by the target alone left 17% of Multi30k's source positions padding)."""
    rng = np.random.default_rng(0)
    src_lens = rng.integers(1, 60, 4000)
    tgt_lens = np.clip(src_lens + rng.integers(-4, 5, 4000), 1, None)
    batches = token_batches(src_lens, tgt_lens, 1000, np.random.default_rng(1))
    for lens in (src_lens + 1, tgt_lens + 1):
        padded = sum(len(b) * lens[b].max() for b in batches)
        assert padded < 1.06 * lens.sum()


def test_token_batches_are_maximal_runs_of_the_length_order():
    """Each batch takes sentences in length order until the next one would break the budget."""
    rng = np.random.default_rng(0)
    src_lens, tgt_lens = rng.integers(1, 60, 3000), rng.integers(1, 60, 3000)
    batches = token_batches(src_lens, tgt_lens, 1000)  # no rng: in length order, not shuffled
    cost = np.maximum(src_lens, tgt_lens) + 1
    assert np.array_equal(np.concatenate(batches), length_order(src_lens + 1, tgt_lens + 1))
    for batch, following in zip(batches, batches[1:]):
        grown = np.append(batch, following[0])
        assert len(grown) * cost[grown].max() > 1000


def test_a_sentence_over_the_budget_gets_its_own_batch():
    batches = token_batches([5, 500, 5], [5, 5, 5], 100)
    assert sorted(len(b) for b in batches) == [1, 2]


def test_collate_adds_bos_eos_and_padding(tmp_path, corpus):
    tok = build_tokenizer(tok_cfg(), corpus, tmp_path)
    encoded, _ = encode_corpus(tok, ParallelCorpus(["ein hund", "mann"], ["a dog runs", "man"], "t"))
    batch = collate(encoded, [0, 1])
    y0, y1 = encoded.tgt[0].tolist(), encoded.tgt[1].tolist()
    assert batch.tgt_in[0].tolist() == [BOS] + y0
    assert batch.tgt_out[0].tolist() == y0 + [EOS]
    assert batch.tgt_out[1].tolist() == y1 + [EOS] + [PAD] * (len(y0) - len(y1))
    assert batch.src[0, len(encoded.src[0])] == EOS
    assert batch.num_tgt_tokens == len(y0) + len(y1) + 2


def test_collate_equals_padding_one_sentence_at_a_time():
    rng = np.random.default_rng(0)
    seqs = [rng.integers(4, 100, rng.integers(1, 30)).tolist() for _ in range(200)]
    corpus = EncodedCorpus(Ragged.from_lists(seqs), Ragged.from_lists(seqs[::-1]), np.arange(1, 201))
    indices = rng.permutation(200)[:57]
    batch = collate(corpus, indices)
    targets = [seqs[::-1][i] for i in indices]
    assert torch.equal(batch.src, pad_sequences([seqs[i] for i in indices], suffix=[EOS]))
    assert torch.equal(batch.tgt_in, pad_sequences(targets, prefix=[BOS]))
    assert torch.equal(batch.tgt_out, pad_sequences(targets, suffix=[EOS]))
    assert batch.num_tgt_tokens == sum(len(t) + 1 for t in targets)


def test_ragged_arrays_round_trip_select_and_memory_map(tmp_path):
    seqs = [[5, 6, 7], [], [8], [9, 10]]
    ragged = Ragged.from_lists(seqs)
    assert [ragged[i].tolist() for i in range(len(ragged))] == seqs
    kept = ragged.select(np.array([True, False, False, True]))
    assert [kept[i].tolist() for i in range(len(kept))] == [[5, 6, 7], [9, 10]]
    ragged.save(tmp_path / "r")
    loaded = Ragged.load(tmp_path / "r")
    assert isinstance(loaded.values, np.memmap) and loaded[3].tolist() == [9, 10]


def said_by_the_tokenizer(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mt.data.tokenizer"]


def test_a_vocabulary_the_text_cannot_fill_is_said(tmp_path, corpus, caplog):
    """sentencepiece stops where the text offers no more pieces (a smaller vocabulary, not an error): the log
    says how many it made against how many were asked for."""
    with caplog.at_level(logging.WARNING, logger="mt.data.tokenizer"):
        fits = build_tokenizer(tok_cfg(vocab_size=60), corpus, tmp_path / "fits")
    assert fits.src_vocab_size == 60 and not said_by_the_tokenizer(caplog)  # raw_text names the lowercase corpus
    with caplog.at_level(logging.WARNING, logger="mt.data.tokenizer"):
        short = build_tokenizer(tok_cfg(vocab_size=50_000), corpus, tmp_path / "short")
    assert short.src_vocab_size < 50_000
    said = f"tokenizer: {short.src_vocab_size:,} pieces, fewer than tokenizer.vocab_size=50,000 asks for"
    assert said_by_the_tokenizer(caplog) == [f"{said}: the training text holds no more"]
