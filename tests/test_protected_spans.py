"""Protected spans (mt/decoding/protected_spans.py): URLs, e-mail addresses, tags, placeholders and code
found in a line, taken out before the model reads it and written back, unchanged, where their neighbouring
words went."""

import random
import re
from xml.dom import minidom

import pytest
import torch

import mt
from mt.decoding.inline_tags import place
from mt.decoding.protected_spans import DEFAULT, KINDS, flatten_line, pattern_of, render_line
from mt.decoding.settings import DecodeSettings
from mt.errors import MTError

from conftest import LEXICON, run_cli

FOUND = {
    "url": ["https://example.com/a_b?c=1&d=2#x", "http://x.de", "www.hunde-welt.de/bilder", "ftp://files.org/a.tgz"],
    "email": ["info@beispiel.de", "first.last+tag@mail.example.org"],
    "tag": ["<b>", "</b>", "<br/>", '<a href="https://x.de">', "<span class='x'>", "<!-- a <b> -->", "&lt;", "&gt;"],
    "placeholder": ["{name}", "{0}", "{}", "{{count}}", "${user}", "%(count)d", "%1$s", "%(rate).2f"],
    "code": ["`make test`", "`x = 1`"],
    "printf": ["%s", "%d", "%.2f", "%ld", "%%", "%5i"],
    "subtitle": ["{\\an8}", "{\\i1}", "{\\fnArial Bold}", "\\h", "\\n", "<00:01.500>", "<01:02:03.500>"],
}


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_finds_its_spans_whole(kind):
    pattern = pattern_of(kind)
    for span in FOUND[kind]:
        assert [m.group() for m in pattern.finditer(f"siehe {span}, dann")] == [span], span


def test_what_is_left_alone():
    default = pattern_of(DEFAULT)
    assert "printf" not in DEFAULT
    for text in ["100%ige Sicherheit", "ein Hund, 3 Katzen.", "a < b and c > d", "x@y", "www", "{ a b }"]:
        assert not default.search(text), text
    # the sentence's punctuation stays outside a URL; an address in a tag is the tag's
    assert default.search("Siehe https://x.de/a.").group() == "https://x.de/a"
    assert default.search("(www.x.de/seite)").group() == "www.x.de/seite"
    assert default.search('<a href="https://x.de">').lastgroup == "tag"
    assert pattern_of("none") is None and pattern_of("") is None


def test_an_unknown_kind_is_one_line_naming_it():
    with pytest.raises(MTError, match="protect: 'urls' is not a kind of span .*url, email"):
        DecodeSettings(protect="url,urls")
    assert DecodeSettings(protect="none").protect == "none"


def test_tags_closed_in_order_wrap_text_the_others_stand_alone():
    pattern = pattern_of(DEFAULT)
    flat = flatten_line("Klicken Sie <b>hier</b>,<br> dann <i>weiter</b> `ok`", pattern)
    assert flat.text == "Klicken Sie hier, dann weiter"
    assert [(c.kind, c.boundary) for c in flat.codes] == [
        ("open", 2), ("close", 3), ("point", 4), ("point", 5), ("point", 6), ("point", 6)
    ]  # fmt: skip
    assert flat.codes[0].node is flat.codes[1].node  # one pair, opened and closed
    assert flatten_line("ein hund", pattern) is None


def test_spans_go_back_where_their_words_went():
    pattern = pattern_of(DEFAULT)
    line = "Besuchen Sie <b>www.x.de</b> für {n} Details, schreiben Sie an a@b.de."
    flat = flatten_line(line, pattern)
    assert flat.text == "Besuchen Sie für Details, schreiben Sie an ."
    translation = "For details visit, write to."
    # Besuchen->visit Sie->visit für->For Details->details ,->, schreiben->write Sie->write an->to .->.
    aligned = [{2}, {2}, {0}, {1}, {3}, {4}, {4}, {5}, {6}]
    got = render_line(flat, translation, place(flat, translation, aligned))
    # each before the translation of the word it stood before (a tag pair around a URL alone is one span);
    # the address set apart by a space keeps one before the period
    assert got == "<b>www.x.de</b> For {n} details visit, write to a@b.de."
    assert render_line(flat, "ab.", place(flat, "ab.", None)).count("a@b.de") == 1


@pytest.mark.parametrize("seed", range(30))
def test_any_alignment_gives_every_span_once_in_order_and_the_translation_whole(seed):
    rng = random.Random(seed)
    spans = [span for kind in KINDS if kind not in ("printf", "subtitle", "tag") for span in FOUND[kind]]
    parts = []
    for i in range(rng.randint(1, 8)):
        parts.append(f"w{i}")
        parts.extend(rng.sample(spans, rng.randint(0, 2)))
        if rng.random() < 0.3:
            parts.append(f"<b>w{i}b</b>")
    line = "".join(part + rng.choice([" ", "", ", "]) for part in parts)
    pattern = pattern_of(DEFAULT)
    flat = flatten_line(line, pattern)
    if flat is None:
        return
    translation = " ".join(f"t{i}" for i in range(rng.randint(0, 9)))
    m = len(translation.split())
    aligned = [set(rng.sample(range(m), rng.randint(0, min(m, 2)))) for _ in range(flat.tokens)]
    got = render_line(flat, translation, place(flat, translation, rng.choice([aligned, None])))
    rest, at = [], 0  # each span found in the output, in the line's order; what is between them
    for code in flat.codes:
        span = code.node if code.kind == "point" else code.node.open if code.kind == "open" else code.node.close
        found = got.find(span, at)
        assert found >= 0, (span, got)
        rest.append(got[at:found])
        at = found + len(span)
    assert " ".join("".join(rest + [got[at:]]).split()) == translation


