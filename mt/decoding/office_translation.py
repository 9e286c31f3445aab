"""An Office document (.docx, .pptx, .xlsx; OpenDocument's .odt, .odp, .ods) translated: each paragraph through the
translator, its formatting, links and pictures kept in place as tags (protected spans,
mt/decoding/protected_spans.py), the translations written into the document (mt/data/office_document.py).

    report = mt.translate_office(translator, "bericht.docx", "report.docx")
"""

from __future__ import annotations

from dataclasses import dataclass

from mt.data.office_document import TAG, OfficeDocument
from mt.decoding.line_translator import document_changes
from mt.decoding.protected_spans import with_kinds
from mt.errors import MTError, counted


@dataclass
class OfficeReport:
    """What was done to a document's paragraphs, for the caller's summary."""

    translated: int = 0  # paragraphs (an Excel file's cell texts)
    with_formatting: int = 0  # of those, holding formatting, links or points kept in place
    unit: str = "paragraph"

    def summary(self) -> str:
        done = f"{counted(self.translated, self.unit)} translated"
        return done + (f", {self.with_formatting} with formatting kept in place" if self.with_formatting else "")


class OfficeTranslation:
    """A document's paragraphs as lines to translate with these setting changes (tags always protected:
    they are the document's formatting); fill() writes their translations in."""

    def __init__(self, document: OfficeDocument, translator):
        self.document = document
        self.language = translator.target_language  # for the caller to name the translation by
        document.language = self.language
        self.lines = document.segments
        self.changes = {"protect": with_kinds(translator.settings.protect, "tag")}
        formatted = sum(bool(TAG.search(line)) for line in self.lines)
        self.report = OfficeReport(with_formatting=formatted, unit=document.markup.unit)

    def fill(self, found: list) -> None:
        """The Translations of self.lines, in order, written into the document."""
        self.document.translations = {i: translation.text for i, translation in enumerate(found)}
        self.report.translated = len(found)

    def output(self) -> bytes:
        return self.document.output()


def translate_office(
    translator, path, output: str, glossary=None, progress: bool = False, split_sentences: bool = True
) -> OfficeReport:
    """Translate the Office document at path (Word .docx, PowerPoint .pptx, Excel .xlsx) into output, a file of the
    same format: the text of every paragraph (Word: body, tables, headers, footers, notes; PowerPoint: slides and
    speaker notes; Excel: every cell's text; OpenDocument's too), its formatting kept, as translator.translate would
    (its settings, sentence by sentence unless split_sentences=False; glossary: an mt.Glossary)."""
    if not output:
        raise MTError(f"{path}: an Office document is written to a file: name the output (-o report.docx)")
    work = OfficeTranslation(OfficeDocument(path), translator)
    changes = document_changes(work.changes, split_sentences)
    work.fill(translator.translate_with(work.lines, changes, glossary=glossary, progress=progress))
    work.document.write(output)
    return work.report
