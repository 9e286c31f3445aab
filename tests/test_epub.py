"""EPUB books (mt/data/epub.py, mt/decoding/epub_translation.py): each XHTML chapter the package lists read
as an HTML page, translated, and the book written back whole: the mimetype first and stored, the package
naming the target language, every other entry as it was."""

import html
import io
import re
import zipfile
from xml.dom import minidom

import pytest

import mt
from mt.data.epub import Epub
from mt.errors import MTError

from conftest import LEXICON, run_cli

CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>'
    "</container>"
)
OPF = (
    '<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
    '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>ein buch</dc:title>'
    "<dc:language>de</dc:language></metadata><manifest>"
    '<item id="c1" href="text/kapitel1.xhtml" media-type="application/xhtml+xml"/>'
    '<item id="c2" href="text/kapitel2.xhtml" media-type="application/xhtml+xml"/>'
    '<item id="css" href="style.css" media-type="text/css"/></manifest><spine><itemref idref="c1"/></spine></package>'
)
CHAPTER = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="de" lang="de">'
    "<head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
)

NCX = (
    '<?xml version="1.0" encoding="UTF-8"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
    "<docTitle><text>ein buch</text></docTitle><navMap>"
    '<navPoint id="n1"><navLabel>\n  <text> kapitel 1: hund &amp; katze </text></navLabel>'
    '<content src="text/kapitel1.xhtml"/></navPoint><navPoint id="n2"><navLabel><text>2</text></navLabel>'
    '<content src="text/kapitel2.xhtml"/></navPoint>'
    "</navMap></ncx>"
)
TOC_ITEM = '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'


def epub(path, first="ein mann läuft <b>schnell</b> hier", second="eine frau sitzt&#160;dort", more=None, item=""):
    """A book of two chapters (a bold word in one, a no-break space in the other, which does not declare
    itself XML), a stylesheet; more files (name: text), and an item more in its manifest."""
    with zipfile.ZipFile(path, "w") as book:
        book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")  # first, stored
        book.writestr("META-INF/container.xml", CONTAINER, zipfile.ZIP_DEFLATED)
        book.writestr("OEBPS/content.opf", OPF.replace("</manifest>", item + "</manifest>"), zipfile.ZIP_DEFLATED)
        for name, text in (more or {}).items():
            book.writestr(name, text, zipfile.ZIP_DEFLATED)
        for n, text in ((1, first), (2, second)):
            page = CHAPTER.format(title=f"kapitel {n}", text=text)
            page = page if n == 1 else page.split("\n", 1)[1]  # XHTML without the XML declaration
            book.writestr(f"OEBPS/text/kapitel{n}.xhtml", page, zipfile.ZIP_DEFLATED)
        book.writestr("OEBPS/style.css", "p { margin: 0 }", zipfile.ZIP_DEFLATED)
    return path


def test_a_books_chapters_are_pages_and_it_is_written_back_whole(tmp_path):
    book = Epub(epub(tmp_path / "a.epub"))
    assert list(book.pages) == ["OEBPS/text/kapitel1.xhtml", "OEBPS/text/kapitel2.xhtml"]
    assert [s.source for s in book.pages["OEBPS/text/kapitel1.xhtml"].segments][
        -1
    ] == "ein mann läuft <b>schnell</b> hier"
    (tmp_path / "b.epub").write_bytes(book.output())
    page = book.pages["OEBPS/text/kapitel2.xhtml"]
    page.translations = {len(page.segments) - 1: "a woman & 10\u00a0km"}  # XML knows &#160;, not &nbsp;
    assert "<p>a woman &amp; 10&#160;km</p>" in page.output() and minidom.parseString(page.output().encode())
    with zipfile.ZipFile(tmp_path / "a.epub") as a, zipfile.ZipFile(tmp_path / "b.epub") as b:
        assert [(i.filename, i.compress_type) for i in a.infolist()] == [
            (i.filename, i.compress_type) for i in b.infolist()
        ]
        assert all(a.read(name) == b.read(name) for name in a.namelist())  # nothing translated: as it was


