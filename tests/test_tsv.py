"""A corpus as one tab-separated file per split: its columns named by a header, data.columns or the file's
name; read raw (quotes are characters); every line checked for a field per column; streamed for training
as two files are."""

import hashlib

import pytest
from hydra import compose, initialize_config_dir

from mt.config.schema import CONFIG_DIR, register_configs
from mt.data import tsv_files
from mt.data.prepare import prepare
from mt.data.sources import load_files, split_files
from mt.data.text_files import AlignedTextFiles, scan_file
from mt.data.tsv_files import TsvFile, load_tsv, tsv_layout
from mt.errors import MTError

from conftest import TINY_TRAIN, make_pairs, write_corpus

# what a sentence may hold: quotes (no CSV quoting), a carriage return, a line separator, a NUL
AWKWARD = ['"Hallo", sagte er.', "zwei\u2028Häuser\r", '"', "drei\x00Häuser", "ende"]


def pairs_with_awkward_text(n: int, seed: int) -> list[tuple[str, str]]:
    return [(f"{s} {AWKWARD[i % len(AWKWARD)]}", t) for i, (s, t) in enumerate(make_pairs(n, seed))]


def write_tsv(path, rows, header=None, bom=False):
    text = "".join("\t".join(row) + "\n" for row in ([header] if header else []) + rows)
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode("utf-8"))
    return path


