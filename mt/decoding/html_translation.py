"""An HTML page translated: each segment of text through the translator, its inline elements and
placeholders kept in place as protected spans (mt/decoding/protected_spans.py), the translations written
into the page (mt/data/html_document.py).

    report = mt.translate_html(translator, "page.html", "page.en.html")
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from mt.data.html_document import HtmlPage
from mt.decoding.line_translator import document_changes
from mt.decoding.protected_spans import pattern_of, with_kinds
from mt.errors import counted


@dataclass
class HtmlReport:
    """What was done to a page, for the caller's summary."""

    translated: int = 0  # segments
    with_elements: int = 0  # of those, holding inline elements (or other protected spans)
    attributes: int = 0  # attribute values a reader sees (alt, title, placeholder, aria-label)

    def summary(self) -> str:
        segments = f"{counted(self.translated, 'segment')} translated"
        segments += f", {self.with_elements} with inline elements kept in place" if self.with_elements else ""
        return segments + (
            f"; {counted(self.attributes, 'attribute text')} (alt, title, ...) translated" if self.attributes else ""
        )


class HtmlTranslation:
    """A page's segments as lines to translate with these setting changes (tags always protected: the
    markup is not the model's to write); fill() writes their translations in."""

    def __init__(self, page: HtmlPage, translator):
        self.page = page
        page.check_language(translator.languages[0], translator.settings.tgt_lang or translator.languages[1])
        protect = with_kinds(translator.settings.protect, "tag")
        segments = [segment.source for segment in page.segments]
        self.lines = segments + [attribute.source for attribute in page.attributes]
        self.changes = {"protect": protect}
        spans = pattern_of(protect)
        self.report = HtmlReport(with_elements=sum(bool(spans.search(line)) for line in segments))

    def fill(self, found: list) -> None:
        """The Translations of self.lines (the segments', then the attributes'), in order, written into the page."""
        n = len(self.page.segments)
        self.page.translations = {i: translation.text for i, translation in enumerate(found[:n])}
        self.page.attribute_translations = {i: translation.text for i, translation in enumerate(found[n:])}
        self.report.translated, self.report.attributes = n, len(found) - n

    def text(self) -> str:
        return self.page.output()


def translate_html(
    translator,
    path,
    output: str | None = None,
    glossary=None,
    progress: bool = False,
    out=None,
    split_sentences: bool = True,
) -> HtmlReport:
    """Translate the HTML page at path into output (None: out, by default stdout): the text of every segment, its markup
    kept, as translator.translate would (its settings, sentence by sentence unless split_sentences=False; glossary: an
    mt.Glossary)."""
    work = HtmlTranslation(HtmlPage(path), translator)
    changes = document_changes(work.changes, split_sentences)
    work.fill(translator.translate_with(work.lines, changes, glossary=glossary, progress=progress))
    work.page.write(output, out or sys.stdout)
    return work.report
