"""EPUB books: `translate -i buch.epub -o book.epub` translates every chapter and keeps the book whole.

An EPUB file is a zip: a `mimetype` entry first, META-INF/container.xml naming the package document (the
.opf), whose manifest lists the book's files; its chapters are XHTML (application/xhtml+xml), each read as
an HTML page (mt/data/html_document.py: segments at block elements, inline markup kept). The package's
<dc:language> names the target language after translation; everything else (pictures, stylesheets, fonts,
the table of contents' file order, each entry's compression) is written back as it was.
"""

from __future__ import annotations

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
                chapters = [name for name in self._chapters() if name in names]
                self.pages = {name: HtmlPage(f"{self.path}:{name}", book.read(name)) for name in chapters}
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

    def _chapters(self) -> list[str]:
        """The package's XHTML files, in its manifest's order, as paths in the zip."""
        folder = posixpath.dirname(self.package)
        found = []
        for item in ITEM.findall(self.opf):
            href = attribute(item, "href")
            if href and attribute(item, "media-type") == "application/xhtml+xml":
                found.append(posixpath.normpath(posixpath.join(folder, unquote(href.split("#")[0]))))  # a%20b: "a b"
        return found

    def output(self) -> bytes:
        """The book with each chapter translated and the package naming the target language."""
        written = {name: page.output().encode("utf-8") for name, page in self.pages.items()}
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
