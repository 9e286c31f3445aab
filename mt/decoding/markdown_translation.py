"""A Markdown document translated: each segment (a heading, paragraph, list item, quote or table cell) through
the translator, its inline markup kept in place as protected spans (mt/decoding/protected_spans.py), the
translations written into the document (mt/data/markdown_document.py).

    report = mt.translate_markdown(translator, "README.de.md", "README.en.md")
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from mt.data.markdown_document import TAG, MarkdownDocument
from mt.decoding.line_translator import document_changes
from mt.decoding.protected_spans import with_kinds
from mt.errors import counted


@dataclass
class MarkdownReport:
    """What was done to a document's segments, for the caller's summary."""

    translated: int = 0  # segments
    with_markup: int = 0  # of those, holding inline markup (links, emphasis, code) kept in place

    def summary(self) -> str:
        segments = f"{counted(self.translated, 'segment')} translated"
        return segments + (f", {self.with_markup} with inline markup kept in place" if self.with_markup else "")


class MarkdownTranslation:
    """A document's segments as lines to translate with these setting changes (tags always protected: the
    markup is not the model's to write); fill() writes their translations in."""

    def __init__(self, document: MarkdownDocument, translator):
        self.document = document
        self.language = translator.target_language  # for the caller to name the translation by
        self.lines = document.segments
        self.changes = {"protect": with_kinds(translator.settings.protect, "tag")}
        self.report = MarkdownReport(with_markup=sum(bool(TAG.search(line)) for line in self.lines))

    def fill(self, found: list) -> None:
        """The Translations of self.lines, in order, written into the document."""
        self.document.translations = {i: translation.text for i, translation in enumerate(found)}
        self.report.translated = len(found)

    def text(self) -> str:
        return self.document.output()


def translate_markdown(
    translator,
    path,
    output: str | None = None,
    glossary=None,
    progress: bool = False,
    out=None,
    split_sentences: bool = True,
) -> MarkdownReport:
    """Translate the Markdown document at path into output (None: out, by default stdout): the text of every heading,
    paragraph, list item, quote and table cell, its markup kept, as translator.translate would (its settings, sentence
    by sentence unless split_sentences=False; glossary: an mt.Glossary)."""
    work = MarkdownTranslation(MarkdownDocument(path), translator)
    changes = document_changes(work.changes, split_sentences)
    work.fill(translator.translate_with(work.lines, changes, glossary=glossary, progress=progress))
    work.document.write(output, out or sys.stdout)
    return work.report
