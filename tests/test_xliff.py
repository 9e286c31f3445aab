"""XLIFF documents translated: which segments are filled and where their targets go (1.2 with and without
seg-source, 2.x), the rest of the document kept; inline codes carried into the translation in order and well
formed whatever the alignment, on the aligned tokens where it is right; translate -i doc.xlf end to end."""

import os
import random
import re
from xml.dom import minidom

import pytest
import torch

from mt.data.xliff import Xliff, wraps_text
from mt.decoding.attention_maps import word_alignment
from mt.decoding.inline_tags import flatten, in_order, piece_tokens, place, render, token_alignment
from mt.decoding.protected_spans import DEFAULT, pattern_of
from mt.decoding.settings import Translation
from mt.errors import MTError

from conftest import run_cli

V12 = 'version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"'
V20 = 'version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0"'


def xliff12(units: str, languages: str = 'source-language="de" target-language="en"') -> str:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<xliff {V12}>\n<file original="a.txt" {languages} datatype="plaintext"><body>\n{units}\n</body></file></xliff>\n'  # noqa: E501


def source_of(xml: str):
    """The first element of an XML fragment, parsed."""
    return minidom.parseString(xml).documentElement


def target_from(source_xml: str, translation: str, aligned) -> str:
    """The target a source's codes make around a translation, as XML, with an alignment given."""
    source = source_of(source_xml)
    flat = flatten(source, wraps_text)
    target = source.ownerDocument.createElement("target")
    render(target, flat, translation, place(flat, translation, aligned))
    return target.toxml()


def test_codes_wrap_the_aligned_tokens_and_stand_before_the_aligned_token():
    source = '<source>ein <g id="1">roter</g> hund<x id="2"/> läuft <ph id="3">{1}</ph>schnell.</source>'
    flat = flatten(source_of(source), wraps_text)
    assert flat.text == "ein roter hund läuft schnell." and flat.tokens == 6
    assert [(c.kind, c.boundary, c.sticks) for c in flat.codes] == [
        ("open", 1, False), ("close", 2, True), ("point", 3, True), ("point", 4, False)
    ]  # fmt: skip
    # "a dog runs red quickly ." with roter -> red moved past hund -> dog
    aligned = [{0}, {3}, {1}, {2}, {4}, {5}]
    # codes stay in order: the point moves after the wrapped word rather than the wrapping code off it
    assert target_from(source, "a dog runs red quickly.", aligned) == (
        '<target>a dog runs <g id="1">red</g><x id="2"/> <ph id="3">{1}</ph>quickly.</target>'
    )
    in_place = target_from(source, "a red dog runs quickly.", [{0}, {1}, {2}, {3}, {4}, {5}])
    assert in_place == '<target>a <g id="1">red</g> dog<x id="2"/> runs <ph id="3">{1}</ph>quickly.</target>'
    # a point written right after a word follows that word's translation, not the next word's
    stuck = '<source>ein hund<x id="1"/> läuft</source>'
    assert target_from(stuck, "a dog quickly runs", [{0}, {1}, {3}]) == '<target>a dog<x id="1"/> quickly runs</target>'
    before = '<source>ein hund <x id="1"/>läuft</source>'
    assert target_from(before, "a dog quickly runs", [{0}, {1}, {3}]) == (
        '<target>a dog quickly <x id="1"/>runs</target>'  # one before a word goes before its translation
    )
    # protected text is a code, copied as it is and not translated
    protected = '<source>a <mrk mtype="protected">Acme Ltd</mrk> b <mrk translate="no">X</mrk></source>'
    assert flatten(source_of(protected), wraps_text).text == "a b"
    assert target_from(protected, "y z", None) == (
        '<target>y <mrk mtype="protected">Acme Ltd</mrk> z <mrk translate="no">X</mrk></target>'
    )
    # punctuation is a token of its own: a code closing before it stays before it
    assert target_from("<source><g>Haus</g>.</source>", "house.", [{0}, {1}]) == "<target><g>house</g>.</target>"


