"""Reading corpora: every way a file can be wrong is a clear error naming it; lines never shift."""

import bz2
import gzip
import lzma
import os
import re
import sys
import threading

import pytest

from mt import hub
from mt.config.schema import DataConfig
from mt.data import compressed, lines
from mt.data import sources as data
from mt.data.lines import count_lines, open_for_writing, read_line_chunks, read_lines
from mt.data.prepare import load_training_split
from mt.data.sources import load_files, load_split
from mt.errors import MTError

# Both ways a split is read from files: loaded (valid and test), or scanned in blocks (the training split).
LOADERS = {
    "loaded": lambda folder, split: load_files(str(folder), split, "de", "en"),
    "scanned": lambda folder, split: load_training_split(
        DataConfig(source="files", dir=str(folder), train_split=split, cache_dir=str(folder / "cache")), sample_size=100
    ),
}


def write(path, content: bytes):
    path.write_bytes(content)
    return path


def test_lines_split_on_newline_only(tmp_path):
    odd = "a\rb|c\u2028d|e\x0cf|g\x85h|\ufeffi|nul\x00here|tab\there| |".replace("|", "\n")
    path = write(tmp_path / "x.txt", odd.encode())
    lines = read_lines(path)
    assert lines == ["a\rb", "c\u2028d", "e\x0cf", "g\x85h", "\ufeffi", "nul\x00here", "tab\there", " "]


def test_last_line_without_newline_and_bom(tmp_path):
    assert read_lines(write(tmp_path / "a", b"\xef\xbb\xbfone\n\ntwo")) == ["one", "", "two"]
    assert read_lines(write(tmp_path / "b", b"")) == []


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: None, "no such file"),
        (
            lambda d: write(d / "train.fr", b"bon\n"),
            r"train\.de: no such file; the folder has train\.en, train\.fr: data\.src_lang and data\.tgt_lang name",
        ),
        (lambda d: (d / "train.de").mkdir(), "is a directory"),
        (lambda d: write(d / "train.de", b"gut\nnicht \xc3\x28 gut\n"), "train.de:2: invalid UTF-8"),
        (lambda d: write(d / "train.de", b"\x00\x01\x02\x00" * 100), "binary file"),
        (
            lambda d: write(d / "train.de", "gut\nnicht gut\n".encode("utf-16")),  # a byte-order mark first
            r"train\.de: UTF-16 text, expected UTF-8 \(convert it: iconv -f UTF-16 -t UTF-8\)",
        ),
        (
            lambda d: write(d / "train.de.gz", gzip.compress(b"gut\nnicht \xc3\x28 gut\n")),
            "train.de.gz:2: invalid UTF-8",
        ),
        (lambda d: write(d / "train.de.xz", lzma.compress(b"gut\n")[:-8]), r"train\.de\.xz: cannot decompress it"),
    ],
)
@pytest.mark.parametrize("loader", LOADERS)
def test_file_errors_name_the_file(tmp_path, setup, message, loader):
    setup(tmp_path)
    (tmp_path / "train.en").write_text("good\n")
    with pytest.raises(MTError, match=message) as err:
        LOADERS[loader](tmp_path, "train")
    assert "train.de" in str(err.value) and "\n" not in str(err.value)


