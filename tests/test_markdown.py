"""Markdown documents (mt/data/markdown_document.py, mt/decoding/markdown_translation.py): read into blocks,
their inline markup as tags the translator keeps in place, code and front matter left alone, written back as
they were but for the translations."""

import random

import pytest

import mt
from mt.data.markdown_document import MarkdownDocument, tagged_inline, untagged

from conftest import LEXICON, run_cli

DOC = """---
title: ein hund
---

# ein hund läuft #

ein mann sitzt **hund** hier\x20\x20
ein [katze](https://x.de/a "ein hund") schläft

- ein hund schläft.
- eine katze isst `ein hund` hier
  und klein.
1. ein kind

> ein mann läuft
> > schnell hier.

```bash
echo "ein hund"
```

    ein hund im code

| ein hund | rot |
| --- | :---: |
| katze | 42 |

ein hund
========

[ref]: https://x.de
<!-- ein hund -->
![ein hund](bild.png)
"""


def write(folder, text=DOC, name="README.de.md", newline="\n", bom=""):
    path = folder / name
    path.write_bytes((bom + text.replace("\n", newline)).encode("utf-8"))
    return path


@pytest.mark.parametrize("newline, bom", [("\n", ""), ("\r\n", "\ufeff")])
def test_a_document_is_read_into_segments_and_written_back_as_it_was(tmp_path, newline, bom):
    doc = MarkdownDocument(write(tmp_path, newline=newline, bom=bom))
    assert [untagged(text, markup) for text, markup in zip(doc.segments, doc.markup)] == [
        "ein hund läuft",  # a heading, without its #s
        "ein mann sitzt **hund** hier",  # a paragraph's lines, up to a hard break (two spaces)
        'ein [katze](https://x.de/a "ein hund") schläft',
        "ein hund schläft.",  # list items, without their markers
        "eine katze isst `ein hund` hier und klein.",
        "ein kind",
        "ein mann läuft schnell hier.",  # a quote, its lines one segment
        "ein hund", "rot", "katze",  # table cells
        "ein hund",  # a setext heading
    ]  # fmt: skip
    assert doc.segments[1:3] == ["ein mann sitzt <md-1>hund</md-1> hier", "ein <md-1>katze</md-1> schläft"]
    assert doc.output().encode("utf-8") == (bom + DOC.replace("\n", newline)).encode("utf-8")


def test_a_hard_break_is_kept_after_the_translation_and_kept_from_the_model(translator, tmp_path):
    path = write(tmp_path, "ein hund läuft\\\nein mann sitzt\x20\x20\nein kind\n", "break.md")
    doc = MarkdownDocument(path)
    assert doc.segments == ["ein hund läuft", "ein mann sitzt", "ein kind"]  # before, "ein hund läuft\\"
    mt.translate_markdown(translator, path, str(tmp_path / "out.md"))
    first, second, third = translator.translate(doc.segments)
    assert (tmp_path / "out.md").read_text(encoding="utf-8") == f"{first}\\\n{second}  \n{third}\n"


def test_a_list_items_later_paragraphs_are_its_own_and_its_code_stays_code(tmp_path):
    text = "- ein hund\n\n  ein mann\n\n      code\n\n  ```\n  ein code\n  ```\n\n    - ein kind\n\n      eine katze\n"
    doc = MarkdownDocument(write(tmp_path, text + "\nein kind\n\n    noch code\n", "list.md"))
    # indented under the item: a paragraph of it (before, code); four columns more, or outside a list: code
    assert doc.segments == ["ein hund", "ein mann", "ein kind", "eine katze", "ein kind"]
    assert [block.pieces[0] for block in doc.blocks] == ["- ", "  ", "    - ", "      ", ""]
    inline = MarkdownDocument(write(tmp_path, "```ein``` hund\n\nein mann\n", "inline.md"))
    assert inline.segments == ["<md-1/> hund", "ein mann"]  # code at a line's start opens no fence