def test_a_tsv_file_reads_as_the_two_files_of_its_columns(tmp_path):
    pairs = pairs_with_awkward_text(50, seed=3)
    path = write_tsv(tmp_path / "train.tsv", [(t, s, "CC-BY") for s, t in pairs], header=("en", "de", "note"), bom=True)
    (tmp_path / "two").mkdir()
    for side, lang in ((0, "de"), (1, "en")):
        (tmp_path / "two" / f"train.{lang}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    streamed = TsvFile(tsv_layout(path, None, "de", "en"), sample_size=1000, shard_lines=8)
    files = AlignedTextFiles(tmp_path / "two" / "train.de", tmp_path / "two" / "train.en", "train", 1000, 8)
    assert len(streamed) == 50 and streamed.shards == files.shards == 7
    assert [streamed.shard(i) for i in range(7)] == [files.shard(i) for i in range(7)]
    assert streamed.tokenizer_sample() == files.tokenizer_sample()  # all fits the sample: every line, in order
    assert streamed.tokenizer_sample("tgt") == [t for _, t in pairs]
    assert streamed.in_memory().src == [s for s, _ in pairs] == load_files(str(tmp_path), "train", "de", "en").src
    assert streamed.origin == f"{path}[de,en]"
    reversed_direction = load_files(str(tmp_path), "train", "en", "de")
    assert reversed_direction.src == [t for _, t in pairs] and reversed_direction.tgt == [s for s, _ in pairs]
    other = TsvFile(tsv_layout(path, None, "en", "de"), 1000, 8)
    assert other.digest() != streamed.digest()  # other columns read: other text


def test_columns_are_named_by_the_header_data_columns_or_the_files_name(tmp_path):
    rows = [("a dog", "ein hund", "x"), ("a cat", "eine katze", "y")]
    write_tsv(tmp_path / "train.tsv", rows)  # no header
    with pytest.raises(MTError, match=r"train\.tsv: no header naming its columns: .*data\.columns=\[de,en\]"):
        load_files(str(tmp_path), "train", "de", "en")
    named = load_files(str(tmp_path), "train", "de", "en", columns=["en", "de", "note"])
    assert (named.src, named.tgt) == (["ein hund", "eine katze"], ["a dog", "a cat"])  # the note left out
    with pytest.raises(MTError, match=r"train\.tsv: no column 'fr' \(columns: en, de, note\)"):
        load_files(str(tmp_path), "train", "fr", "en", columns=["en", "de", "note"])

    write_tsv(tmp_path / "valid.tsv", [r[:2] for r in rows], header=("en", "de"))  # a header, CRLF ending
    (tmp_path / "valid.tsv").write_bytes((tmp_path / "valid.tsv").read_bytes().replace(b"de\n", b"de\r\n", 1))
    assert load_files(str(tmp_path), "valid", "de", "en").tgt == ["a dog", "a cat"]  # the header is not a pair
    with pytest.raises(MTError, match=r"valid\.tsv:1: the header names en, de but data\.columns=\[de,en\]"):
        load_files(str(tmp_path), "valid", "de", "en", columns=["de", "en"])

    write_tsv(tmp_path / "test.en-de.tsv", [r[:2] for r in rows])  # the pair in the name gives the order
    assert load_files(str(tmp_path), "test", "de", "en").src == ["ein hund", "eine katze"]
    write_tsv(tmp_path / "test.tsv", [("wrong", "wrong")])
    assert split_files(tmp_path, "test", "de", "en").path.name == "test.en-de.tsv"  # a pair-named file wins
    for lang in ("de", "en"):  # and files of one language each win over any .tsv
        (tmp_path / f"test.{lang}").write_text(f"{lang} line\n")
    assert load_files(str(tmp_path), "test", "de", "en").src == ["de line"]
    with pytest.raises(MTError, match=r"nothing\.de: no such file \(nor .*nothing\.tsv, .*nothing\.tmx\)"):
        load_files(str(tmp_path), "nothing", "de", "en")


def test_a_line_without_a_field_per_column_is_one_line_naming_it(tmp_path):
    rows = [(f"ein hund {i}", f"a dog {i}") for i in range(30)]
    rows[22] = ("ein hund\tmit tab", "a dog")  # a stray tab would shift the pair
    path = write_tsv(tmp_path / "train.tsv", rows, header=("de", "en"))
    layout = tsv_layout(path, None, "de", "en")
    with pytest.raises(MTError, match=r"train\.tsv:24: 3 tab-separated fields, expected 2 \(de, en\)"):
        TsvFile(layout, 100, 8)
    for block_bytes in (16, 1 << 20):  # the file's line number, whichever block holds the line
        with pytest.raises(MTError, match=r"train\.tsv:24: 3 tab-separated fields"):
            scan_file(path, 8, 10, 1, hashlib.sha256(), block_bytes, layout.start, 1, layout.check)
    with pytest.raises(MTError, match=r"train\.tsv:24: 3 tab-separated fields"):
        load_tsv(layout)
    path.write_bytes(path.read_bytes().replace(b"\tmit tab", b""))
    scanned = TsvFile(tsv_layout(path, None, "de", "en"), 100, 8)
    path.write_bytes(path.read_bytes().replace(b"hund 3", b"hund\t3"))  # same size: seen when read
    with pytest.raises(MTError, match=r"train\.tsv: changed while in use \(shard 0 is not 2 fields a line\)"):
        scanned.shard(0)
    path.write_bytes(path.read_bytes().replace(b"hund\t3", b"hund 3") + b"\n")  # an empty last line: 1 field
    with pytest.raises(MTError, match=r"train\.tsv:32: 1 tab-separated field, expected 2"):
        TsvFile(layout, 100, 8)
    path.write_bytes(path.read_bytes()[:-1].replace(b"a dog 7", b"a d\xe9g 7"))
    with pytest.raises(MTError, match=r"train\.tsv:9: invalid UTF-8 \(byte 0xe9\)"):
        TsvFile(layout, 100, 8)
    write_tsv(path, [], header=("de", "en"))
    with pytest.raises(MTError, match=r"train\.tsv: empty corpus"):
        TsvFile(tsv_layout(path, None, "de", "en"), 100, 8)


def test_a_tsv_scan_is_kept_until_its_file_changes(tmp_path, monkeypatch):
    path = write_tsv(tmp_path / "train.tsv", [(s, t) for s, t in make_pairs(30, 2)], header=("de", "en"))
    first = TsvFile(tsv_layout(path, None, "de", "en"), 1000, 8, cache_dir=str(tmp_path))
    monkeypatch.setattr(tsv_files, "scan_file", lambda *a, **k: pytest.fail("scanned again"))
    again = TsvFile(tsv_layout(path, None, "de", "en"), 1000, 8, cache_dir=str(tmp_path))
    assert again.digest() == first.digest() and [again.shard(i) for i in range(4)] == [first.shard(i) for i in range(4)]
    monkeypatch.undo()
    assert again.tokenizer_sample() == first.tokenizer_sample()  # the sample needs the scan: done now
    path.write_text(path.read_text().replace("dog", "cat"))
    assert TsvFile(tsv_layout(path, None, "de", "en"), 1000, 8, cache_dir=str(tmp_path)).digest() != first.digest()


def test_a_run_on_tsv_files_prepares_what_it_prepares_from_two_files(tmp_path):
    """data=files with a .tsv per split (data.columns for a file without a header): the same training
    text, tokenizer and valid/test pairs as the same corpus in a file per language."""
    two = write_corpus(tmp_path / "two", {"train": 200, "valid": 10, "test": 10})
    tsv = tmp_path / "tsv"
    tsv.mkdir()
    for split in ("train", "valid", "test"):
        de, en = ((two / f"{split}.{lang}").read_text().splitlines() for lang in ("de", "en"))
        write_tsv(tsv / f"{split}.tsv", list(zip(en, de)))
    register_configs()

    def prepared(folder, *overrides):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            cfg = compose("config", overrides=["data=files", f"data.dir={folder}", *TINY_TRAIN, *overrides])
        return prepare(cfg, tmp_path / f"run_{folder.name}", write_config=False)

    a, b = prepared(two), prepared(tsv, "data.columns=[en,de]")
    assert [b.train.shard(i) for i in range(b.train.shards)] == [a.train.shard(i) for i in range(a.train.shards)]
    assert (b.valid.src, b.valid.tgt) == (a.valid.src, a.valid.tgt)
    assert (b.tests["de-en"].src, b.tests["de-en"].tgt) == (a.tests["de-en"].src, a.tests["de-en"].tgt)
    assert b.tokenizer.src.serialized_model_proto() == a.tokenizer.src.serialized_model_proto()
    with pytest.raises(MTError, match=r"config data\.columns: must name each column .* once"):
        prepared(tsv, "data.columns=[en,en]")


def test_a_folder_of_tsv_files_read_through_datasets_is_warned_of(tmp_path, monkeypatch, caplog):
    """datasets reads .tsv as CSV (quotes parsed and dropped): data=hub on such a folder points to data=files."""
    import sys
    import types

    from mt.data.sources import _load_hub_dataset

    write_tsv(tmp_path / "train.tsv", [('"Hallo", sagte er.', '"Hello," he said.')], header=("de", "en"))
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=lambda *a: {"train": []}))
    with caplog.at_level("WARNING"):
        _load_hub_dataset(str(tmp_path), None)
    assert f"for raw tab-separated text, data=files data.dir={tmp_path}" in caplog.text
    caplog.clear()
    (tmp_path / "train.tsv").rename(tmp_path / "train.csv")
    _load_hub_dataset(str(tmp_path), None)
    assert not caplog.text


def test_data_columns_over_files_of_one_language_each_is_said_unused(tmp_path, caplog):
    """data.columns reads .tsv files; given for a corpus of train.de and train.en it does nothing, and says so."""
    from omegaconf import OmegaConf

    from mt.config.schema import DataConfig
    from mt.data.prepare import load_training_split

    corpus = write_corpus(tmp_path / "c", {"train": 20})
    data = OmegaConf.structured(DataConfig(source="files", dir=str(corpus), cache_dir=None))
    with caplog.at_level("WARNING"):
        load_training_split(data, 100)
    assert not caplog.records
    data.columns = ["de", "en"]
    with caplog.at_level("WARNING"):
        assert len(load_training_split(data, 100)) == 20
    assert [r.getMessage() for r in caplog.records] == [
        f"data.columns is for .tsv files; the training split is {corpus}/train.{{de,en}}, a file per language: unused"
    ]