def test_protected_spans_in_a_segments_text_are_codes_of_their_own():
    spans = pattern_of(DEFAULT)
    source = '<source>ein <g id="1">www.x.de/a</g> hund<x id="2"/> {name} und &lt;b&gt;, https://y.de</source>'
    flat = flatten(source_of(source), wraps_text, spans)
    assert flat.text == "ein hund und ,"
    kinds = [(c.kind, c.node.toxml() if c.node.nodeType != c.node.TEXT_NODE else c.node.data) for c in flat.codes]
    assert kinds == [
        ("open", '<g id="1">www.x.de/a</g>'), ("point", "www.x.de/a"), ("close", '<g id="1">www.x.de/a</g>'),
        ("point", '<x id="2"/>'), ("point", "{name}"), ("point", "<b>"), ("point", "https://y.de"),
    ]  # fmt: skip
    target = source_of(source).ownerDocument.createElement("target")
    translation = "a dog and ,"
    render(target, flat, translation, place(flat, translation, [{0}, {1}, {2}, {3}]))
    assert target.toxml() == (
        '<target>a <g id="1">www.x.de/a</g> dog<x id="2"/> {name} and &lt;b&gt;, https://y.de</target>'
    )
    assert flatten(source_of("<source>ein <g>www.x.de</g></source>"), wraps_text, None).text == "ein www.x.de"


def test_without_an_alignment_codes_keep_their_relative_place():
    source = '<source>a b <x id="1"/>c d</source>'
    assert target_from(source, "w x y z", None) == '<target>w x <x id="1"/>y z</target>'
    spaced = '<source> a b <x id="1"/>c d\n</source>'  # the whitespace around the text is kept
    assert target_from(spaced, "w x y z", None) == '<target> w x <x id="1"/>y z\n</target>'


@pytest.mark.parametrize("seed", range(40))
def test_any_alignment_gives_the_translation_with_the_codes_in_order_and_well_formed(seed):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(rng.randint(1, 8))]
    parts, depth, code = [], 0, 0
    for word in words:  # words with codes around them at random: nested wrapping ones, points
        for _ in range(rng.randint(0, 2)):
            kind = rng.choice(["open", "close", "point"] if depth else ["open", "point"])
            code += 1
            parts.append({"open": f'<g id="{code}">', "close": "</g>", "point": f'<x id="{code}"/>'}[kind])
            depth += {"open": 1, "close": -1}.get(kind, 0)
        parts.append(word + rng.choice([" ", ""]))
    parts.append("</g>" * depth)
    source = f"<source>{''.join(parts)}</source>"
    flat = flatten(source_of(source), wraps_text)
    translation = " ".join(f"t{i}" for i in range(rng.randint(0, 9)))
    m = len(translation.split())
    aligned = [set(rng.sample(range(m), rng.randint(0, min(m, 2)))) for _ in range(flat.tokens)]
    target = source_of(target_from(source, translation, rng.choice([aligned, None])))
    assert " ".join(re.sub(r"<[^>]+>", "", target.toxml()).split()) == translation  # the translation whole
    opened = [e.getAttribute("id") for e in target.getElementsByTagName("*")]
    in_source = [e.getAttribute("id") for e in source_of(source).getElementsByTagName("*")]
    assert opened == in_source  # every code once, in the source's order (and parsed back: well formed)


def test_isotonic_regression_is_the_nearest_sequence_in_order():
    assert in_order([1, 2, 3]) == [1, 2, 3]
    assert in_order([3, 1, 2]) == [2, 2, 2]
    assert in_order([0, 5, 1, 6]) == [0, 3, 3, 6]
    assert in_order([0, 5, 1, 6], [1, 3, 1, 1]) == [0, 4, 4, 6]  # the heavier value moves less


