"""A Word document (.docx) translated: each paragraph through the translator, its formatting, links and
pictures kept in place as tags (protected spans, mt/decoding/protected_spans.py), the translations written
into the document (mt/data/word_document.py).

    report = mt.translate_docx(translator, "bericht.docx", "report.docx")
"""

from __future__ import annotations

from dataclasses import dataclass

from mt.data.word_document import TAG, WordDocument
from mt.decoding.protected_spans import kinds_of
from mt.errors import MTError


@dataclass
class WordReport:
    """What was done to a document's paragraphs, for the caller's summary."""

    translated: int = 0  # paragraphs
    with_formatting: int = 0  # of those, holding formatting, links or points kept in place

    def summary(self) -> str:
        paragraphs = f"{self.translated} paragraph{'' if self.translated == 1 else 's'} translated"
        kept = f", {self.with_formatting} with formatting kept in place" if self.with_formatting else ""
        return paragraphs + kept


class WordTranslation:
    """A document's paragraphs as lines to translate with these setting changes (tags always protected:
    they are the document's formatting); fill() writes their translations in."""

    def __init__(self, document: WordDocument, translator):
        self.document = document
        target = translator.settings.tgt_lang or translator.languages[1]
        self.language = target if isinstance(target, str) else ""  # for the caller to name the translation by
        self.lines = document.segments
        self.changes = {"protect": ",".join(dict.fromkeys([*kinds_of(translator.settings.protect), "tag"]))}
        self.report = WordReport(with_formatting=sum(bool(TAG.search(line)) for line in self.lines))

    def fill(self, found: list) -> None:
        """The Translations of self.lines, in order, written into the document."""
        self.document.translations = {i: translation.text for i, translation in enumerate(found)}
        self.report.translated = len(found)

    def output(self) -> bytes:
        return self.document.output()


def translate_docx(translator, path, output: str, glossary=None, progress: bool = False) -> WordReport:
    """Translate the Word document at path into output (a .docx file): the text of every paragraph (body,
    tables, headers, footers, notes), its formatting kept, as translator.translate would (its settings;
    glossary: an mt.Glossary)."""
    if not output:
        raise MTError(f"{path}: a Word document is written to a file: name the output (-o report.docx)")
    work = WordTranslation(WordDocument(path), translator)
    work.fill(translator.translate_with(work.lines, work.changes, glossary=glossary, progress=progress))
    work.document.write(output)
    return work.report
