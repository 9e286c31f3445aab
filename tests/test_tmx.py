"""A split given as a TMX translation memory: its units holding both languages become the pairs (variants
matched by language, inline codes left out, line breaks flattened), read once into the cache and prepared
for training as the same pairs in two files are; a file that is not TMX is one line naming where."""

import gzip
import io
import logging
from xml.sax.saxutils import escape

import pytest
from hydra import compose, initialize_config_dir

from mt.config.schema import CONFIG_DIR, register_configs
from mt.data.prepare import prepare
from mt.data.sources import load_files
from mt.data.tmx import same_language, write_pairs
from mt.errors import MTError

from conftest import TINY_TRAIN, run_cli, write_corpus


def tmx(units: list[str], version: str = "1.4") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE tmx SYSTEM "tmx14.dtd">\n'
        f'<tmx version="{version}"><header creationtool="test" srclang="de-DE" datatype="plaintext" segtype="sentence" '
        'adminlang="en" o-tmf="none"/>\n<body>\n' + "\n".join(units) + "\n</body></tmx>\n"
    )


def unit(*variants: tuple[str, str], attribute: str = "xml:lang") -> str:
    """A <tu> of (language, segment XML) variants."""
    return "<tu>" + "".join(f'<tuv {attribute}="{lang}"><seg>{seg}</seg></tuv>' for lang, seg in variants) + "</tu>"


def test_the_units_holding_both_languages_are_the_pairs(tmp_path, caplog):
    units = [
        unit(("de-DE", "Ein Hund rennt."), ("EN-gb", "A dog runs.")),
        unit(("en", "Only English."), ("fr", "Seulement.")),  # no German: left out
        unit(
            ("de_AT", "Zwei <bpt i='1'>&lt;b&gt;</bpt>rote<ept i='1'>&lt;/b&gt;</ept> Katzen<ph>&lt;br/&gt;</ph>."),
            ("en-US", "Two <hi>red</hi> cats<ph x='2'/>."),
        ),  # fmt: skip
        unit(("de", "Eine Zeile\nund noch\teine"), ("en", "  One line\r\nand\tanother  ")),
        unit(("DE", "Alt: lang."), ("EN", "Old: lang."), attribute="lang"),  # TMX 1.1
        unit(("de", ""), ("en", "Empty source.")),  # kept: the filters drop an empty side, and count it
        unit(("de", "Ein &amp; zwei &lt;drei&gt; „vier“"), ("en", "One &amp; two &lt;three&gt; “four”")),
    ]
    (tmp_path / "train.tmx").write_text(tmx(units), encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="mt.data.tmx"):
        corpus = load_files(str(tmp_path), "train", "de", "en", cache_dir=str(tmp_path / "cache"))
    assert corpus.src == ["Ein Hund rennt.", "Zwei rote Katzen.", "Eine Zeile und noch eine", "Alt: lang.", "",
                          "Ein & zwei <drei> „vier“"]  # fmt: skip
    assert corpus.tgt == ["A dog runs.", "Two red cats.", "One line and another", "Old: lang.", "Empty source.",
                          "One & two <three> “four”"]  # fmt: skip
    said = caplog.text
    assert "7 translation units, 6 de-en pairs (1 without both de and en left out)" in said
    assert "2 segments held a line break or tab, written as a space" in said
    assert corpus.origin.startswith(str(tmp_path / "train.tmx"))
    reverse = load_files(str(tmp_path), "train", "en", "de", cache_dir=str(tmp_path / "cache"))
    assert (reverse.src, reverse.tgt) == (corpus.tgt, corpus.src)

    (tmp_path / "utf16").mkdir()  # some tools export UTF-16; and a compressed file reads as it is
    text = tmx(units).replace('encoding="UTF-8"', 'encoding="UTF-16"')
    (tmp_path / "utf16" / "train.de-en.tmx").write_bytes(text.encode("utf-16"))
    (tmp_path / "gz").mkdir()
    (tmp_path / "gz" / "train.tmx.gz").write_bytes(gzip.compress(tmx(units).encode("utf-8")))
    for folder in ("utf16", "gz"):
        again = load_files(str(tmp_path / folder), "train", "de", "en", cache_dir=str(tmp_path / "cache"))
        assert (again.src, again.tgt) == (corpus.src, corpus.tgt), folder