def test_pieces_find_their_tokens_and_attention_aligns_them():
    assert piece_tokens(["\u2581ein", "\u2581ro", "ter", "\u2581hund", ".", "</s>"][:-1], "ein roter hund.") == [
        0, 1, 1, 2, 3
    ]  # fmt: skip
    assert piece_tokens(["\u2581a", "..."], "a \u2026") == [0, 1]  # a piece the tokenizer normalised
    # target pieces: a, red, dog, EOS; source pieces: ein, ro, ter, hund, EOS
    attention = torch.tensor(
        [
            [0.9, 0.0, 0.0, 0.1, 0.0],
            [0.0, 0.5, 0.4, 0.1, 0.0],
            [0.1, 0.0, 0.0, 0.9, 0.0],
            [0.0, 0.0, 0.0, 0.0, 1.0],
        ]
    )
    source, target = (
        ["\u2581ein", "\u2581ro", "ter", "\u2581hund", "</s>"],
        ["\u2581a", "\u2581red", "\u2581dog", "</s>"],
    )
    aligned = token_alignment(attention, source, target, "ein roter hund", "a red dog")
    assert aligned == [{0}, {1}, {2}]
    # "is" no source token chooses joins the token it attends to most: grillt -> is grilling
    attention = torch.tensor([[0.9, 0.1, 0.0, 0.0], [0.3, 0.6, 0.1, 0.0], [0.05, 0.75, 0.2, 0.0], [0, 0, 0, 1.0]])
    pieces = ["\u2581man", "\u2581is", "\u2581grilling", "</s>"]
    source = ["\u2581Mann", "\u2581grillt", ".", "</s>"]
    assert token_alignment(attention, source, pieces, "Mann grillt.", "man is grilling") == [{0}, {1, 2}, {2}]


