"""Word documents (mt/data/word_document.py, mt/decoding/word_translation.py): each paragraph a segment, its
runs' formatting, links and what is not text as tags; the translation's tags runs again; every other byte of
the file as it was."""

import random
import re
import zipfile
from xml.dom import minidom

import pytest

import mt
from mt.data.word_document import TAG, WordDocument, read_paragraph, written_paragraph
from mt.errors import MTError

from conftest import LEXICON, run_cli

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
R = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
BOLD = "<w:rPr><w:b/></w:rPr>"
BODY = (
    '<w:p w:rsidR="00A1"><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>ein hund</w:t></w:r></w:p>'
    '<w:p><w:r><w:t xml:space="preserve">ein mann </w:t></w:r><w:proofErr w:type="spellStart"/>'
    f'<w:r>{BOLD}<w:t>läuft</w:t></w:r><w:proofErr w:type="spellEnd"/><w:r><w:t xml:space="preserve"> hier</w:t>'
    "</w:r></w:p>"
    '<w:p><w:bookmarkStart w:id="0" w:name="a"/><w:r><w:t>eine katze</w:t><w:tab/><w:t>isst &amp; schläft</w:t></w:r>'
    '<w:hyperlink r:id="rId9"><w:r><w:rPr><w:u w:val="single"/></w:rPr><w:t>dort</w:t></w:r></w:hyperlink>'
    '<w:bookmarkEnd w:id="0"/></w:p>'
    "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>ein kind sitzt</w:t></w:r></w:p></w:tc>"
    "<w:tc><w:p><w:r><w:t>42</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
    "<w:p/><w:sectPr/>"
)
FIELD = (
    '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>'
    '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>1</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
)
HEADER = f'<w:hdr {W}><w:p><w:r><w:t xml:space="preserve">frau heute </w:t></w:r>{FIELD}</w:p></w:hdr>'


def docx(path, body=BODY, header=HEADER):
    """A Word document of these parts, as Word lays them out (compressed, a picture stored)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        document = f'<?xml version="1.0"?>\n<w:document {W} {R}><w:body>{body}</w:body></w:document>'
        archive.writestr("word/document.xml", document)
        archive.writestr("word/header1.xml", f'<?xml version="1.0"?>\n{header}')
        archive.writestr(zipfile.ZipInfo("word/media/image1.png"), b"\x89PNG not really")
        archive.writestr("word/styles.xml", f"<w:styles {W}/>")
    return path


def parts(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {info.filename: (info.compress_type, archive.read(info)) for info in archive.infolist()}


def test_paragraphs_are_segments_with_their_formatting_as_tags(tmp_path):
    doc = WordDocument(docx(tmp_path / "a.docx"))
    assert doc.segments == [
        "ein hund",
        "ein mann <w-1>läuft</w-1> hier",  # the bold run's formatting; spelling marks dropped
        "eine katze<w-1/>isst & schläft<w-2><w-3>dort</w-3></w-2>",  # a tab; a link around underlined text
        "ein kind sitzt",  # in a table; "42" has no word
        "frau heute ",  # the header; its page number field after the text, kept out of the segment
    ]
    doc.translations = {i: segment for i, segment in enumerate(doc.segments)}  # each paragraph as it was
    (tmp_path / "b.docx").write_bytes(doc.output())
    before, after = parts(tmp_path / "a.docx"), parts(tmp_path / "b.docx")
    translated = ("word/document.xml", "word/header1.xml")
    assert list(after) == list(before) and all(after[name] == before[name] for name in before if name not in translated)
    for name in translated:
        xml = after[name][1].decode("utf-8")
        minidom.parseString(xml)  # well-formed
        assert after[name][0] == before[name][0] == zipfile.ZIP_DEFLATED
    assert WordDocument(tmp_path / "b.docx").segments == doc.segments  # read back: the same paragraphs
    document = after["word/document.xml"][1].decode("utf-8")
    assert '<w:pStyle w:val="Heading1"/>' in document and '<w:bookmarkStart w:id="0" w:name="a"/>' in document
    assert f'<w:r>{BOLD}<w:t xml:space="preserve">läuft</w:t></w:r>' in document and "isst &amp; schläft" in document
    assert FIELD in after["word/header1.xml"][1].decode("utf-8")  # the field whole, in order


def test_no_translation_leaves_the_file_byte_for_byte(tmp_path):
    doc = WordDocument(docx(tmp_path / "a.docx"))
    (tmp_path / "b.docx").write_bytes(doc.output())
    assert parts(tmp_path / "b.docx") == parts(tmp_path / "a.docx")


@pytest.mark.parametrize("seed", range(40))
def test_any_order_of_tags_gives_well_formed_xml_and_loses_no_point(seed):
    rng = random.Random(seed)
    paragraph = read_paragraph("<w:p>", re.search(r"<w:p>(<w:bookmarkStart.*?)</w:p>", BODY).group(1))
    tags = TAG.findall(paragraph.segment)
    pieces = [f"<{'/' if close else ''}w-{n}{'/' if point else ''}>" for close, n, point in tags]
    rng.shuffle(pieces)
    pieces = [piece for piece in pieces if rng.random() < 0.8] + [rng.choice(["<w-9>", "</w-7>", "<w-1/>"])]
    words = ["a", "b &", "<c>", " "]
    translation = "".join(piece + rng.choice(words) for piece in pieces)
    xml = written_paragraph(paragraph, translation)
    minidom.parseString(f"<x {W} {R}>{xml}</x>")
    assert xml.count("<w:tab/>") == 1  # the tab, written once though the translation lost or doubled it


def test_a_file_that_is_no_word_document_is_one_line(tmp_path):
    (tmp_path / "a.docx").write_bytes(b"PK not a zip")
    with pytest.raises(MTError, match=r"a.docx: not a Word document \(a .docx is a zip file; save a .doc as .docx\)"):
        WordDocument(tmp_path / "a.docx")
    with zipfile.ZipFile(tmp_path / "b.docx", "w") as archive:
        archive.writestr("content.xml", "<office/>")
    with pytest.raises(MTError, match="b.docx: not a Word document: it holds no word/document.xml"):
        WordDocument(tmp_path / "b.docx")


def test_translate_takes_a_word_document_and_keeps_its_formatting(trained_run, tmp_path):
    given = ["translate", "-c", str(trained_run), "--beam", "1", "-i", str(docx(tmp_path / "bericht.docx"))]
    done = run_cli(*given, "-o", str(tmp_path / "report.docx"))
    assert "5 paragraphs translated, 2 with formatting kept in place" in done.stderr
    translated = WordDocument(tmp_path / "report.docx")
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    assert translated.segments[0] == translator.translate("ein hund")
    assert translated.segments[1].replace("<w-1>", "").replace("</w-1>", "") == translator.translate(
        "ein mann läuft hier"
    )
    assert f"<w-1>{LEXICON['läuft']}</w-1>" in translated.segments[1]  # the bold word's translation bold
    assert translated.segments[4] == translator.translate("frau heute") + " "  # its space before the page number
    for refused, message in [
        ([], "a Word document is written to a file: name it with -o report.docx"),
        (["-o", str(tmp_path / "report.txt")], "a Word input is written as Word: name the output .docx"),
    ]:
        failed = run_cli(*given, *refused, check=False)
        assert failed.returncode == 2 and message in failed.stderr
