"""A gettext catalogue translated: each untranslated message through the translator, line by line, its
placeholders kept (protected spans, printf's %s and %d among them) and its accelerator key too
(mt/decoding/accelerators.py), the translations written in and marked fuzzy for review (mt/data/po.py).

    report = mt.translate_po(translator, "app.pot", "de.po")
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from mt.data.po import Catalogue
from mt.decoding.accelerators import MARKERS, Accelerator, put_accelerator, take_accelerator
from mt.decoding.line_translator import document_changes
from mt.decoding.protected_spans import pattern_of
from mt.decoding.xliff_translation import target_of
from mt.errors import counted


@dataclass
class PoReport:
    """What was done to a catalogue's entries, for the caller's summary."""

    translated: int = 0  # entries given translations
    plural: int = 0  # of those, with plural forms
    copied: int = 0  # entries without a word (numbers, placeholders, punctuation), copied as they are
    kept: int = 0  # entries translated already
    accelerators: int = 0  # of the translated, with an accelerator marker (_Open, &File) carried over

    def summary(self) -> str:
        details = [f"{self.plural} with plural forms"] if self.plural else []
        details += [f"{self.accelerators} with accelerator keys kept"] if self.accelerators else []
        details_text = f" ({', '.join(details)})" if details else ""
        parts = [counted(self.translated, "message") + f" translated{details_text}, marked fuzzy for review"]
        if self.copied:
            parts.append(f"{counted(self.copied, 'message')} without words copied")
        if self.kept:
            parts.append(f"{counted(self.kept, 'message')} already translated kept")
        return "; ".join(parts)


def protect_for(protect: str) -> str:
    """The spans to protect in a catalogue's messages: the translator's, and printf's placeholders (%s, %d)
    too where protecting is on: software's strings hold them far more often than a "100%ig"."""
    return f"{protect},printf" if pattern_of(protect) and "printf" not in protect else protect


@dataclass
class Message:
    """A line of one of an entry's texts (msgid, msgid_plural), cut from the whitespace around it."""

    entry: int
    text: int
    line: int
    core: str  # what the model reads: without the accelerator marker
    lead: str
    trail: str
    accelerator: Accelerator | None


class PoTranslation:
    """A catalogue's untranslated messages as lines to translate with these setting changes (its target
    language, its spans to protect); fill() writes their translations in."""

    def __init__(self, catalogue: Catalogue, translator):
        self.catalogue = catalogue
        self.language = catalogue.check_language(translator.settings.tgt_lang or translator.languages[1])
        entries = [e for e in catalogue.entries if not e.obsolete and not e.is_header]
        self.todo = [e for e in entries if e.untranslated()]
        self.report = PoReport(kept=len(entries) - len(self.todo))
        texts = [
            [e.strings["msgid"], *([e.strings["msgid_plural"]] if "msgid_plural" in e.strings else [])]
            for e in self.todo
        ]
        self.outputs = [[text.split("\n") for text in entry_texts] for entry_texts in texts]  # filled line by line
        protect = protect_for(translator.settings.protect)
        self.spans = spans = pattern_of(protect)
        declared = catalogue.header_field("X-Accelerator-Marker")  # KDE's catalogues name theirs
        markers = MARKERS if declared is None else declared.strip()
        self.messages = []
        for i, entry_texts in enumerate(texts):
            for j, text in enumerate(entry_texts):
                for k, line in enumerate(text.split("\n")):
                    core, accelerator = take_accelerator(line.strip(), markers, spans)
                    if any(char.isalpha() for char in (spans.sub("", core) if spans else core)):
                        lead, trail = line[: len(line) - len(line.lstrip())], line[len(line.rstrip()) :]
                        self.messages.append(Message(i, j, k, core, lead, trail, accelerator))
        self.lines = [m.core for m in self.messages]
        self.changes = {"tgt_lang": target_of(translator, self.language), "protect": protect}

    def fill(self, found: list) -> None:
        """The Translations of self.lines, in order, written into their entries (marked fuzzy)."""
        for m, translation in zip(self.messages, found):
            text = put_accelerator(translation.text, m.accelerator, self.spans)
            self.outputs[m.entry][m.text][m.line] = m.lead + text + m.trail
        translated = {m.entry for m in self.messages}
        self.report.accelerators = len({m.entry for m in self.messages if m.accelerator})
        plural = any("msgid_plural" in e.strings for e in self.todo)
        forms = self.catalogue.plural_forms(self.language) if plural else 2
        one = self.catalogue.form_of_one() if plural else 0
        for i, entry in enumerate(self.todo):
            done = ["\n".join(lines) for lines in self.outputs[i]]
            if len(done) == 2:  # the singular for the form 1 takes, the plural for the others (one form: plural)
                done = [done[1]] if forms == 1 else [done[0] if k == one else done[1] for k in range(forms)]
            entry.fill(done)
            self.report.translated += i in translated
            self.report.plural += i in translated and "msgid_plural" in entry.strings
            self.report.copied += i not in translated

    def text(self) -> str:
        return self.catalogue.text()


def translate_po(
    translator,
    path,
    output: str | None = None,
    glossary=None,
    progress: bool = False,
    out=None,
    split_sentences: bool = True,
) -> PoReport:
    """Translate the PO catalogue (or .pot template) at path into output (None: out, by default stdout): every entry
    without a translation, each line of a message apart (a message of no word copied), as translator.translate would
    (its settings, sentence by sentence unless split_sentences=False; glossary: an mt.Glossary)."""
    work = PoTranslation(Catalogue(path), translator)
    changes = document_changes(work.changes, split_sentences)
    work.fill(translator.translate_with(work.lines, changes, glossary=glossary, progress=progress))
    work.catalogue.write(output, out or sys.stdout)
    return work.report