def test_word_alignment_links_words_split_at_spaces():
    """translate --alignments: words as a user counts them, a word's punctuation and pieces its own."""
    # target pieces: a, red, do g, ., EOS; source pieces: ein, ro ter, hund, ., EOS
    attention = torch.tensor(
        [
            [0.9, 0.0, 0.0, 0.1, 0.0, 0.0],
            [0.0, 0.5, 0.4, 0.1, 0.0, 0.0],
            [0.1, 0.0, 0.0, 0.9, 0.0, 0.0],
            [0.1, 0.0, 0.0, 0.8, 0.1, 0.0],
            [0.0, 0.0, 0.0, 0.1, 0.9, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        ]
    )
    source = ["\u2581ein", "\u2581ro", "ter", "\u2581hund", ".", "</s>"]
    hyp = Translation("a red dog.", 0.0, source, ["\u2581a", "\u2581red", "\u2581do", "g", ".", "</s>"], attention)
    assert word_alignment(hyp, "ein roter hund.") == [(0, 0), (1, 1), (2, 2)]
    swapped = ["\u2581a", "\u2581dog", "\u2581red", ".", "</s>"]
    hyp = Translation("a dog red.", 0.0, source, swapped, attention[[0, 2, 1, 4, 5]])
    assert word_alignment(hyp, "ein roter hund.") == [(0, 0), (1, 2), (2, 1)]  # crossing links stay as they are


def test_which_segments_are_filled_and_where_their_targets_go(tmp_path):
    path = tmp_path / "a.xlf"
    path.write_text(
        xliff12(
            "<!-- kept -->\n"
            '<trans-unit id="1">\n  <source>hund</source>\n</trans-unit>\n'
            '<trans-unit id="2"><source>katze</source><target state="translated">cat</target></trans-unit>\n'
            '<trans-unit id="3"><source>kind</source><target state="new">kind</target></trans-unit>\n'
            '<group translate="no"><trans-unit id="4"><source>frau</source></trans-unit>'
            '<trans-unit id="5" translate="yes"><source>mann</source></trans-unit></group>\n'
            '<trans-unit id="6"><source>ein hund. eine katze.</source><seg-source><mrk mtype="seg" mid="1">ein hund.'
            '</mrk> <g id="9"><mrk mtype="seg" mid="2">eine katze.</mrk></g></seg-source></trans-unit>\n'
            '<trans-unit id="7"><source>a</source><seg-source><mrk mtype="seg" mid="1">x</mrk><mrk mtype="seg" '
            'mid="2">y</mrk></seg-source><target><mrk mtype="seg" mid="1">done</mrk><mrk mtype="seg" mid="2"/>'
            '</target><sdl:seg-defs xmlns:sdl="http://sdl.com/FileTypes/SdlXliff/1.0">'
            '<sdl:seg id="1" conf="Translated"/><sdl:seg id="2"/></sdl:seg-defs></trans-unit>\n'
            '<trans-unit id="8"><source>b</source><seg-source><mrk mtype="seg" mid="1">z</mrk></seg-source>'
            '<target state="needs-translation">b</target></trans-unit>'
            '<trans-unit id="9"><source>c</source><seg-source>c</seg-source><target/></trans-unit>'
        ),
        encoding="utf-8",
    )
    doc = Xliff(path)
    segments = doc.segments()
    assert [s.source.firstChild.data for s in segments] == [
        "hund",
        "kind",
        "mann",
        "ein hund.",
        "eine katze.",
        "y",
        "z",
        "c",
    ]
    assert (doc.kept, doc.not_translated) == (2, 1)  # unit 2 and unit 7's first segment; unit 4
    for segment in segments:
        segment.fill().appendChild(doc.doc.createTextNode(segment.source.firstChild.data.upper()))
    doc.write(str(tmp_path / "b.xlf"))
    written = (tmp_path / "b.xlf").read_text(encoding="utf-8")
    assert "<!-- kept -->" in written and written.endswith("</xliff>\n")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "b.xlf").stat().st_mode & 0o777 == 0o666 & ~umask  # as any file written here
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.xlf", "b.xlf"]  # nothing left aside
    assert (  # a new target on a line of its own after the source, marked as machine translation
        '  <source>hund</source>\n  <target xml:lang="en" state="needs-review-translation" '
        'state-qualifier="mt-suggestion">HUND</target>'
    ) in written
    assert '<target state="translated">cat</target>' in written  # a translator's target kept
    assert "<source>frau</source></trans-unit>" in written
    assert (  # the target mirrors the seg-source
        '<mrk mtype="seg" mid="1">EIN HUND.</mrk> <g id="9"><mrk mtype="seg" mid="2">EINE KATZE.</mrk></g></target>'
    ) in written
    assert '<mrk mtype="seg" mid="1">done</mrk><mrk mtype="seg" mid="2">Y</mrk>' in written
    assert '<sdl:seg id="1" conf="Translated"/><sdl:seg id="2" conf="Draft" origin="mt"/>' in written  # Trados' record
    # a target without segments, to translate again, mirrors the seg-source; a seg-source without any: the source
    assert (
        '<target state="needs-review-translation" state-qualifier="mt-suggestion"><mrk mtype="seg" mid="1">Z' in written
    )
    assert (
        '<seg-source>c</seg-source><target state="needs-review-translation" state-qualifier="mt-suggestion">C<'
        in written
    )


def test_xliff_2_segments_are_filled_and_ignorables_left(tmp_path):
    path = tmp_path / "a.xlf"
    path.write_text(
        f'<xliff {V20} srcLang="de"><file id="f"><unit id="u"><segment><source>hund</source></segment>'
        "<ignorable><source> </source></ignorable><segment><source>katze</source><target>cat</target></segment>"
        '</unit><unit id="v" translate="no"><segment><source>kind</source></segment></unit></file></xliff>',
        encoding="utf-8",
    )
    doc = Xliff(path)
    doc.check_languages("de", "en")  # the target language the document leaves out is written in
    segments = doc.segments()
    assert [s.source.firstChild.data for s in segments] == ["hund"] and (doc.kept, doc.not_translated) == (1, 1)
    segments[0].fill().appendChild(doc.doc.createTextNode("dog"))
    doc.write(str(tmp_path / "b.xlf"))
    written = (tmp_path / "b.xlf").read_text(encoding="utf-8")
    assert 'trgLang="en"' in written and "<source>hund</source><target>dog</target>" in written
    assert "<ignorable><source> </source></ignorable>" in written