@pytest.fixture(scope="module")
def translator(trained_run):
    return mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)


def test_a_models_translation_keeps_every_span_and_translates_the_rest(translator):
    lines = [
        "ein hund läuft https://example.com/a_b?c=1 schnell",
        "ein <b>hund</b> läuft",
        "eine katze schläft hier, schreiben sie an info@beispiel.de",
        "ein mann isst {name}",
        "https://example.com/nur-eine-adresse",
        "`ls -l` 3 {x}",
        "ein kind springt",
        "",
    ]
    got = translator.translate(lines)
    plain = translator.translate(lines, protect="none")
    pattern = pattern_of(DEFAULT)
    for line, out in zip(lines, got):
        assert [m.group() for m in pattern.finditer(out)] == [m.group() for m in pattern.finditer(line)], out
    assert got[1] == f"a <b>{LEXICON['hund']}</b> {LEXICON['läuft']}"  # the tag pair wraps the word's translation
    assert got[4:6] == lines[4:6]  # nothing but spans, numbers and punctuation: copied
    assert got[6:] == plain[6:]  # a line without spans is translated as before
    assert "example.com/a_b?c=1" not in plain[0]  # unprotected, a model of 100 pieces cannot write it
    without = translator.translate([" ".join(pattern.sub(" ", line).split()) for line in lines[:4]])
    assert [" ".join(pattern.sub(" ", out).split()) for out in got[:4]] == without  # the line without its spans


def test_attention_is_computed_for_the_lines_that_ask_for_it(translator):
    lines = ["ein hund läuft", "eine katze schläft hier", "ein mann isst"]
    every = translator._translate_nbest(lines, attention_layer=-2)
    some = translator._translate_nbest(lines, attention_layer=-2, attention_lines=[False, True, False])
    assert some[0][0].attention is None and some[2][0].attention is None
    torch.testing.assert_close(some[1][0].attention, every[1][0].attention)
    assert [h[0].text for h in some] == [h[0].text for h in every]


def test_translate_protects_by_default_and_says_what_it_takes(trained_run, tmp_path):
    source = tmp_path / "in.de"
    source.write_text("ein hund läuft www.x.de/a schnell\nein mann isst %s\n\n", encoding="utf-8")
    given = ["translate", "-c", str(trained_run), "-q", "-i", str(source)]
    said = run_cli(*given[:-3], "-i", str(source))
    assert "spans kept untranslated in 1 line)" in said.stderr  # the URL's: %s is printf's, not asked for
    default = said.stdout.splitlines()
    assert len(default) == 3 and "www.x.de/a" in default[0] and "%s" not in default[1]
    assert "%s" in run_cli(*given, "--protect", "printf").stdout.splitlines()[1]
    assert "www.x.de/a" not in run_cli(*given, "--protect", "none").stdout
    refused = run_cli(*given, "--protect", "url,links", check=False)
    assert refused.returncode != 0 and "protect: 'links' is not a kind of span" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_code_and_elements_marked_translate_no_are_one_span_each_and_keep_the_space_between():
    pattern = pattern_of(DEFAULT)
    line = 'Run <code>make test</code> <span class="x notranslate">Acme <b>Ltd</b></span> now'
    flat = flatten_line(line, pattern)
    assert flat.text == "Run now"
    assert [c.node for c in flat.codes] == [
        "<code>make test</code>",
        '<span class="x notranslate">Acme <b>Ltd</b></span>',
    ]
    got = render_line(flat, "Start now", place(flat, "Start now", [{0}, {1}]))
    assert got == 'Start <code>make test</code> <span class="x notranslate">Acme <b>Ltd</b></span> now'


def test_an_xliff_segments_spans_come_through_too(translator, tmp_path):
    units = (
        '<trans-unit id="1"><source>ein hund läuft https://x.de/a_b schnell</source></trans-unit>'
        '<trans-unit id="2"><source>ein <g id="g">mann</g> isst {essen}</source></trans-unit>'
    )
    head = '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
    document = f'{head}<file original="a" source-language="de" target-language="en" datatype="plaintext"><body>'
    (tmp_path / "doc.xlf").write_text(f"{document}{units}</body></file></xliff>", encoding="utf-8")
    report = mt.translate_xliff(translator, tmp_path / "doc.xlf", str(tmp_path / "out.xlf"))
    assert (report.translated, report.with_codes, report.protected) == (2, 1, 2)  # the <g>; the URL, {essen}
    assert "2 segments translated; 1 with inline codes placed by alignment; spans kept untranslated in 2 segments" == (
        report.summary()
    )
    targets = [t.toxml() for t in minidom.parse(str(tmp_path / "out.xlf")).getElementsByTagName("target")]
    assert "https://x.de/a_b" in targets[0] and "{essen}" in targets[1], targets
    assert f'<g id="g">{LEXICON["mann"]}</g>' in targets[1]
    plain = translator.translate(["ein hund läuft schnell", "ein mann isst"])
    assert [" ".join(re.sub(r"<[^>]+>|https://x.de/a_b|\{essen\}", "", t).split()) for t in targets] == plain
