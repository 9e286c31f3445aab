"""A glossary from a TBX termbase: each concept's usable source terms translated as its preferred target
term, deprecated terms never used, homonyms left out with a warning; TBX 2 (martif) and 3 (tbx, namespaced)
alike; translate --glossary terms.tbx places them as the same entries written source<TAB>target."""

import logging

import pytest

from mt.decoding.glossary import Glossary, load_glossary
from mt.decoding.termbase import read_termbase
from mt.errors import MTError

from conftest import run_cli

V3 = 'xmlns="urn:iso:std:iso:30042:ed-2"'


def concept(*sections: tuple[str, list[tuple[str, str]]], v3: bool = False) -> str:
    """A concept of (language, [(term, administrative status or "")]) sections, as TBX 2 or TBX 3 write it."""
    entry, section, group = ("conceptEntry", "langSec", "termSec") if v3 else ("termEntry", "langSet", "tig")
    body = ""
    for lang, found in sections:
        groups = "".join(
            f"<{group}><term>{term}</term>"
            + (f'<termNote type="administrativeStatus">{status}</termNote>' if status else "")
            + f"</{group}>"
            for term, status in found
        )
        body += f'<{section} xml:lang="{lang}">{groups}</{section}>'
    return f"<{entry}>{body}</{entry}>"


def termbase(concepts: list[str], v3: bool = False) -> str:
    root = f'<tbx type="TBX-Basic" style="dca" xml:lang="en" {V3}>' if v3 else '<martif type="TBX" xml:lang="en">'
    end = "</tbx>" if v3 else "</martif>"
    return f'<?xml version="1.0" encoding="utf-8"?>\n{root}<text><body>{"".join(concepts)}</body></text>{end}\n'


def sample(v3: bool) -> list[str]:
    return [
        concept(("de-DE", [("Vertrag", "")]), ("en-GB", [("contract", "")]), v3=v3),
        concept(
            ("de", [("Aufsichtsrat", "preferredTerm-admn-sts"), ("Kontrollrat", "deprecatedTerm-admn-sts")]),
            ("en", [("board of supervisors", "admittedTerm-admn-sts"), ("supervisory board", "preferred")]),
            v3=v3,
        ),  # fmt: skip
        concept(("de", [("Bank", "")]), ("en", [("bank", "")]), v3=v3),  # a homonym: two concepts, two targets
        concept(("de", [("Bank", "")]), ("en", [("bench", "")]), v3=v3),
        concept(("de", [("Hund", "")]), ("fr", [("chien", "")]), v3=v3),  # no English: left out
        concept(("de", [("Kater", "")]), ("en", [("tomcat", "obsolete")]), v3=v3),  # no usable English
    ]


@pytest.mark.parametrize("v3", [False, True], ids=["tbx2", "tbx3"])
def test_each_concept_gives_its_source_terms_the_preferred_target(tmp_path, caplog, v3):
    path = tmp_path / "terms.tbx"
    path.write_text(termbase(sample(v3), v3), encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="mt.decoding.termbase"):
        glossary = load_glossary(str(path), ("de", "en"))
    assert glossary.entries == {"Vertrag": "contract", "Aufsichtsrat": "supervisory board"}
    assert "1 source term(s) that concepts translate differently left out ('Bank')" in caplog.text
    assert "2 of 6 concepts lack a usable de or en term" in caplog.text
    assert glossary.terms(["Der Vertrag und der Kontrollrat.", "Eine Bank."]) == [["contract"], []]
    reverse = Glossary(read_termbase(path, "en", "de", ignore_case=True), "en", ignore_case=True)  # the other way
    assert reverse.terms(["The Contract of the Board of Supervisors"]) == [["Vertrag", "Aufsichtsrat"]]


def test_what_is_not_a_usable_termbase_is_one_line(tmp_path):
    path = tmp_path / "terms.tbx"

    def refused(text: str, match: str, languages=("de", "en")):
        path.write_text(text, encoding="utf-8")
        with pytest.raises(MTError, match=match):
            load_glossary(str(path), languages)

    refused("Vertrag\tcontract\n", rf"^{path}:1:\d+: not well-formed XML \(syntax error\)$")
    refused("<tmx><body/></tmx>", rf"^{path}: not a TBX file \(its root element is <tmx>, not <martif> or <tbx>\)$")
    refused(termbase(sample(False)[4:]), rf"^{path}: no concept with a usable de and en term \(2 concepts\)$")
    refused(termbase(sample(False)), "a TBX termbase is read for one source and one target language, not de-en\\+fr",
            languages=("de", ("en", "fr")))  # fmt: skip
    with pytest.raises(MTError, match=r"missing\.tbx: no such file"):
        load_glossary(str(tmp_path / "missing.tbx"), ("de", "en"))


def test_translate_places_a_termbase_as_the_same_entries_written_as_lines(trained_run, tiny_corpus, tmp_path):
    checkpoint = trained_run / "checkpoints" / "final.pt"
    lines = (tiny_corpus / "test.de").read_text(encoding="utf-8").splitlines()[:10]
    (tmp_path / "in.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "glossary.tsv").write_text("hund\tcat\n", encoding="utf-8")
    (tmp_path / "terms.tbx").write_text(termbase([concept(("de", [("hund", "")]), ("en", [("cat", "")]))]))
    given = ["translate", "-c", str(checkpoint), "-i", str(tmp_path / "in.de"), "--glossary"]
    from_tbx = run_cli(*given, str(tmp_path / "terms.tbx")).stdout
    assert from_tbx == run_cli(*given, str(tmp_path / "glossary.tsv")).stdout
    assert any("hund" in line.split() for line in lines) and "cat" in from_tbx.split()