def test_a_compressed_file_is_read_as_its_text_and_text_that_begins_as_one_is_text(tmp_path, monkeypatch):
    """What translate, mt-evaluate and mt-score read (read_lines, read_line_chunks, count_lines)."""
    assert read_lines(write(tmp_path / "a", b"BZh, said the bee.\n")) == ["BZh, said the bee."]
    text = "Bienen summen.\n\nZwei\r Zeilen\n" * 50
    packed = write(tmp_path / "b.bz2", bz2.compress(text.encode()))
    assert read_lines(packed) == text.split("\n")[:-1] == [line for c in read_line_chunks(packed, 7) for line in c]
    assert count_lines(packed) == 150 == count_lines(write(tmp_path / "b.gz", gzip.compress(text.encode())))
    truncated = write(tmp_path / "t.gz", gzip.compress(text.encode())[:-20])
    for read in (read_lines, count_lines, lambda p: list(read_line_chunks(p, 10))):
        with pytest.raises(MTError, match=r"t\.gz: cannot decompress it \(") as err:
            read(truncated)
        assert "\n" not in str(err.value)
    with pytest.raises(MTError, match=r"u\.gz:2: invalid UTF-8"):
        read_lines(write(tmp_path / "u.gz", gzip.compress(b"gut\n\xc3\x28\n")))
    with pytest.raises(MTError, match=r"c: no such file, but c\.xz is: give its name \(it is read as it is\)"):
        read_lines(write(tmp_path / "c.xz", lzma.compress(b"text\n")).with_suffix(""))
    monkeypatch.setattr(lines, "decompressor", lambda kind: None)  # zstd before Python 3.14, without zstandard
    with pytest.raises(MTError, match=r"z: zstd-compressed, which this Python cannot read: decompress it first"):
        read_lines(write(tmp_path / "z", b"\x28\xb5\x2f\xfd\x00\xff\xfe"))