def test_what_is_not_a_usable_xliff_is_one_line(tmp_path):
    cases = {
        "broken.xlf": ("<xliff version='1.2'><file>", "broken.xlf:1:27: not well-formed XML (no element found)"),
        "tmx.xlf": ('<tmx version="1.4"/>', "tmx.xlf: not an XLIFF document (its root is <tmx>"),
        "fr.xlf": (xliff12("", 'source-language="fr" target-language="en"'), "fr.xlf: its source language is fr;"),
        "es.xlf": (xliff12("", 'source-language="de-AT" target-language="es"'), "es.xlf: its target language is es;"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(MTError, match=re.escape(message)):
            Xliff(tmp_path / name).check_languages("de", "en")


def test_translate_fills_an_xliff_document(trained_run, tiny_corpus, tmp_path):
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:5]
    words = lines[0].split()
    coded = " ".join([words[0], f'<g id="1">{words[1]}</g><x id="2"/>', *words[2:]])
    units = [f'<trans-unit id="{i}"><source>{line}</source></trans-unit>' for i, line in enumerate(lines[1:])]
    units.append(f'<trans-unit id="c"><source>{coded}</source></trans-unit>')
    units.append('<trans-unit id="n"><source>3.1 <x id="9"/>(12)</source></trans-unit>')  # no word: copied
    (tmp_path / "doc.xlf").write_text(xliff12("\n".join(units)), encoding="utf-8")
    (tmp_path / "in.de").write_text("\n".join(lines[1:] + [lines[0]]) + "\n", encoding="utf-8")
    given = ["translate", "-c", str(trained_run)]
    plain = run_cli(*given, "-i", str(tmp_path / "in.de")).stdout.splitlines()
    done = run_cli(*given, "-i", str(tmp_path / "doc.xlf"), "-o", str(tmp_path / "doc.en.xlf"))
    assert (
        "5 segments translated; 1 with inline codes placed by alignment; 1 segment without words copied" in done.stderr
    )
    targets = minidom.parse(str(tmp_path / "doc.en.xlf")).getElementsByTagName("target")
    assert targets[-1].toxml().endswith('>3.1 <x id="9"/>(12)</target>')
    targets = targets[:-1]
    assert [re.sub(r"<[^>]+>", "", t.toxml()) for t in targets] == plain  # the same translations, codes aside
    coded_target = targets[-1].toxml()
    wrapped = re.search(r'<g id="1">([^<]*)</g><x id="2"/>', coded_target)
    assert wrapped, coded_target  # both codes, in order, the point right after the wrapped word
    from conftest import LEXICON

    assert wrapped.group(1) == LEXICON[words[1]]  # the word-for-word model's attention finds the word
    (tmp_path / "long.tsv").write_text(f"{words[0]}\tone two three four five six\n", encoding="utf-8")
    flags = "--glossary", str(tmp_path / "long.tsv"), "--max-len-a", "0", "--max-len-b", "3"  # no room for it
    short = run_cli(*given, "-i", str(tmp_path / "doc.xlf"), "-o", str(tmp_path / "short.xlf"), *flags)
    assert "warning: the translation of 1 segment lacks a required term" in short.stderr
    for flags, message in (
        (["--beam", "2", "--nbest", "2"], "--nbest goes with a file of lines, not an XLIFF document"),
        (["-o", str(tmp_path / "out.txt")], "an XLIFF input is written as XLIFF"),
    ):
        refused = run_cli(*given, "-i", str(tmp_path / "doc.xlf"), *flags, check=False)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
