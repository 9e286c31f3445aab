"""An EPUB book translated: each chapter as an HTML page is (mt/decoding/html_translation.py), all of them
decoded together, the translations written into the book (mt/data/epub.py).

    report = mt.translate_epub(translator, "buch.epub", "book.epub")
"""

from __future__ import annotations

from dataclasses import dataclass

from mt.data.epub import Epub
from mt.decoding.html_translation import HtmlTranslation
from mt.decoding.line_translator import document_changes
from mt.errors import MTError, counted


@dataclass
class EpubReport:
    """What was done to a book's chapters, for the caller's summary."""

    chapters: int = 0
    translated: int = 0  # segments
    with_elements: int = 0  # of those, holding inline elements kept in place

    def summary(self) -> str:
        done = f"{counted(self.chapters, 'chapter')}, {counted(self.translated, 'segment')} translated"
        return done + (f", {self.with_elements} with inline elements kept in place" if self.with_elements else "")


class EpubTranslation:
    """A book's chapters' lines to translate with these setting changes; fill() writes their translations in."""

    def __init__(self, book: Epub, translator):
        self.book = book
        self.pages = [HtmlTranslation(page, translator) for page in book.pages.values()]
        self.language = translator.target_language  # for the caller to name the translation by
        book.language = self.language
        self.lines = [line for page in self.pages for line in page.lines] + list(book.labels.values())
        self.changes = self.pages[0].changes if self.pages else {}
        self.report = EpubReport(len(self.pages), with_elements=sum(page.report.with_elements for page in self.pages))

    def fill(self, found: list) -> None:
        """The Translations of self.lines, in order, written into the chapters and the toc's labels."""
        at = 0
        for page in self.pages:
            page.fill(found[at : at + len(page.lines)])
            at += len(page.lines)
            self.report.translated += page.report.translated
        self.book.label_translations = {i: found[at + k].text for k, i in enumerate(self.book.labels)}
        self.report.translated += len(self.book.labels)

    def output(self) -> bytes:
        return self.book.output()


def translate_epub(
    translator, path, output: str, glossary=None, progress: bool = False, split_sentences: bool = True
) -> EpubReport:
    """Translate the EPUB book at path into output (an .epub file): the text of every chapter, its markup kept, as
    translator.translate would (its settings, sentence by sentence unless split_sentences=False; glossary: an
    mt.Glossary)."""
    if not output:
        raise MTError(f"{path}: a book is written to a file: name the output (-o book.epub)")
    work = EpubTranslation(Epub(path), translator)
    changes = document_changes(work.changes, split_sentences)
    work.fill(translator.translate_with(work.lines, changes, glossary=glossary, progress=progress))
    work.book.write(output)
    return work.report
