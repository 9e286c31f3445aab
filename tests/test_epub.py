"""EPUB books (mt/data/epub.py, mt/decoding/epub_translation.py): each XHTML chapter the package lists read
as an HTML page, translated, and the book written back whole: the mimetype first and stored, the package
naming the target language, every other entry as it was."""

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


def epub(path, first="ein mann läuft <b>schnell</b> hier", second="eine frau sitzt&#160;dort"):
    """A book of two chapters (a bold word in one, a no-break space in the other, which does not declare
    itself XML), a stylesheet."""
    with zipfile.ZipFile(path, "w") as book:
        book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")  # first, stored
        book.writestr("META-INF/container.xml", CONTAINER, zipfile.ZIP_DEFLATED)
        book.writestr("OEBPS/content.opf", OPF, zipfile.ZIP_DEFLATED)
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
    given = ["translate", "-c", str(trained_run), "--beam", "1", "-i", str(epub(tmp_path / "buch.epub"))]
    done = run_cli(*given, "-o", str(tmp_path / "book.epub"))
    assert "2 chapters, 6 segments translated, 1 with inline elements kept in place" in done.stderr
    translator = mt.load_translator(trained_run / "checkpoints" / "final.pt", device="cpu", beam=1)
    with zipfile.ZipFile(tmp_path / "book.epub") as book:
        assert book.infolist()[0].filename == "mimetype" and book.infolist()[0].compress_type == zipfile.ZIP_STORED
        assert "<dc:language>en</dc:language>" in book.read("OEBPS/content.opf").decode("utf-8")
        first, second = (book.read(f"OEBPS/text/kapitel{n}.xhtml").decode("utf-8") for n in (1, 2))
        assert book.read("OEBPS/style.css") == b"p { margin: 0 }"
    for chapter in (first, second):
        minidom.parseString(chapter)  # still XML: no &nbsp; without a DTD
        assert 'xml:lang="en" lang="en"' in chapter
    assert f"<b>{LEXICON['schnell']}</b>" in first
    assert second.endswith(f"<p>{translator.translate('eine frau sitzt dort')}</p></body></html>")
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
