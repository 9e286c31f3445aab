"""Several training corpora trained on as one (data.train_split=[a,b]): read in order across shard
boundaries, identified as a whole, sampled for the tokenizer in proportion, tagged where asked
(data.tagged_splits), and refused one line at a time."""

import re
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from mt.checkpoint import load_checkpoint
from mt.config.schema import DataConfig
from mt.data.concatenation import TAG, Concatenation
from mt.data.corpus import ParallelCorpus
from mt.data.prepare import load_training_split
from mt.data.text_files import AlignedTextFiles
from mt.data.tokenizer import UNK, Tokenizer

from conftest import make_pairs, train_tiny, write_corpus


def text_files(folder: Path, name: str, pairs, shard_lines: int) -> AlignedTextFiles:
    folder.mkdir(parents=True, exist_ok=True)
    for side, lang in ((0, "de"), (1, "en")):
        (folder / f"{name}.{lang}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    return AlignedTextFiles(folder / f"{name}.de", folder / f"{name}.en", name, 1000, shard_lines)


def three_parts(tmp_path, shard_lines=5):
    pairs = [make_pairs(13, seed=1), make_pairs(3, seed=2), make_pairs(9, seed=3)]
    parts = [
        text_files(tmp_path, "a", pairs[0], shard_lines),
        ParallelCorpus([s for s, _ in pairs[1]], [t for _, t in pairs[1]], "b", shard_lines=shard_lines),
        text_files(tmp_path, "c", pairs[2], shard_lines),
    ]
    return parts, [p for part in pairs for p in part]


def test_a_concatenation_reads_every_line_of_its_parts_in_order_across_shard_boundaries(tmp_path):
    parts, pairs = three_parts(tmp_path)
    whole = Concatenation(parts, sample_size=1000)
    assert len(whole) == 25 and whole.shards == 5 and whole.origin == "a + b + c"
    shards = [whole.shard(i) for i in range(whole.shards)]
    assert [len(src) for src, _ in shards] == [5] * 5 and all(len(s) == len(t) for s, t in shards)
    assert [line for src, _ in shards for line in src] == [s for s, _ in pairs]
    assert [line for _, tgt in shards for line in tgt] == [t for _, t in pairs]
    memory = whole.in_memory()
    assert (memory.src, memory.tgt, memory.digest()) == ([s for s, _ in pairs], [t for _, t in pairs], whole.digest())


def test_a_concatenation_is_identified_by_its_parts_and_their_order(tmp_path):
    parts, _ = three_parts(tmp_path)
    digest = Concatenation(parts, 1000).digest()
    assert digest == Concatenation(three_parts(tmp_path)[0], 1000).digest()
    assert digest != Concatenation(parts[::-1], 1000).digest() != Concatenation(parts[:2], 1000).digest()
    assert digest not in {part.digest() for part in parts}


def test_the_tokenizer_sample_takes_each_corpus_in_proportion_to_its_length(tmp_path):
    parts, pairs = three_parts(tmp_path)
    assert Concatenation(parts, 1000).tokenizer_sample() == [s for s, _ in pairs] + [t for _, t in pairs]
    small = Concatenation(parts, sample_size=10)
    src = small.tokenizer_sample("src")
    shares = [round(10 * len(part) / 25) for part in parts]  # 5, 1, 4
    begin = 0
    for part, share in zip(parts, shares):
        drawn = src[begin : begin + share]
        assert len(drawn) == share and set(drawn) <= set(part.tokenizer_sample("src"))
        begin += share
    assert len(src) == sum(shares) and small.tokenizer_sample("src") == src  # seeded: the same draw again
    assert small.tokenizer_sample() == src + small.tokenizer_sample("tgt")


def test_mt_train_trains_on_several_splits_as_one_corpus(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 200, "valid": 20})
    write_corpus(tmp_path / "elsewhere", {"synthetic": 120})  # a split named by its path from data.dir
    run = tmp_path / "run"
    # shards of 50 lines (one spans the two parts), pools of two: the rest encoded by the background encoder
    cached = [f"data.cache_dir={tmp_path / 'cache'}", "data.shard_lines=50", "data.pool_pairs=100"]
    train_tiny(
        corpus,
        run,
        "data.train_split=[train,../elsewhere/synthetic]",
        "data.test_split=null",
        "train.max_steps=12",
        *cached,
    )
    log = (run / "train.log").read_text()
    assert "data: train 320, valid 20" in log and "train.{de,en} + " in log and "elsewhere/synthetic.{de,en}" in log
    assert "train: all 7 shards encoded" in log and "step 10 |" in log
    assert list(OmegaConf.load(run / "config.yaml").data.train_split) == ["train", "../elsewhere/synthetic"]
    again = train_tiny(corpus, run, "data.test_split=null", "train.max_steps=3", check=False)
    said = again.stdout + again.stderr
    assert again.returncode == 2 and "holds another run" in said and "data.train_split" in said


