"""An XLIFF document translated: its segments' text through the translator, their inline codes placed by the
model's alignment (mt/decoding/inline_tags.py), the targets written into the document (mt/data/xliff.py).

    report = mt.translate_xliff(translator, "doc.xlf", "doc.en.xlf")
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from xml.dom import Node

from mt.data.tmx import same_language, xml_text
from mt.data.xliff import Segment, Xliff, wraps_text
from mt.decoding.inline_tags import Flattened, alignment_layer, flatten, place, render, token_alignment
from mt.decoding.line_translator import document_changes
from mt.decoding.protected_spans import pattern_of
from mt.errors import counted


@dataclass
class XliffReport:
    """What was done to a document's segments, for the caller's summary."""

    translated: int = 0
    with_codes: int = 0  # translated segments holding inline codes
    placed_by_position: int = 0  # of those, placed without an alignment
    protected: int = 0  # translated segments whose text held protected spans (web addresses, placeholders)
    copied: int = 0  # segments without a word (codes, numbers, punctuation), copied as they are
    kept: int = 0  # segments whose target already held text
    not_translated: int = 0  # units marked translate="no"
    replaced: int = 0  # characters XML cannot hold, written as U+FFFD

    def summary(self) -> str:
        parts = [counted(self.translated, "segment") + " translated"]
        if self.with_codes:
            aligned, by_position = self.with_codes - self.placed_by_position, self.placed_by_position
            how = " placed by alignment" if not by_position else " placed by relative position" if not aligned else ""
            how = how or f": {aligned} placed by alignment, {by_position} by relative position"
            parts.append(f"{self.with_codes} with inline codes{how}")
        if self.protected:
            parts.append(f"spans kept untranslated in {counted(self.protected, 'segment')}")
        if self.copied:
            parts.append(f"{counted(self.copied, 'segment')} without words copied")
        if self.kept:
            parts.append(f"{counted(self.kept, 'target')} already translated kept")
        if self.not_translated:
            parts.append(f'{counted(self.not_translated, "unit")} marked translate="no" left as they are')
        if self.replaced:
            parts.append(f"{counted(self.replaced, 'character')} XML cannot hold written as U+FFFD")
        return "; ".join(parts)


@dataclass
class Batch:
    """A document's segments decoded alike: into one target language (None: the model's one, or the one
    chosen), with an alignment for their inline codes or without."""

    tgt_lang: str | None
    aligned: bool
    items: list[tuple[Segment, Flattened]]

    @property
    def lines(self) -> list[str]:
        return [flat.text for _, flat in self.items]


class XliffTranslation:
    """An XLIFF document's segments to translate, in batches of lines; fill() puts their translations in."""

    def __init__(self, doc: Xliff, translator):
        self.doc = doc
        doc.check_languages(translator.languages[0], translator.settings.tgt_lang or translator.languages[1])
        segments = doc.segments()
        self.report = XliffReport(kept=doc.kept, not_translated=doc.not_translated)
        by_language: dict[str, list[tuple[Segment, Flattened]]] = {}
        spans = pattern_of(translator.settings.protect)  # kept as codes are (batch_settings turns it off after)
        for segment in segments:
            flat = flatten(segment.source, wraps_text, spans)
            if not any(char.isalpha() for char in flat.text):  # no word: its numbers, codes and spaces as they are
                target = segment.fill()
                for child in segment.source.childNodes:
                    target.appendChild(child.cloneNode(True))
                self.report.copied += 1
                continue
            by_language.setdefault(segment.target_language, []).append((segment, flat))
        self.batches = [  # per target language, the segments without codes, then those with
            Batch(target_of(translator, language), aligned, items)
            for language, todo in by_language.items()
            for aligned in (False, True)
            if (items := [(s, f) for s, f in todo if bool(f.codes) == aligned])
        ]

    def fill(self, batch: Batch, found: list) -> None:
        """The batch's targets filled with their Translations (in order), and their codes placed."""
        for (segment, flat), translation in zip(batch.items, found):
            aligned = None
            if batch.aligned and translation.attention is not None:
                aligned = token_alignment(
                    translation.attention, translation.src_pieces, translation.tgt_pieces, flat.text, translation.text
                )
            text, replaced = xml_text(translation.text)
            self.report.replaced += replaced
            self.report.translated += 1
            render(segment.fill(), flat, text, place(flat, text, aligned))
            spans = sum(code.node.nodeType == Node.TEXT_NODE for code in flat.codes)  # a protected span's text
            codes = len(flat.codes) > spans  # the document's own inline codes
            self.report.with_codes += codes
            self.report.placed_by_position += codes and aligned is None
            self.report.protected += spans > 0


def translate_xliff(
    translator,
    path,
    output: str | None = None,
    glossary=None,
    progress: bool = False,
    out=None,
    split_sentences: bool = True,
) -> XliffReport:
    """Translate the XLIFF document at path into output (None: out, by default stdout): every segment without a
    translation, as translator.translate would (its settings, sentence by sentence unless split_sentences=False;
    glossary: an mt.Glossary), codes kept."""
    work = XliffTranslation(Xliff(path), translator)
    for batch in work.batches:
        changes, layer = batch_settings(translator, batch)
        changes = document_changes(changes, split_sentences)
        found = translator.translate_with(
            batch.lines, changes, glossary=glossary, progress=progress, attention_layer=layer
        )
        work.fill(batch, found)
    work.doc.write(output, out or sys.stdout)
    return work.report


def batch_settings(translator, batch: Batch) -> tuple[dict, int | None]:
    """The settings a batch decodes with beside the translator's (its target language, each segment whole
    where its codes need an alignment, no protected spans: flatten has made them codes already), and the
    decoder layer to align with (None: none)."""
    layer = alignment_layer(translator) if batch.aligned else None
    whole = {"split_sentences": False} if layer is not None else {}
    return {"tgt_lang": batch.tgt_lang, "protect": "none", **whole}, layer


def target_of(translator, language: str) -> str | None:
    """The target language to ask a model of several for (its own code for the document's), None for one."""
    targets = translator.languages[1]
    if not isinstance(targets, list) or translator.settings.tgt_lang:
        return None
    return next((code for code in targets if same_language(language, code)), language or None)