@pytest.mark.parametrize("packed", [False, True], ids=["text", "gzip"])
def test_a_pipe_is_read_as_a_file_is(tmp_path, packed):
    """A named pipe (the shell's <(command) gives one): sniffed for compression without seeking."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text = "Bienen summen.\n\nZwei Zeilen\n" * 3000  # more than one read's worth
    data = gzip.compress(text.encode()) if packed else text.encode()
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    try:
        assert [line for chunk in read_line_chunks(fifo, 1000) for line in chunk] == text.split("\n")[:-1]
    finally:
        writer.join(timeout=30)


def test_an_output_is_compressed_as_its_name_says_and_read_back_as_its_text(tmp_path, monkeypatch):
    """What translate -o, mt-evaluate --output and mt-score --output write."""
    text = ["Bienen summen.", "", "Zwei\r Zeilen \u2028 eine"]
    for name, unpack in [("o.gz", gzip.decompress), ("o.xz", lzma.decompress), ("o.bz2", bz2.decompress)]:
        with open_for_writing(tmp_path / name) as f:
            f.write("".join(line + "\n" for line in text))
        assert unpack((tmp_path / name).read_bytes()).decode() == "".join(line + "\n" for line in text)
        assert read_lines(tmp_path / name) == text
    with open_for_writing(tmp_path / "o.txt") as f:
        f.write("a\nb\n")
    assert (tmp_path / "o.txt").read_bytes() == b"a\nb\n"
    monkeypatch.setitem(sys.modules, "compression", None)  # no zstd writer: neither Python 3.14's nor zstandard
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(MTError, match=r"o\.zst: writing zstd needs Python 3\.14 or the zstandard package"):
        open_for_writing(tmp_path / "o.zst")
    assert not (tmp_path / "o.zst").exists()


@pytest.mark.parametrize("loader", LOADERS)
def test_compressed_files_are_read_as_the_text_they_hold(tmp_path, loader, monkeypatch):
    de, en = ["Ein Hund läuft.", "", "Zwei\tKatzen"], ["A dog runs.", "(empty)", "Two cats"]
    write(tmp_path / "train.de.gz", gzip.compress("\n".join(de).encode()))  # no newline after the last line
    write(tmp_path / "train.en", bz2.compress(("\n".join(en) + "\n").encode()))  # compressed, named as text
    corpus = LOADERS[loader](tmp_path, "train")
    assert (corpus.in_memory() if loader == "scanned" else corpus).src == de
    assert (corpus.in_memory() if loader == "scanned" else corpus).tgt == en
    write(tmp_path / "train.de.gz", gzip.compress("\n".join(de[::-1]).encode()))  # changed: decompressed again
    corpus = LOADERS[loader](tmp_path, "train")
    assert (corpus.in_memory() if loader == "scanned" else corpus).src == de[::-1]
    rows = "de\ten\n" + "".join(f"{s}\t{t}\n" for s, t in zip(de[:2], en[:2]))
    write(tmp_path / "valid.de-en.tsv.xz", lzma.compress(rows.encode()))
    assert load_files(str(tmp_path), "valid", "de", "en").tgt == en[:2]  # streamed: no cache
    if loader == "scanned":  # training seeks: a copy in the cache
        assert len(list((tmp_path / "cache" / "decompressed").iterdir())) == 3  # train.de.gz twice, train.en
        with pytest.raises(MTError, match=r"train.de.gz: gzip-compressed: reading it needs data.cache_dir .*gunzip -k"):
            load_training_split(DataConfig(source="files", dir=str(tmp_path), cache_dir=None), sample_size=100)
        monkeypatch.setattr(compressed, "decompressor", lambda kind: None)  # zstd before 3.14, without zstandard
        write(tmp_path / "train.de", b"\x28\xb5\x2f\xfd\x00\xff\xfe")  # plain names win
        write(tmp_path / "train.en", b"x\n")
        with pytest.raises(MTError, match=r"train.de: zstd-compressed, which this Python cannot read: decompress it"):
            LOADERS[loader](tmp_path, "train")


@pytest.mark.parametrize("loader", LOADERS)
def test_line_count_mismatch_and_empty_corpus(tmp_path, loader):
    (tmp_path / "train.de").write_text("a\nb\n")
    (tmp_path / "train.en").write_text("a\n")
    with pytest.raises(MTError, match=r"train.de has 2 lines but .*train.en has 1"):
        LOADERS[loader](tmp_path, "train")
    (tmp_path / "train.de").write_text("a\n")
    (tmp_path / "train.en").write_text("a\nb\nc\n")
    with pytest.raises(MTError, match=r"train.de has 1 line but .*train.en has 3"):  # not "1 lines"
        LOADERS[loader](tmp_path, "train")
    (tmp_path / "train.de").write_text("a\nb\n")
    (tmp_path / "train.en").write_text("a\nb\n")
    assert len(LOADERS[loader](tmp_path, "train")) == 2
    (tmp_path / "valid.de").write_text("")
    (tmp_path / "valid.en").write_text("")
    with pytest.raises(MTError, match="empty corpus"):
        LOADERS[loader](tmp_path, "valid")


@pytest.mark.parametrize("loader", LOADERS)
def test_missing_data_dir(tmp_path, loader):
    with pytest.raises(MTError, match="no such directory"):
        LOADERS[loader](tmp_path / "nope", "train")
    (tmp_path / "train.de").write_text("gut\n")  # the file named where its folder belongs
    with pytest.raises(MTError, match=r"train\.de: is a file, expected the folder of the corpus's files"):
        LOADERS[loader](tmp_path / "train.de", "train")


def test_hub_offline_fails_fast_with_a_hint(monkeypatch):
    monkeypatch.setattr(hub, "reachable", lambda timeout=3.0: False)
    monkeypatch.setattr(data, "_hub_cache", {})
    cfg = DataConfig(source="hub", name="someone/not-cached-anywhere-xyz")
    with pytest.raises(MTError, match="data=files data.dir="):
        load_split(cfg, "train")


def test_local_hugging_face_dataset_folder(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(data, "_hub_cache", {})
    saved = tmp_path / "saved"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"de": ["ein hund", "eine katze"], "en": ["a dog", "a cat"]}),
            "validation": datasets.Dataset.from_dict({"de": ["ein"], "en": ["a"]}),
        }
    ).save_to_disk(str(saved))
    corpus = load_split(DataConfig(source="hub", name=str(saved)), "train")
    assert corpus.src == ["ein hund", "eine katze"] and corpus.tgt == ["a dog", "a cat"]
    with pytest.raises(MTError, match="no split 'test'"):
        load_split(DataConfig(source="hub", name=str(saved)), "test")
    with pytest.raises(MTError, match="no column 'fr'"):
        load_split(DataConfig(source="hub", name=str(saved), tgt_lang="fr"), "train")

    # a "translation" column, as in wmt14, from a folder of JSON-lines files
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.jsonl").write_text('{"translation": {"de": "hallo", "en": "hello"}}\n')
    corpus = load_split(DataConfig(source="hub", name=str(raw)), "train")
    assert (corpus.src, corpus.tgt) == (["hallo"], ["hello"])


@pytest.mark.parametrize("layout", ["columns", "translation"])
def test_a_hub_training_split_is_read_in_slices_as_it_would_be_loaded(tmp_path, monkeypatch, layout):
    """The training split from the Arrow table, a slice at a time: the lines, shards, digest and tokenizer
    sample of the same split loaded whole; a uniform sample of each side when it is bigger than the sample."""
    import datasets

    from mt.data import hub_split

    monkeypatch.setattr(data, "_hub_cache", {})
    monkeypatch.setattr(hub_split, "SLICE_ROWS", 7)
    de = [f"satz {i}" if i % 9 else None for i in range(40)]  # a missing value is an empty line
    en = [f"sentence {i}" for i in range(40)]
    pairs = [{"de": d, "en": e} for d, e in zip(de, en)]
    rows = {"de": de, "en": en} if layout == "columns" else {"translation": pairs}
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "saved"))
    cfg = DataConfig(source="hub", name=str(tmp_path / "saved"), shard_lines=15)
    loaded, sliced = load_split(cfg, "train"), load_training_split(cfg, sample_size=100)
    assert isinstance(sliced, hub_split.HubSplit) and sliced.shards == 3 and len(sliced) == 40
    assert sliced.digest() == loaded.digest() and sliced.tokenizer_sample() == loaded.src + loaded.tgt
    assert [line for i in range(3) for line in sliced.shard(i)[0]] == loaded.src
    assert sliced.in_memory().tgt == loaded.tgt and loaded.src[0] == ""
    sample = load_training_split(cfg, sample_size=5).tokenizer_sample("tgt")
    assert len(set(sample)) == 5 and set(sample) <= set(en)


def test_a_vocabulary_too_small_for_the_texts_characters_is_one_line_naming_the_setting():
    from omegaconf import OmegaConf

    from mt.config.schema import TokenizerConfig
    from mt.data.tokenizer import train_sentencepiece

    lines = [f"{chr(0x4E00 + i)}{chr(0x4E00 + i + 1)} ab" for i in range(300)]  # ~300 distinct characters
    cfg = OmegaConf.structured(TokenizerConfig(vocab_size=300, byte_fallback=False))
    with pytest.raises(MTError) as error:
        train_sentencepiece(lines, cfg)
    said = str(error.value)
    assert said.startswith("tokenizer.vocab_size=300: the training text's characters (character_coverage 1)")
    needed = int(said.split(" take ")[1].split(";")[0])
    assert needed > 300 and "\n" not in said
    assert train_sentencepiece(lines, OmegaConf.structured(TokenizerConfig(vocab_size=needed, byte_fallback=False)))


def test_utf16_text_is_named_on_stdin_and_in_memory_too(monkeypatch):
    """UTF-16 (as Windows tools write it) is told as such wherever text is read, not as a bad byte 0xff."""
    import io
    import types

    said = "UTF-16 text, expected UTF-8 (convert it: iconv -f UTF-16 -t UTF-8)"
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO("ein hund\n".encode("utf-16"))))
    with pytest.raises(MTError, match=rf"^<stdin>: {re.escape(said)}$"):
        next(read_line_chunks(None, 10))
    with pytest.raises(MTError, match=rf"^request: {re.escape(said)}$"):
        lines.decode_utf8("ein hund\n".encode("utf-16"), "request")
    # a 0xff elsewhere is a bad byte on its line
    with pytest.raises(MTError, match=r"^request:2: invalid UTF-8 \(byte 0xff\)$"):
        lines.decode_utf8(b"gut\n\xff\xfe\n", "request")