@pytest.mark.parametrize(
    ("split", "error"),
    [
        ("[train,missing]", r"missing\.de: no such file"),
        ("[]", "config data.train_split: must be a split's name or a list of them"),
        ("[train,'']", "config data.train_split: must be a split's name or a list of them"),
        ("train data.tagged_splits=[bt]", r"config data.tagged_splits: 'bt' is not one of data.train_split \(train\)"),
    ],
)
def test_a_bad_training_split_is_one_line(tmp_path, split, error):
    corpus = write_corpus(tmp_path / "corpus", {"train": 50, "valid": 10})
    result = train_tiny(
        corpus, tmp_path / "run", *f"data.train_split={split}".split(), "data.test_split=null", check=False
    )
    said = result.stdout + result.stderr
    assert result.returncode == 2 and "Traceback" not in said
    assert any(re.search(error, line) for line in said.splitlines()), said


def test_a_tagged_corpus_has_the_tag_before_each_source_and_nowhere_else(tmp_path):
    parts, pairs = three_parts(tmp_path)
    parts[1].src[1] = "   "  # a blank source stays blank: the pair is still dropped as empty
    plain, tagged = Concatenation(parts, 1000), Concatenation(parts, 1000, tags=["", TAG, ""])
    memory = tagged.in_memory()
    assert memory.src[:13] == plain.in_memory().src[:13] and memory.src[16:] == plain.in_memory().src[16:]
    assert memory.src[13:16] == [f"{TAG} {parts[1].src[0]}", "   ", f"{TAG} {parts[1].src[2]}"]
    assert memory.tgt == plain.in_memory().tgt
    assert tagged.digest() != plain.digest() and (tagged.source_symbols, plain.source_symbols) == ([TAG], [])
    assert "b (tagged <bt>)" in tagged.origin


def test_mt_train_tags_the_synthetic_sources_with_one_piece_of_its_own(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 200, "synthetic": 120, "valid": 20})
    run = tmp_path / "run"
    base = ["data.train_split=[train,synthetic]", "data.test_split=null", "train.max_steps=2"]
    train_tiny(corpus, run, *base, "data.tagged_splits=[synthetic]")
    tokenizer = Tokenizer.load(run / "tokenizer")
    assert tokenizer.src.piece_to_id(TAG) != UNK and tokenizer.src.encode(f"{TAG} x", out_type=str)[1] == TAG
    assert "synthetic.{de,en} (tagged <bt>)" in (run / "train.log").read_text()
    untagged = train_tiny(corpus, run, *base, check=False)  # the same run directory without the tags
    said = untagged.stdout + untagged.stderr
    assert untagged.returncode == 2 and "holds another run" in said and "data.tagged_splits" in said
    plain = tmp_path / "plain"
    train_tiny(corpus, plain, *base)
    assert Tokenizer.load(plain / "tokenizer").src.piece_to_id(TAG) == UNK  # no symbol unless a corpus is tagged


def test_a_run_saved_before_tagged_splits_existed_resumes(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 100, "valid": 10})
    run = tmp_path / "run"
    train_tiny(corpus, run, "data.test_split=null", "train.max_steps=2")
    last = run / "checkpoints" / "last.pt"
    state = load_checkpoint(last)
    del state["config"]["data"]["tagged_splits"]
    torch.save(state, last)
    train_tiny(corpus, run, "data.test_split=null", "train.max_steps=3")
    assert load_checkpoint(last)["trainer"]["progress"]["step"] == 3


def test_several_splits_of_a_dataset_are_read_as_one_corpus(tmp_path):
    import datasets

    rows = {
        name: {"de": [f"{name} satz {i}" for i in range(n)], "en": [f"{name} line {i}" for i in range(n)]}
        for name, n in (("train", 11), ("extra", 6))
    }
    saved = tmp_path / "saved"
    datasets.DatasetDict({k: datasets.Dataset.from_dict(v) for k, v in rows.items()}).save_to_disk(str(saved))
    cfg = DataConfig(
        source="hub", name=str(saved), train_split=["train", "extra"], tagged_splits=["extra"], shard_lines=4
    )
    corpus = load_training_split(cfg, sample_size=100)
    assert len(corpus) == 17 and corpus.shards == 5 and corpus.origin.endswith("[extra] (tagged <bt>)")
    memory = corpus.in_memory()
    assert memory.src == rows["train"]["de"] + [f"{TAG} {line}" for line in rows["extra"]["de"]]
    assert memory.tgt == rows["train"]["en"] + rows["extra"]["en"]


def test_a_finetune_on_tagged_pairs_says_when_its_parents_tokenizer_lacks_the_tag(trained_run, tmp_path):
    corpus = write_corpus(tmp_path / "corpus", {"train": 60, "synthetic": 40, "valid": 10})
    parent = trained_run / "checkpoints" / "final.pt"
    result = train_tiny(
        corpus,
        tmp_path / "ft",
        f"train.init_from={parent}",
        "data.train_split=[train,synthetic]",
        "data.tagged_splits=[synthetic]",
        "data.test_split=null",
        "train.max_steps=1",
    )
    assert Tokenizer.load(tmp_path / "ft" / "tokenizer").src.piece_to_id(TAG) == UNK  # the parent's, unchanged
    assert "the parent's tokenizer has no <bt> piece; the tag is spelled in pieces" in result.stdout
