"""EPUB books: `translate -i buch.epub -o book.epub` translates every chapter and keeps the book whole.

An EPUB file is a zip: a `mimetype` entry first, META-INF/container.xml naming the package document (the
.opf), whose manifest lists the book's files; its chapters are XHTML (application/xhtml+xml), each read as
an HTML page (mt/data/html_document.py: segments at block elements, inline markup kept). The package's
<dc:language> names the target language after translation. An EPUB 2 table of contents (toc.ncx, which
older readers show; EPUB 3's is a chapter, nav.xhtml) has its entries' labels translated too. Everything else
(pictures, stylesheets, fonts, the file order, each entry's compression) is written back as it was. A book
whose chapters are encrypted (DRM) is refused in one line.
"""

from __future__ import annotations

import html
import io
import os
import posixpath
import re
import zipfile
from pathlib import Path
from urllib.parse import unquote

from mt.data.html_document import HtmlPage
from mt.data.lines import document_bytes, write_document_bytes
from mt.errors import MTError

ROOTFILE = re.compile(r"""<rootfile\b[^>]*\bfull-path\s*=\s*["']([^"']+)["']""")
ITEM = re.compile(r"<(?:\w+:)?item\b[^>]*>")
LANGUAGE = re.compile(r"(<dc:language\b[^>]*>)([^<]*)(</dc:language>)")
CHAPTER, TOC = "application/xhtml+xml", "application/x-dtbncx+xml"  # media types in the manifest
LABEL = re.compile(r"(<(?:\w+:)?navLabel\b[^>]*>\s*<(?:\w+:)?text\b[^>]*>)([^<]*)(</(?:\w+:)?text>)")
ENCRYPTED = re.compile(r"""<(?:\w+:)?CipherReference\b[^>]*\bURI\s*=\s*["']([^"']+)["']""")


def is_epub_name(path: str | None) -> bool:
    """Whether a file named so is an EPUB book (.epub)."""
    return bool(path) and Path(path).name.lower().endswith(".epub")


def attribute(tag: str, name: str) -> str | None:
    found = re.search(rf"""\b{name}\s*=\s*["']([^"']*)["']""", tag)
    return found.group(1) if found else None


class Epub:
    """An EPUB book read whole: its chapters as HTML pages, written back with their translations."""

    def __init__(self, path: str | os.PathLike, data: bytes | None = None):
        self.path = str(path)
        self.data = document_bytes(path, data)
        try:
            with zipfile.ZipFile(io.BytesIO(self.data)) as book:
                if book.read("mimetype").strip() != b"application/epub+zip":
                    raise MTError(f"{self.path}: not an EPUB book: its mimetype is not application/epub+zip")
                container = book.read("META-INF/container.xml").decode("utf-8")
                package = ROOTFILE.search(container)
                if package is None:
                    raise MTError(f"{self.path}: META-INF/container.xml names no package document (full-path)")
                self.package = package.group(1)
                self.opf = book.read(self.package).decode("utf-8")
                names = set(book.namelist())
                items = [(name, kind) for name, kind in self._items() if name in names]
                chapters = [name for name, kind in items if kind == CHAPTER]
                self.refuse_encrypted(book, chapters)
                self.pages = {name: HtmlPage(f"{self.path}:{name}", book.read(name)) for name in chapters}
                self.toc = next((name for name, kind in items if kind == TOC), None)
                self.toc_xml = book.read(self.toc).decode("utf-8") if self.toc else ""
                for page in self.pages.values():
                    page.xhtml = True  # a book's chapters are XML, whatever their first line says
        except zipfile.BadZipFile:
            raise MTError(f"{self.path}: not an EPUB book (an .epub is a zip)") from None
        except KeyError as err:  # "There is no item named 'mimetype' in the archive"
            missing = re.search(r"'([^']*)'", str(err))
            missing = missing[1] if missing else "package document"
            raise MTError(f"{self.path}: not an EPUB book: it holds no {missing}") from None
        except UnicodeDecodeError as err:
            raise MTError(f"{self.path}: a part of it is not UTF-8 ({err.reason})") from None
        self.language = ""  # the target language, written into <dc:language> (set by the caller)
        labels = [html.unescape(match[2]) for match in LABEL.finditer(self.toc_xml)]
        self.labels = {i: label.strip() for i, label in enumerate(labels) if any(char.isalpha() for char in label)}
        self.label_translations: dict[int, str] = {}  # a label's number in the toc -> its translation

    def _items(self) -> list[tuple[str, str]]:
        """The package's files, in its manifest's order, as paths in the zip, and their media types."""
        folder = posixpath.dirname(self.package)
        found = []
        for item in ITEM.findall(self.opf):
            href = attribute(item, "href")
            if href:  # a%20b: "a b"
                name = posixpath.normpath(posixpath.join(folder, unquote(href.split("#")[0])))
                found.append((name, attribute(item, "media-type") or ""))
        return found

    def refuse_encrypted(self, book: zipfile.ZipFile, chapters: list[str]) -> None:
        """One line where META-INF/encryption.xml lists a chapter (DRM); fonts alone may be obfuscated."""
        if "META-INF/encryption.xml" not in book.namelist():
            return
        listed = ENCRYPTED.findall(book.read("META-INF/encryption.xml").decode("utf-8", "replace"))
        if set(chapters) & {posixpath.normpath(unquote(uri)) for uri in listed}:
            raise MTError(f"{self.path}: its chapters are encrypted (DRM): translate a copy without it")

    def toc_output(self) -> str:
        """toc.ncx with its labels' translations in place (the spaces around each kept)."""
        count = iter(range(len(LABEL.findall(self.toc_xml))))

        def label(match: re.Match) -> str:
            found = self.label_translations.get(next(count))
            if found is None:
                return match[0]
            text = match[2]
            spaces = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
            return match[1] + spaces[0] + html.escape(found.strip(), quote=False) + spaces[1] + match[3]

        return LABEL.sub(label, self.toc_xml)

    def output(self) -> bytes:
        """The book with each chapter and toc label translated and the package naming the target language."""
        written = {name: page.output().encode("utf-8") for name, page in self.pages.items()}
        if self.label_translations:
            written[self.toc] = self.toc_output().encode("utf-8")
        if self.language:
            opf = LANGUAGE.sub(lambda m: m[1] + self.language + m[3], self.opf, count=1)
            written[self.package] = opf.encode("utf-8")
        buffer = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(self.data)) as source, zipfile.ZipFile(buffer, "w") as target:
            for info in source.infolist():  # the mimetype first and stored, as it was
                target.writestr(info, written.get(info.filename) or source.read(info))
        return buffer.getvalue()

    def write(self, path: str) -> None:
        write_document_bytes(path, self.output())