def test_inline_markup_becomes_tags_and_comes_back_as_it_was():
    tagged, markup = tagged_inline("ein *hund* und `x` mit ![b](a.png), <https://x.de>, \\* und ~~weg~~ [^1]")
    assert tagged == "ein <md-1>hund</md-1> und <md-3/> mit <md-4/>, <md-5/>, <md-6/> und <md-7>weg</md-7> <md-9/>"
    assert tagged_inline("2 * 3 und snake_case und [x](u")[0] == "2 * 3 und snake_case und [x](u"  # nothing closed
    nested = tagged_inline("das [neue [2] buch](https://x.de) und ![bild [1]](a.png)")  # brackets in pairs inside
    assert nested[0] == "das <md-1>neue [2] buch</md-1> und <md-3/>"
    assert nested[1] == {1: "[", -1: "](https://x.de)", 3: "![bild [1]](a.png)"}
    rng = random.Random(0)
    pieces = ["ein", "hund", "*", "**", "_", "__", "~~", "`", "[", "]", "](u)", "][r]", "![a](b)", "\\_", " ", "  "]
    for _ in range(2000):  # whatever the text, its tags give it back
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        assert untagged(*tagged_inline(text)) == text, text


@pytest.fixture(scope="module")
def translator(trained_run):
    return mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)


def test_the_text_is_translated_and_the_markup_kept(translator, tmp_path):
    report = mt.translate_markdown(translator, write(tmp_path), str(tmp_path / "README.en.md"))
    out = (tmp_path / "README.en.md").read_text(encoding="utf-8").split("\n")
    source = DOC.split("\n")
    assert out[:4] == source[:4] and out[-5:] == source[-5:]  # front matter; link definition, comment, image
    assert "\n".join(out).count('```bash\necho "ein hund"\n```\n\n    ein hund im code') == 1
    assert out[4] == f"# {translator.translate('ein hund läuft')} #"
    said = " ".join(LEXICON[w] for w in ["ein", "mann", "sitzt"])
    assert out[6] == f"{said} **{LEXICON['hund']}** {LEXICON['hier']}  "  # the emphasis around its word; the break
    assert out[7] == f'{LEXICON["ein"]} [{LEXICON["katze"]}](https://x.de/a "ein hund") {LEXICON["schläft"]}'
    assert out[9] == f"- {translator.translate('ein hund schläft.')}" and out[10].startswith("- ")
    assert "`ein hund`" in out[10] and out[11] == "1. " + translator.translate("ein kind")  # an item on one line
    assert out[13] == "> " + translator.translate("ein mann läuft schnell hier.")
    table = out.index("| --- | :---: |")  # lines on from here: the paragraphs of two lines take one now
    assert out[table - 1] == f"| {translator.translate('ein hund')} | {translator.translate('rot')} |"
    assert out[table + 1] == f"| {translator.translate('katze')} | 42 |"  # each cell with a word a segment
    assert (report.translated, report.with_markup) == (11, 3)
    back = MarkdownDocument(tmp_path / "README.en.md")
    assert len(back.segments) == 11  # the translation is a document of the same shape


def test_translate_takes_a_markdown_document(trained_run, tmp_path):
    given = ["translate", "-c", str(trained_run), "-i", str(write(tmp_path))]
    done = run_cli(*given, "-o", str(tmp_path / "README.en.md"))
    assert "11 segments translated, 3 with inline markup kept in place" in done.stderr
    refused = run_cli(*given, "-o", str(tmp_path / "README.txt"), check=False)
    assert refused.returncode == 2 and "a Markdown input is written as Markdown: name the output .md" in refused.stderr


def test_a_documents_paragraphs_go_sentence_by_sentence_unless_told_not(trained_run, tmp_path):
    paragraph = "ein hund läuft schnell. Eine katze isst hier."
    (tmp_path / "a.md").write_text(paragraph + "\n", encoding="utf-8")
    given = ["translate", "-c", str(trained_run), "--beam", "1", "-i", str(tmp_path / "a.md")]
    said = run_cli(*given, "-o", str(tmp_path / "split.md")).stderr
    run_cli(*given, "--no-split-sentences", "-o", str(tmp_path / "whole.md"))
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    by_sentence, whole = translator.translate(paragraph, split_sentences=True), translator.translate(paragraph)
    assert by_sentence != whole and "sentence by sentence" in said
    assert (tmp_path / "split.md").read_text(encoding="utf-8") == by_sentence + "\n"
    assert (tmp_path / "whole.md").read_text(encoding="utf-8") == whole + "\n"
    mt.translate_markdown(translator, tmp_path / "a.md", tmp_path / "api.md")  # as translate, whatever the translator's
    mt.translate_markdown(translator, tmp_path / "a.md", tmp_path / "api_whole.md", split_sentences=False)
    assert (tmp_path / "api.md").read_text(encoding="utf-8") == by_sentence + "\n"
    assert (tmp_path / "api_whole.md").read_text(encoding="utf-8") == whole + "\n"