def test_translate_takes_a_book(trained_run, tmp_path):
    source = epub(tmp_path / "buch.epub", more={"OEBPS/toc.ncx": NCX}, item=TOC_ITEM)
    given = ["translate", "-c", str(trained_run), "--beam", "1", "-i", str(source)]
    done = run_cli(*given, "-o", str(tmp_path / "book.epub"))
    assert "2 chapters, 7 segments translated, 1 with inline elements kept in place" in done.stderr  # a toc label
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    with zipfile.ZipFile(tmp_path / "book.epub") as book:
        assert book.infolist()[0].filename == "mimetype" and book.infolist()[0].compress_type == zipfile.ZIP_STORED
        assert "<dc:language>en</dc:language>" in book.read("OEBPS/content.opf").decode("utf-8")
        first, second = (book.read(f"OEBPS/text/kapitel{n}.xhtml").decode("utf-8") for n in (1, 2))
        assert book.read("OEBPS/style.css") == b"p { margin: 0 }"
        toc = book.read("OEBPS/toc.ncx").decode("utf-8")
    for chapter in (first, second):
        minidom.parseString(chapter)  # still XML: no &nbsp; without a DTD
        assert 'xml:lang="en" lang="en"' in chapter
    assert f"<b>{LEXICON['schnell']}</b>" in first
    assert second.endswith(f"<p>{translator.translate('eine frau sitzt dort')}</p></body></html>")
    label = html.escape(translator.translate("kapitel 1: hund & katze"), quote=False)
    assert f"<text> {label} </text>" in toc
    refused = run_cli(*given, check=False)
    assert refused.returncode == 2 and "an EPUB book is written to a file, not stdout: -o out.epub" in refused.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        ({"mimetype": "text/plain"}, "not an EPUB book: its mimetype is not application/epub+zip"),
        ({"mimetype": "application/epub+zip"}, "not an EPUB book: it holds no META-INF/container.xml"),
    ],
)
def test_a_file_that_is_no_book_is_one_line(tmp_path, content, message):
    with zipfile.ZipFile(tmp_path / "a.epub", "w") as book:
        for name, text in content.items():
            book.writestr(name, text)
    with pytest.raises(MTError, match=re.escape(message)):
        Epub(tmp_path / "a.epub")
    (tmp_path / "b.epub").write_bytes(b"not a zip")
    with pytest.raises(MTError, match=r"b.epub: not an EPUB book \(an .epub is a zip\)"):
        Epub(tmp_path / "b.epub")


def test_a_chapter_named_with_escapes_in_the_package_is_found(tmp_path):
    with zipfile.ZipFile(tmp_path / "a.epub", "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr("META-INF/container.xml", CONTAINER)
        book.writestr("OEBPS/content.opf", OPF.replace("text/kapitel1.xhtml", "text/kapitel%201.xhtml"))
        book.writestr("OEBPS/text/kapitel 1.xhtml", CHAPTER.format(title="eins", text="ein hund"))
    assert list(Epub(tmp_path / "a.epub").pages) == ["OEBPS/text/kapitel 1.xhtml"]


def test_an_epub2_table_of_contents_has_its_labels_translated(tmp_path):
    book = Epub(epub(tmp_path / "a.epub", more={"OEBPS/toc.ncx": NCX}, item=TOC_ITEM))
    assert book.toc == "OEBPS/toc.ncx" and book.labels == {0: "kapitel 1: hund & katze"}  # "2" has no word
    book.label_translations = {0: "chapter 1: dog & cat"}
    with zipfile.ZipFile(io.BytesIO(book.output())) as written:
        toc = written.read("OEBPS/toc.ncx").decode("utf-8")
    minidom.parseString(toc)
    assert "<navLabel>\n  <text> chapter 1: dog &amp; cat </text></navLabel>" in toc  # its spaces kept
    assert "<text>ein buch</text>" in toc and "<text>2</text>" in toc  # the title is the package's; no word
    assert toc.replace("chapter 1: dog &amp; cat", "kapitel 1: hund &amp; katze") == NCX


def test_a_book_whose_chapters_are_encrypted_is_one_line(tmp_path):
    encryption = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
        '<enc:CipherReference URI="{}"/></enc:CipherData></enc:EncryptedData></encryption>'
    )
    fonts = epub(tmp_path / "a.epub", more={"META-INF/encryption.xml": encryption.format("OEBPS/font.otf")})
    assert len(Epub(fonts).pages) == 2  # an obfuscated font: the book is read
    chapter = encryption.format("OEBPS/text/kapitel2.xhtml")
    locked = epub(tmp_path / "b.epub", more={"META-INF/encryption.xml": chapter})
    with pytest.raises(MTError, match=r"b.epub: its chapters are encrypted \(DRM\): translate a copy without it"):
        Epub(locked)