def test_a_language_matches_by_its_first_part_unless_a_region_is_asked_for():
    assert same_language("de-DE", "de") and same_language("DE_at", "de") and same_language("de", "de")
    assert not same_language("da", "de") and not same_language("", "de")
    assert same_language("pt-BR", "pt-BR") and same_language("pt_br", "pt-BR") and not same_language("pt-PT", "pt-BR")


def test_what_is_not_a_usable_tmx_is_one_line(tmp_path):
    def refused(text: str, match: str, cache="cache"):
        (tmp_path / "train.tmx").write_text(text, encoding="utf-8")
        with pytest.raises(MTError, match=match):
            load_files(str(tmp_path), "train", "de", "en", cache_dir=cache and str(tmp_path / cache))

    path = str(tmp_path / "train.tmx")
    refused("Ein Hund rennt.\tA dog runs.\n", rf"^{path}:1:0: not well-formed XML \(syntax error\)$")
    refused(tmx([unit(("de", "a"), ("en", "b"))])[:-40], rf"^{path}:\d+:\d+: not well-formed XML")  # cut short
    refused("<html><body>hi</body></html>", rf"^{path}: not a TMX file \(its root element is <html>, not <tmx>\)$")
    only = tmx([unit(("fr-FR", "Un chien."), ("en-GB", "A dog.")), unit(("fr-FR", "Un chat."), ("en-US", "A cat."))])
    refused(only, rf"^{path}: no translation unit holds both de and en \(its languages: fr-FR, en-GB, en-US\)$")
    refused(only, r"a TMX file is read into data\.cache_dir, which is null", cache=None)


def test_a_run_on_tmx_files_prepares_what_it_prepares_from_two_files(tmp_path):
    two = write_corpus(tmp_path / "two", {"train": 200, "valid": 10, "test": 10})
    memory = tmp_path / "memory"
    memory.mkdir()
    for split in ("train", "valid", "test"):
        de, en = ((two / f"{split}.{lang}").read_text().splitlines() for lang in ("de", "en"))
        units = [unit(("en-GB", escape(e)), ("de-DE", escape(d))) for d, e in zip(de, en)]
        (memory / f"{split}.tmx").write_text(tmx(units), encoding="utf-8")
    register_configs()

    def prepared(folder):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            overrides = ["data=files", f"data.dir={folder}", *TINY_TRAIN, f"data.cache_dir={tmp_path / 'cache'}"]
            cfg = compose("config", overrides=overrides)
        return prepare(cfg, tmp_path / f"run_{folder.name}", write_config=False)

    a, b = prepared(two), prepared(memory)
    assert [b.train.shard(i) for i in range(b.train.shards)] == [a.train.shard(i) for i in range(a.train.shards)]
    assert (b.valid.src, b.valid.tgt) == (a.valid.src, a.valid.tgt)
    assert (b.tests["de-en"].src, b.tests["de-en"].tgt) == (a.tests["de-en"].src, a.tests["de-en"].tgt)
    assert b.tokenizer.src.serialized_model_proto() == a.tokenizer.src.serialized_model_proto()


def test_translations_written_as_tmx_read_back_as_the_pairs(trained_run, tiny_corpus, tmp_path):
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:6]
    lines[2] = ""  # no unit for an empty line
    lines[3] = f"{lines[3]} & <b>\x01"  # markup characters escaped; one XML cannot hold replaced
    (tmp_path / "in.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    given = ["translate", "-c", str(trained_run), "-i", str(tmp_path / "in.de")]
    text = run_cli(*given).stdout.splitlines()
    written = run_cli(*given, "-o", str(tmp_path / "out.tmx.gz"))
    assert "5 translation units written (none for 1 empty line), 1 character XML cannot hold" in written.stderr
    pairs = io.StringIO()
    write_pairs(tmp_path / "out.tmx.gz", "de", "en", pairs)  # through the reader a TMX corpus goes through
    expected = [(s.replace("\x01", "\ufffd"), t) for s, t in zip(lines, text) if s]
    assert [tuple(line.split("\t")) for line in pairs.getvalue().splitlines()] == expected
    refused = run_cli(*given, "-o", str(tmp_path / "n.tmx"), "--beam", "2", "--nbest", "2", check=False)
    assert refused.returncode == 2 and "a TMX file holds one translation a unit: not with --nbest" in refused.stderr
